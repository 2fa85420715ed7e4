// The admission webhook over HTTPS (API servers call webhooks over TLS only), deciding with
// admission.h: POST /admission/{cluster}/mutate-pods and /admission/{cluster}/validate-pods
// (ReviewPod), and .../mutate-claims and .../validate-claims for ResourceClaims (ReviewClaim),
// take an AdmissionReview and answer one. A cluster the server does not manage answers 404, a body
// that is not a review 400, both as problem+json (common/problem.h, as the API answers). cpp-httplib
// and OpenSSL inside webhook_server.cc.
#ifndef GPUAAS_CLUSTER_KUBERNETES_WEBHOOK_SERVER_H_
#define GPUAAS_CLUSTER_KUBERNETES_WEBHOOK_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/kubernetes/admission.h"
#include "model/pool.h"

namespace gpuaas::cluster::kubernetes {

class WebhookServer {
 public:
  using KnownCluster = std::function<bool(std::string_view)>;
  // `cert_file` and `key_file`: the serving certificate (for the webhook Service's DNS name) and
  // its key, PEM. InvalidArgument when they do not load.
  static absl::StatusOr<std::unique_ptr<WebhookServer>> Make(const std::string& cert_file, const std::string& key_file,
                                                             ProjectPools pools, KnownCluster known);
  ~WebhookServer();

  // Listens on host:port (0 picks a free port) and serves on its own thread; the port.
  absl::StatusOr<int> Start(const std::string& host, int port);
  void Stop();

 private:
  struct Impl;
  explicit WebhookServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_WEBHOOK_SERVER_H_
