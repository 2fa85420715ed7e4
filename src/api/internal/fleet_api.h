// The fleet routes the dashboard (and any client) reads the GPU table and the catalogue from:
//   GET /api/v1/fleet/gpus    every GPU as one row (inventory, latest readings, pools the caller
//                             may see, and for a MIG GPU what its free slices can still take,
//                             `migRoom`), filtered, sorted and paged on the server; view=cells
//                             gives the whole fleet as columns for a heatmap
//   GET /api/v1/catalog       GPU models with their MIG profiles and legal placements
// Reads the ObjectCache's snapshots and the telemetry hub (optional).
#ifndef GPUAAS_API_INTERNAL_FLEET_API_H_
#define GPUAAS_API_INTERNAL_FLEET_API_H_

#include "api/auth.h"
#include "api/http.h"
#include "api/internal/objects.h"
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
  store::ObjectCache& cache_;
  DecodedGpus& gpus_;
  const telemetry::Hub* hub_;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_FLEET_API_H_
