// The HTTP API server: the gpuaas.io/v1 resources (read from the ObjectCache, never from the
// database), the fleet summary, health, version and Prometheus metrics. Layer 10 of
// docs/architecture.md. Errors are application/problem+json with a reason; unknown routes 404,
// wrong methods 405 (with Allow), oversized bodies 413.
#ifndef GPUAAS_API_SERVER_H_
#define GPUAAS_API_SERVER_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "api/auth.h"
#include "api/http.h"
#include "common/clock.h"
#include "service/pools.h"
#include "store/cache.h"

namespace gpuaas::telemetry {
class Hub;
}
namespace gpuaas::service {
class ClusterService;
class DefragService;
}

namespace gpuaas::api {

// A rate for each role of token.
struct RoleRates {
  double operator_ = 0;
  double member = 0;
  double agent = 0;
  static RoleRates All(double rate) { return {rate, rate, rate}; }
  double For(Role role) const { return role == Role::kOperator ? operator_ : role == Role::kMember ? member : agent; }
  // Sets one role's rate from "ROLE=N" (ROLE: operator, member, agent or all; N >= 0);
  // InvalidArgument saying what is wrong otherwise.
  absl::Status Set(std::string_view role_equals_rate);
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 picks a free port; see ApiServer::port()
  // I/O threads. Connections are event-driven, so this bounds parallel work, not connections;
  // about one per core.
  int threads = 2;
  size_t max_body_bytes = 1 << 20;
  std::string version;
  // Connections in all and from one client address (docs/security.md has the reasons).
  int max_connections = 10000;
  int max_connections_per_address = 1000;
  int head_timeout_s = 30;
  // Requests per second per token, by the token's role (a burst of twice as many is allowed);
  // past it 429 with Retry-After. 0 turns the limit off for that role.
  RoleRates requests_per_second_per_token = RoleRates::All(100);
  // Telemetry pushed per token, in body bytes a second (bursts of twice as much); past it 429.
  // 4 MiB/s is dcgm-exporter text (a few KB a GPU) for hundreds of GPUs every second; a node
  // agent pushing 8 GPUs every 10 s uses a few KB/s of it. 0: off.
  RoleRates telemetry_bytes_per_second_per_token = RoleRates::All(4 << 20);
  // How long a write's reply waits for the read cache to show the write (read-your-writes);
  // past it the reply carries a Warning header.
  std::chrono::milliseconds read_your_write_timeout{5000};
  // How often a watch that allows bookmarks gets one.
  std::chrono::milliseconds watch_bookmark_interval{60000};
  // Where the API reads the time of day: invoices' open month and budgets, table ages,
  // telemetry windows. Null: the system clock. Tests pass the FakeClock their services run on.
  const Clock* clock = nullptr;
  // The dashboard's built files (web/dist): served at / and the pages' paths. Empty: those
  // paths answer 404 saying so. Start fails when the folder has no index.html.
  std::string web_root;
  // Appends more metrics to /metrics (the controllers'); called on an I/O thread, must be
  // thread-safe. Optional.
  std::function<void(std::string&)> more_metrics;
  // HTTPS with this certificate (chain, PEM file) and its key; both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Behind Kubernetes' aggregation layer (an APIService): a caller whose client certificate this
  // CA signed (kube-apiserver's --requestheader-client-ca-file) and whose common name is one of
  // `front_proxy_names` (empty: any) is the user its X-Remote-User header names, with the roles
  // of its X-Remote-Group headers (FrontProxyPrincipal, auth.h). HTTPS only; other callers still
  // need a token, and their X-Remote-* headers are ignored.
  std::string front_proxy_ca_file;
  std::vector<std::string> front_proxy_names;
  // Clusters registered while the server runs (/api/v1/clusters, operators only). Null: those
  // routes answer 501 saying so. Not owned.
  service::ClusterService* clusters = nullptr;
  // MIG defragmentation (/api/v1/defrag, operators only). Null: those routes answer 501. Not owned.
  service::DefragService* defrag = nullptr;
  // Replicas: the leader's URL while another replica leads, "" while this one does (or none
  // does). Telemetry (pushes, series, alerts, the assessment, the GPUs' live view) lives in the
  // leader's memory: the others forward those requests to it. Null: served here (one process).
  std::function<std::string()> leader_url;
  std::string replica_name;  // this replica, in the header of a forwarded request
};

// The resource kinds the API serves, by plural ("gpucapacities" -> "GpuCapacity").
struct ResourceType {
  std::string plural;
  std::string kind;
  bool namespaced = false;
  bool creatable = false;  // POST to its list route
  bool deletable = false;  // DELETE of one object
  bool operators_only = false;  // read by operators alone (MigLayouts, Defragmentations)
  bool patchable = false;  // PATCH and PUT of one object (labels and annotations at least)
};
const std::vector<ResourceType>& ResourceTypes();

// Who may call a route, per role. Every route declares one (the route/role matrix test reads
// them all from ApiServer::Routes): `docs/security.md` has the table.
enum class Grant {
  kNo,     // refused: 401 without a token, 403 with one
  kYes,    // allowed, unscoped
  kOwn,    // members: their own project's objects (and the fleet inventory, read-only);
           // agents: the GPUs of the nodes their token is bound to
  kFleet,  // agents: the fleet inventory only (clusters, nodes, GPUs, SpecAndCounts), nothing of
           // any project
};
struct Policy {
  Grant operator_ = Grant::kNo;
  Grant member = Grant::kNo;
  Grant agent = Grant::kNo;
  Grant anonymous = Grant::kNo;
};
std::string_view ToString(Grant g);

struct RouteInfo {
  std::string method;
  std::string pattern;  // "/apis/gpuaas.io/v1/namespaces/{namespace}/{plural}"
  Policy policy;
};

class ApiServer {
 public:
  // `pools` may be null: the pool routes then answer 501. `auth` null: no authentication, every
  // caller is an operator (tests; `gpuaas server --insecure-no-auth`). `telemetry` null: no
  // telemetry routes (404). Not owned.
  ApiServer(ServerOptions options, store::ObjectCache& cache, service::PoolService* pools = nullptr,
            Authenticator* auth = nullptr, telemetry::Hub* telemetry = nullptr);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and starts serving in background threads. Unavailable when the address is taken.
  absl::Status Start();
  // The bound port (after Start).
  int port() const;
  // Stops accepting and finishes in-flight requests. Idempotent.
  void Stop();
  // /readyz answers 200 only once ready (the first inventory sync has landed).
  void SetReady(bool ready);
  // Loads the TLS certificate and key again (SIGHUP; changed files are also noticed within a
  // second): new connections use them. On an error the last good pair stays and the error says
  // which file is wrong; FailedPrecondition over plain HTTP.
  absl::Status ReloadTls();
  // Answers one request as the HTTP server would, without a socket (the request-path fuzzer).
  HttpResponse Handle(const HttpRequest& req);
  // Every route with its policy, sorted by pattern and method.
  std::vector<RouteInfo> Routes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuaas::api

#endif  // GPUAAS_API_SERVER_H_
