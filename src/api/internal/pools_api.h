// The writes of the pool service (service/pools.h) over HTTP, each answered with the object as
// written once the read cache shows it (read-your-writes):
//   POST   /apis/gpuaas.io/v1/projects                                      a project (operators)
//   PUT    /apis/gpuaas.io/v1/projects/{name}/budget                        its budget (operators)
//   POST   /apis/gpuaas.io/v1/ratecards                                     a rate card (operators)
//   POST   /api/v1/projects/{project}/creditnotes                           a credit note (operators)
//   POST   /apis/gpuaas.io/v1/namespaces/{namespace}/gpupools|workloads     a pool or workload
//   DELETE /apis/gpuaas.io/v1/namespaces/{namespace}/gpupools|workloads/{name}
//   PUT    .../gpupools/{name}/approval                                     approve or reject (operators)
//   POST   .../gpupools/{name}/release                                      ask for its release
//   PATCH  .../{plural}/{name}     a merge patch, a JSON patch or a server-side apply (which
//                                  creates the object when it is absent)
//   PUT    .../{plural}/{name}     a replacement
// of projects and rate cards (/apis/gpuaas.io/v1/{plural}/{name}, operators), pools, workloads
// and credit notes (.../namespaces/{namespace}/{plural}/{name}). These go through the service's
// Update (its rules: status is its controllers', decided pools and final records keep their
// spec), with the request's field validation on the object they make, and record who set which
// fields in metadata.managedFields (apply.h); every create records its fields too.
// Objects decode with model/codec.h, the other bodies with bodies.h. Members write in their own
// project only (another project's answer 404). With ?dryRun=All a write goes to the service's
// dry-run twin (PoolService::DryRun): it is answered as it would be, and nothing is stored.
// Without a pool service every route answers 501. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_POOLS_API_H_
#define GPUAAS_API_INTERNAL_POOLS_API_H_

#include <chrono>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/auth.h"
#include "api/http.h"
#include "api/internal/billing_api.h"
#include "api/internal/bodies.h"
#include "common/clock.h"
#include "service/pools.h"
#include "store/cache.h"

namespace gpuaas::api::internal {

// What the routes of the pool service answer on a server without one (501).
absl::Status NoPools();

class PoolsApi {
 public:
  // `pools` may be null (every route answers NoPools); not owned. A write's reply waits up to
  // `read_your_write_timeout` for the cache to show it, then says in a Warning header that a
  // read may not show it yet.
  PoolsApi(service::PoolService* pools, store::ObjectCache& cache, BillingApi& billing, const Clock& clock,
           std::chrono::milliseconds read_your_write_timeout)
      : pools_(pools),
        cache_(cache),
        billing_(billing),
        clock_(clock),
        read_your_write_timeout_(read_your_write_timeout) {}

  absl::StatusOr<HttpResponse> CreateProject(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> CreateRateCard(const HttpRequest& req, const Principal& who);
  // BudgetBody; no limit at all removes the budget. A budget the project's pools already pass
  // is set, with a Warning header saying so.
  absl::StatusOr<HttpResponse> SetBudget(const HttpRequest& req, std::string_view project, const Principal& who);
  absl::StatusOr<HttpResponse> IssueCreditNote(const HttpRequest& req, std::string_view project,
                                               const Principal& who);
  absl::StatusOr<HttpResponse> CreatePool(const HttpRequest& req, std::string_view ns, const Principal& who);
  absl::StatusOr<HttpResponse> CreateWorkload(const HttpRequest& req, std::string_view ns, const Principal& who);
  absl::StatusOr<HttpResponse> DeletePool(const HttpRequest& req, std::string_view ns, std::string_view name,
                                          const Principal& who);
  absl::StatusOr<HttpResponse> DeleteWorkload(const HttpRequest& req, std::string_view ns, std::string_view name,
                                              const Principal& who);
  // ApprovalBody.
  absl::StatusOr<HttpResponse> Approve(const HttpRequest& req, std::string_view ns, std::string_view name,
                                       const Principal& who);
  absl::StatusOr<HttpResponse> Release(const HttpRequest& req, std::string_view ns, std::string_view name,
                                       const Principal& who);
  // PATCH (by its Content-Type) and PUT of one object of `plural`; `ns` empty for the
  // cluster-scoped kinds.
  absl::StatusOr<HttpResponse> Patch(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                     std::string_view name, const Principal& who);
  absl::StatusOr<HttpResponse> Replace(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                       std::string_view name, const Principal& who);

  // How a PATCH or PUT makes the new object from the stored one.
  enum class Change { kMergePatch, kJsonPatch, kApply, kReplace };

 private:
  // Where a write goes: the pool service, or its dry-run twin for ?dryRun=All.
  struct Target {
    service::PoolService* service;
    bool dry_run;
  };
  absl::StatusOr<Target> TargetOf(const HttpRequest& req);
  // The reply for a written object (or the write's error); a dry run's, without waiting for the
  // cache and without a resourceVersion (nothing was stored).
  template <typename T>
  absl::StatusOr<HttpResponse> Written(absl::StatusOr<T> obj, int status, const Target& to,
                                       const std::vector<std::string>& warnings = {});

  // A create's object: the body, checked as ReadObject checks it, with its creator's fields
  // recorded in metadata.managedFields.
  template <typename T>
  absl::StatusOr<Read<T>> ReadCreated(const HttpRequest& req);
  template <typename T>
  absl::StatusOr<HttpResponse> Write(const HttpRequest& req, Change how, std::string_view ns, std::string_view name,
                                     const Principal& who);
  absl::StatusOr<HttpResponse> Dispatch(const HttpRequest& req, Change how, std::string_view plural,
                                        std::string_view ns, std::string_view name, const Principal& who);

  service::PoolService* pools_;
  store::ObjectCache& cache_;
  BillingApi& billing_;
  const Clock& clock_;
  const std::chrono::milliseconds read_your_write_timeout_;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_POOLS_API_H_
