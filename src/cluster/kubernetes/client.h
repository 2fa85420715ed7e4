// A client of the Kubernetes API server: GET, list (paged) and watch (a stream of events from a
// resourceVersion, with bookmarks) over HTTP or HTTPS, configured by client_config.h. It makes
// one request at a time per call and keeps no cache; reflector.h builds the list-and-watch loop
// on it. Layer 7 of docs/architecture.md (an adapter at the edge); the JSON and HTTP libraries
// stay in client.cc.
//
// Errors are the API server's answers as absl codes, so that callers can tell them apart:
//   404 NotFound   409 Aborted (a conflict: read again and retry)   410 OutOfRange (the
//   resourceVersion is too old: list again)   429 ResourceExhausted (too many requests; the
//   server's Retry-After in the payload kRetryAfterPayload)   401 Unauthenticated
//   403 PermissionDenied
//   5xx and transport errors (refused, reset, timed out, bad certificate) Unavailable
// Each message names the method and path, and the Status message the API server gave.
#ifndef GPUAAS_CLUSTER_KUBERNETES_CLIENT_H_
#define GPUAAS_CLUSTER_KUBERNETES_CLIENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/kubernetes/client_config.h"

namespace gpuaas::cluster::kubernetes {

// The payload of a 429's status: the Retry-After header as sent (seconds).
inline constexpr char kRetryAfterPayload[] = "gpuaas.io/retry-after";

// One watch event: type ADDED, MODIFIED, DELETED, BOOKMARK (or ERROR, which Watch turns into
// its returned status) and the object as JSON text.
struct WatchEvent {
  std::string type;
  std::string object;
};

struct ListResult {
  std::vector<std::string> items;  // each item as JSON text, with its kind and apiVersion set
  std::string resource_version;    // the list's, to watch from
};

// How long the client waits. A watch asks the server to end it after `watch_timeout` (it is then
// opened again from the last resourceVersion); reading waits a little longer than that.
struct ClientTimeouts {
  std::chrono::seconds connect{5};
  std::chrono::seconds request{30};
  std::chrono::seconds watch{290};
};

class Client {
 public:
  // Checks the configuration (the server URL, certificates and key parse); InvalidArgument
  // naming what is wrong. Connects lazily.
  static absl::StatusOr<std::unique_ptr<Client>> Make(const ClientConfig& config, ClientTimeouts timeouts = {});
  ~Client();

  // GET `path` (with its query): the body of a 200. Thread-safe.
  absl::StatusOr<std::string> Get(const std::string& path);

  // A write: POST (create), PUT (replace, at the body's metadata.resourceVersion), PATCH
  // (`content_type` application/merge-patch+json) of `path` with `body`, or DELETE of `path`
  // (with `body`, DeleteOptions, when not empty);
  // the body of a 2xx.
  // Each write is logged. Not retried here: a 409 is the caller's to resolve. Thread-safe.
  absl::StatusOr<std::string> Send(const std::string& method, const std::string& path, const std::string& body,
                                   const std::string& content_type = "application/json");

  // Every item of a collection (`/api/v1/nodes`, `/apis/resource.k8s.io/v1/resourceslices`),
  // `page_size` at a time, following `continue`; a 410 on a continue token lists again from the
  // start once. Thread-safe.
  absl::StatusOr<ListResult> List(const std::string& path, int page_size = 500);

  // Watches `path` from `resource_version` with bookmarks until the server ends the stream (OK),
  // `on_event` returns false (OK), Stop is called (Cancelled) or an error (as above; an ERROR
  // event carrying 410 is OutOfRange). `on_open`, when given, is called once the server accepted
  // the watch (its 200 head). One watch at a time per client.
  absl::Status Watch(const std::string& path, const std::string& resource_version,
                     const std::function<bool(const WatchEvent&)>& on_event,
                     const std::function<void()>& on_open = nullptr);

  // Ends a running watch and every later one (Cancelled); for shutting down. Thread-safe.
  void Stop();

  // The bearer token requests carry: a token from a file (ClientConfig::token_source) is read
  // again once a minute and after a 401, as client-go does, so rotated tokens are picked up; a
  // failed read keeps the last token. Thread-safe.
  std::string Token();

  const ClientConfig& config() const { return config_; }

 private:
  struct Impl;
  Client(ClientConfig config, ClientTimeouts timeouts, std::unique_ptr<Impl> impl);
  void ExpireToken();  // read the token file again at the next request
  ClientConfig config_;
  ClientTimeouts timeouts_;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stopped_{false};
};

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_CLIENT_H_
