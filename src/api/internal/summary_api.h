// The fleet summary, GET /api/v1/summary: clusters, nodes, physical GPUs by model and cluster
// (MIG mode, health), and logical devices (whole GPUs, MIG instances) by model and profile with
// how many are allocated, free and available now; and the same counts as the fleet's gauges of
// /metrics. Public: it holds fleet-wide counts only. Kept from the GpuCapacity and GpuPool
// objects the cache reports changed (pools hold devices): each change costs its own objects,
// never the whole fleet. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_SUMMARY_API_H_
#define GPUAAS_API_INTERNAL_SUMMARY_API_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "api/http.h"
#include "model/summary.h"
#include "store/cache.h"

namespace gpuaas::api::internal {

class SummaryApi {
 public:
  explicit SummaryApi(store::ObjectCache& cache);
  ~SummaryApi();
  SummaryApi(const SummaryApi&) = delete;
  SummaryApi& operator=(const SummaryApi&) = delete;

  // The summary of the fleet as the cache shows it now: the GPUs and pools that changed since
  // the last call are decoded and their parts taken out and added again (model::FleetTally),
  // so a call costs what changed, not the fleet; the first call decodes the fleet.
  std::shared_ptr<const model::FleetSummary> Get();
  HttpResponse Summary();
  // Appends the fleet's gauge families (gpuaas_fleet_*) to a /metrics body.
  void AppendMetrics(std::string& out);

 private:
  using Changed = std::unordered_map<std::string, std::shared_ptr<const store::CachedObject>>;
  using Device = std::pair<std::string, int64_t>;  // (GPU UUID, MIG start or -1), as HeldDevices
  // The cache's listener: notes the latest state of each GPU and pool that changed (null once
  // deleted), for the next Get.
  void Note(const std::vector<store::CacheEvent>& events);
  void ApplyPools(const Changed& pools, std::set<std::string>& reheld) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyGpus(const Changed& gpus) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::ObjectCache& cache_;
  int listener_ = -1;
  std::mutex noted_mu_;
  Changed noted_gpus_ ABSL_GUARDED_BY(noted_mu_);   // by GpuCapacity name
  Changed noted_pools_ ABSL_GUARDED_BY(noted_mu_);  // by "namespace/name"
  std::mutex mu_;
  model::FleetTally tally_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, model::GpuPart> parts_ ABSL_GUARDED_BY(mu_);  // as added, by name
  std::unordered_map<std::string, std::string> name_of_uuid_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::vector<Device>> held_by_pool_ ABSL_GUARDED_BY(mu_);  // live pools'
  std::map<Device, int> holders_ ABSL_GUARDED_BY(mu_);  // live pools holding each device
  model::HeldDevices held_ ABSL_GUARDED_BY(mu_);        // the devices in holders_
  std::shared_ptr<const model::FleetSummary> summary_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_SUMMARY_API_H_
