// Reading the API's objects from the ObjectCache's snapshots, and the devices of pools and
// workloads as the telemetry hub names them. Shared by the API's internal route modules.
#ifndef GPUAAS_API_INTERNAL_OBJECTS_H_
#define GPUAAS_API_INTERNAL_OBJECTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/codec.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/cache.h"
#include "telemetry/assessment.h"
#include "telemetry/hub.h"

namespace gpuaas::api::internal {

// Every object of T's kind (in `ns` when given) that decodes.
template <typename T>
std::vector<T> DecodeAll(store::ObjectCache& cache, std::string_view ns = {}) {
  std::vector<T> out;
  const std::shared_ptr<const store::KindSnapshot> snap = cache.Snapshot(std::string(T::kKind));
  for (const auto& obj : snap->items) {
    if (!ns.empty() && obj->ns != ns) continue;
    absl::StatusOr<T> v = model::Decode<T>(obj->json);
    if (v.ok()) out.push_back(std::move(*v));
  }
  return out;
}

// One object, or nullopt when absent (or undecodable).
template <typename T>
std::optional<T> DecodeOne(store::ObjectCache& cache, std::string_view ns, std::string_view name) {
  std::shared_ptr<const store::CachedObject> obj = cache.Get(T::kKind, ns, name);
  if (!obj) return std::nullopt;
  absl::StatusOr<T> v = model::Decode<T>(obj->json);
  if (!v.ok()) return std::nullopt;
  return *v;
}

// An allocated device as the hub knows it: GPU UUID, GPU instance id and weight.
telemetry::AssessedDevice DeviceOf(const telemetry::Hub& hub, const model::AllocatedDevice& d,
                                   const telemetry::GpuLookup& gpus);
std::vector<telemetry::AssessedDevice> PoolDevices(const telemetry::Hub& hub, const model::GpuPool& pool,
                                                   const telemetry::GpuLookup& gpus);

// The fleet's GpuCapacity objects decoded, kept between requests: a new snapshot decodes only the
// objects that changed and shares the others with the view before (snapshots share unchanged
// objects too, and both are sorted by name, so the two are walked side by side), so a fleet of
// 10,000 GPUs is decoded once (about 0.5 s in a release build), not on every request that needs
// it, and a change costs what changed plus a pass over the fleet's pointers. Thread-safe; the API
// server holds one for all its routes.
class DecodedGpus {
 public:
  struct View {
    std::shared_ptr<const store::KindSnapshot> snapshot;
    // By the snapshot's items: each decoded, or null for one that does not decode.
    std::vector<std::shared_ptr<const model::GpuCapacity>> decoded;
    std::vector<const model::GpuCapacity*> in_order;  // those that decode, in snapshot order
    // For each of in_order, its rank by place (cluster, node, index, then name): the fleet
    // listing's default order and every sort's tie-break, as one integer to compare. Worked out
    // once per view, on first use.
    const std::vector<uint32_t>& PlaceRank() const;
    // Indexes into in_order by place: PlaceRank's inverse.
    const std::vector<uint32_t>& PlaceOrder() const;
    // The GPU of that UUID (any letter case: GpuCapacity objects are named by the lower-case
    // UUID), or null.
    const model::GpuCapacity* Find(const std::string& uuid) const;
    // Find, for the telemetry functions; valid while the view is held.
    telemetry::GpuLookup Lookup() const {
      return [this](const std::string& uuid) { return Find(uuid); };
    }

   private:
    mutable std::once_flag ranked_;
    mutable std::vector<uint32_t> place_rank_;
    mutable std::vector<uint32_t> place_order_;
    void Rank() const;
  };
  explicit DecodedGpus(store::ObjectCache& cache) : cache_(cache) {}
  std::shared_ptr<const View> Get();

 private:
  store::ObjectCache& cache_;
  std::mutex mu_;
  std::shared_ptr<const View> last_;  // guarded by mu_
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_OBJECTS_H_
