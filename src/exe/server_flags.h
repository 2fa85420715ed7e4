// The flags of `gpuaas server`, and what they mean once checked together: where the API listens
// and how, which simulated fleet it plays, where the admission webhook listens. Checked before
// anything starts, so that a bad combination costs nothing.
#ifndef GPUAAS_EXE_SERVER_FLAGS_H_
#define GPUAAS_EXE_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/simulated/fleet.h"

namespace gpuaas::exe {

struct ServerFlags {
  std::string listen = "127.0.0.1:8080";
  std::string db = "sqlite:gpuaas.db";
  bool demo = false;
  std::string fleet_file;
  int synthetic_gpus = 0;
  int sync_interval_s = 30;
  int threads = 0;  // 0: one per core
  bool allow_remote = false;
  std::string token_auth_file;  // static tokens: token,user,role[,project]
  bool no_auth = false;         // serve without authentication (loopback only)
  std::string log_level = "info";
  std::vector<std::string> scrape;  // dcgm-exporter /metrics URLs to scrape
  int scrape_interval_s = 15;
  bool simulate_telemetry = false;  // play a node agent for every simulated GPU (on with --demo)
  int telemetry_interval_s = 10;
  // Prometheus remote write: receivers' URLs (".../api/v1/write") and the samples each
  // receiver's queue holds. The history read back: a Prometheus query API's base URL, and how
  // long a query may take. For both, a file holding the bearer token sent (read at each request,
  // so that a rotated token is picked up) and a CA bundle for https (empty: the system's).
  std::vector<std::string> remote_write;
  int64_t remote_write_queue = 500'000;
  int remote_write_shards = 4;
  std::string telemetry_query;
  double telemetry_query_timeout_s = 10;
  std::string telemetry_token_file;
  std::string telemetry_ca_file;
  int64_t hot_window_s = 6 * 3600;  // raw samples kept and answered from memory
  std::string web_root;  // the dashboard's built files (web/dist); empty: no dashboard
  // Kubernetes clusters to manage: "NAME=KUBECONFIG[#CONTEXT]" or "NAME=in-cluster".
  std::vector<std::string> kubernetes;
  // The API over HTTPS: its certificate (chain) and key, PEM files.
  std::string tls_cert;
  std::string tls_key;
  // Behind the aggregation layer: the front proxy's client CA (PEM) and the common names it may
  // present (empty: any the CA signed).
  std::string requestheader_client_ca;
  std::vector<std::string> requestheader_allowed_names;
  // The admission webhook (HTTPS): where it listens, and its certificate and key (PEM files).
  std::string webhook_listen;
  std::string webhook_cert;
  std::string webhook_key;
  // Replicas: this one's name in the leader lease (empty: the host name; a random suffix is
  // added, so that a restart is a new holder), the
  // URL the others reach it at (empty: its --listen address), and client-go's election timings.
  std::string replica_id;
  std::string advertise_url;
  double lease_duration_s = 15;
  double renew_deadline_s = 10;
  double retry_period_s = 2;
  // Per-token rates by role, "ROLE=N" (ROLE: operator, member, agent or all), applied in order.
  std::vector<std::string> request_rates;    // requests a second
  std::vector<std::string> telemetry_rates;  // telemetry body bytes a second
};

// The flags checked together.
struct ServerPlan {
  std::string host;  // the API's, without IPv6 brackets
  int port = 0;      // 0: any free port
  bool tls = false;
  cluster::simulated::FleetSpec fleet;  // the simulated clusters (none without --demo, --fleet, --synthetic-gpus)
  std::string webhook_host;             // empty: no admission webhook
  int webhook_port = 0;
};

// InvalidArgument, naming the flag and what to give instead, for: --listen not HOST:PORT; one of
// --tls-cert and --tls-key without the other; a front proxy CA without HTTPS; plain HTTP or no
// authentication anywhere but loopback (unless --allow-insecure-remote allows plain HTTP); more
// than one fleet source, or a fleet file that does not load; --webhook-listen not HOST:PORT or
// without its certificate and key; a remote-write URL that is not http(s)://HOST[:PORT]/PATH, a
// query URL that is not http(s)://HOST[:PORT][/PATH], a token or CA file that does not read, a
// queue of fewer than 1,000 samples, shards outside 1-64, a query timeout outside 0.1-120 s, a
// hot window outside 10 minutes to 7 days.
absl::StatusOr<ServerPlan> PlanServer(const ServerFlags& flags);

}  // namespace gpuaas::exe

#endif  // GPUAAS_EXE_SERVER_FLAGS_H_
