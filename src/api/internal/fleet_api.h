// The fleet routes the dashboard (and any client) reads the GPU table and the catalogue from:
//   GET /api/v1/fleet/gpus    every GPU as one row (inventory, latest readings, pools the caller
//                             may see, its devices lent now (`lent`), and for a MIG GPU what
//                             its free slices can still take, `migRoom`), filtered, sorted and paged on the server; view=cells
//                             gives the whole fleet as columns for a heatmap
//   GET /api/v1/catalog       GPU models with their MIG profiles and legal placements
// Reads the ObjectCache's snapshots and the telemetry hub (optional).
#ifndef GPUAAS_API_INTERNAL_FLEET_API_H_
#define GPUAAS_API_INTERNAL_FLEET_API_H_

#include <memory>
#include <mutex>
#include <vector>

#include "api/auth.h"
#include "api/http.h"
#include "api/internal/objects.h"
#include "model/pool.h"
#include "store/cache.h"
#include "telemetry/hub.h"

namespace gpuaas::api::internal {

class FleetApi {
 public:
  FleetApi(store::ObjectCache& cache, DecodedGpus& gpus, const telemetry::Hub* hub)
      : cache_(cache), gpus_(gpus), hub_(hub) {}

  absl::StatusOr<HttpResponse> Gpus(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> Catalog(const HttpRequest& req);

 private:
  // The loans open now, decoded once per snapshot of the Loan kind (ended loans pile up; the
  // listing is asked for far more often than a loan starts or ends).
  std::shared_ptr<const std::vector<model::Loan>> OpenLoans();

  store::ObjectCache& cache_;
  DecodedGpus& gpus_;
  const telemetry::Hub* hub_;
  std::mutex loans_mu_;
  std::shared_ptr<const store::KindSnapshot> loans_snapshot_;       // guarded by loans_mu_
  std::shared_ptr<const std::vector<model::Loan>> open_loans_;      // guarded by loans_mu_
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_FLEET_API_H_
