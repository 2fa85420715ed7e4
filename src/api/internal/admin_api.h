// The operators' routes that look after the control plane rather than a project's objects:
//   GET    /api/v1/audit[?after=REVISION]   the audit log, 1,000 events a page
//   GET    /api/v1/tokens                   API tokens (never their secrets)
//   POST   /api/v1/tokens                   a new token (TokenBody), shown once
//   DELETE /api/v1/tokens/{id}
//   GET    /api/v1/defrag                   the plan of MIG defragmentation for the fleet now
//   POST   /api/v1/defrag                   makes its moves (DefragBody: those of some GPUs)
//   GET    /api/v1/clusters                 every cluster, fixed or registered (never a credential)
//   POST   /api/v1/clusters                 registers a Kubernetes cluster (ClusterBody)
//   DELETE /api/v1/clusters/{name}          takes a registered one out
// Each part is optional: without it its routes answer 501 saying so. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_ADMIN_API_H_
#define GPUAAS_API_INTERNAL_ADMIN_API_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "api/auth.h"
#include "api/http.h"
#include "service/pools.h"

namespace gpuaas::service {
class ClusterService;
class DefragService;
}  // namespace gpuaas::service

namespace gpuaas::api::internal {

class AdminApi {
 public:
  // Any of them may be null; none is owned.
  AdminApi(service::PoolService* pools, Authenticator* auth, service::DefragService* defrag,
           service::ClusterService* clusters)
      : pools_(pools), auth_(auth), defrag_(defrag), clusters_(clusters) {}

  absl::StatusOr<HttpResponse> Audit(const HttpRequest& req);
  absl::StatusOr<HttpResponse> Tokens();
  absl::StatusOr<HttpResponse> CreateToken(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> RevokeToken(std::string_view id);
  absl::StatusOr<HttpResponse> DefragPlan();
  absl::StatusOr<HttpResponse> DefragApply(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> Clusters();
  absl::StatusOr<HttpResponse> RegisterCluster(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> UnregisterCluster(std::string_view name, const Principal& who);

 private:
  service::PoolService* pools_;
  Authenticator* auth_;
  service::DefragService* defrag_;
  service::ClusterService* clusters_;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_ADMIN_API_H_
