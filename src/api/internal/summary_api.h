// The fleet summary, GET /api/v1/summary: clusters, nodes, physical GPUs by model and cluster
// (MIG mode, health), and logical devices (whole GPUs, MIG instances) by model and profile with
// how many are allocated, free and available now; and the same counts as the fleet's gauges of
// /metrics. Public: it holds fleet-wide counts only. Derived from the GpuCapacity and GpuPool
// snapshots (pools hold devices) and computed again only when one of them changes. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_SUMMARY_API_H_
#define GPUAAS_API_INTERNAL_SUMMARY_API_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "api/http.h"
#include "api/internal/objects.h"
#include "model/summary.h"
#include "store/cache.h"

namespace gpuaas::api::internal {

class SummaryApi {
 public:
  SummaryApi(store::ObjectCache& cache, DecodedGpus& gpus) : cache_(cache), gpus_(gpus) {}

  // The summary of the fleet as the cache shows it now; the first call decodes the fleet.
  std::shared_ptr<const model::FleetSummary> Get();
  HttpResponse Summary();
  // Appends the fleet's gauge families (gpuaas_fleet_*) to a /metrics body.
  void AppendMetrics(std::string& out);

 private:
  store::ObjectCache& cache_;
  DecodedGpus& gpus_;
  std::mutex mu_;
  // The snapshots `summary_` was computed from.
  std::shared_ptr<const store::KindSnapshot> gpus_of_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const store::KindSnapshot> pools_of_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const model::FleetSummary> summary_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_SUMMARY_API_H_
