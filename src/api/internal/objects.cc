#include "api/internal/objects.h"

#include "catalog/catalog.h"

namespace gpuaas::api::internal {

telemetry::AssessedDevice DeviceOf(const telemetry::Hub& hub, const model::AllocatedDevice& d,
                                   const telemetry::GpuLookup& gpus) {
  const model::GpuCapacity* g = gpus(d.gpu_uuid);
  const std::string model = g == nullptr ? "" : g->spec.model;
  telemetry::DeviceRef ref{d.gpu_uuid, -1, catalog::GpuShare(model, d.profile)};
  if (d.profile != "full") {
    // An instance no reading has named yet (gi -2) counts as allocated, without readings.
    ref.gi = hub.FindInstance(d.gpu_uuid, static_cast<int>(d.start), d.instance_uuid).value_or(-2);
  }
  return {ref, model, d.profile};
}

std::vector<telemetry::AssessedDevice> PoolDevices(const telemetry::Hub& hub, const model::GpuPool& pool,
                                                   const telemetry::GpuLookup& gpus) {
  std::vector<telemetry::AssessedDevice> out;
  for (const model::AllocatedDevice& d : pool.status.allocation) out.push_back(DeviceOf(hub, d, gpus));
  return out;
}

const model::GpuCapacity* DecodedGpus::View::Find(const std::string& uuid) const {
  auto g = by_uuid.find(uuid);
  return g == by_uuid.end() ? nullptr : g->second.get();
}

std::shared_ptr<const DecodedGpus::View> DecodedGpus::Get() {
  std::shared_ptr<const store::KindSnapshot> snap = cache_.Snapshot(std::string(model::GpuCapacity::kKind));
  std::lock_guard<std::mutex> lock(mu_);
  if (last_ && last_->snapshot == snap) return last_;
  auto view = std::make_shared<View>();
  view->snapshot = snap;
  std::map<const store::CachedObject*, std::shared_ptr<const model::GpuCapacity>> decoded;
  view->in_order.reserve(snap->items.size());
  for (const auto& obj : snap->items) {
    // The snapshots hold their objects, so a pointer names one object while decoded_ keeps it.
    std::shared_ptr<const model::GpuCapacity> g;
    if (auto known = decoded_.find(obj.get()); known != decoded_.end()) {
      g = known->second;
    } else {
      absl::StatusOr<model::GpuCapacity> fresh = model::Decode<model::GpuCapacity>(obj->json);
      if (!fresh.ok()) continue;
      g = std::make_shared<const model::GpuCapacity>(std::move(*fresh));
    }
    if (!view->by_uuid.emplace(g->spec.uuid, g).second) continue;  // one GPU, one row
    view->in_order.push_back(g.get());
    decoded.emplace(obj.get(), std::move(g));
  }
  last_ = view;
  decoded_ = std::move(decoded);
  return view;
}

}  // namespace gpuaas::api::internal
