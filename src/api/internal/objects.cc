#include "api/internal/objects.h"

#include "catalog/catalog.h"

namespace gpuaas::api::internal {

telemetry::AssessedDevice DeviceOf(const telemetry::Hub& hub, const model::AllocatedDevice& d,
                                   const std::map<std::string, model::GpuCapacity>& gpus) {
  auto g = gpus.find(d.gpu_uuid);
  const std::string model = g == gpus.end() ? "" : g->second.spec.model;
  telemetry::DeviceRef ref{d.gpu_uuid, -1, catalog::GpuShare(model, d.profile)};
  if (d.profile != "full") {
    // An instance no reading has named yet (gi -2) counts as allocated, without readings.
    ref.gi = hub.FindInstance(d.gpu_uuid, static_cast<int>(d.start), d.instance_uuid).value_or(-2);
  }
  return {ref, model, d.profile};
}

std::vector<telemetry::AssessedDevice> PoolDevices(const telemetry::Hub& hub, const model::GpuPool& pool,
                                                   const std::map<std::string, model::GpuCapacity>& gpus) {
  std::vector<telemetry::AssessedDevice> out;
  for (const model::AllocatedDevice& d : pool.status.allocation) out.push_back(DeviceOf(hub, d, gpus));
  return out;
}

std::map<std::string, model::GpuCapacity> GpusByUuid(store::ObjectCache& cache) {
  std::map<std::string, model::GpuCapacity> out;
  for (model::GpuCapacity& g : DecodeAll<model::GpuCapacity>(cache)) out.emplace(g.spec.uuid, std::move(g));
  return out;
}

std::shared_ptr<const DecodedGpus::View> DecodedGpus::Get() {
  std::shared_ptr<const store::KindSnapshot> snap = cache_.Snapshot(std::string(model::GpuCapacity::kKind));
  std::lock_guard<std::mutex> lock(mu_);
  if (last_ && last_->snapshot == snap) return last_;
  auto view = std::make_shared<View>();
  view->snapshot = snap;
  std::map<const store::CachedObject*, std::string> uuid_of;
  for (const auto& obj : snap->items) {
    // The snapshot holds the objects, so a pointer names one object for the view's life.
    if (auto known = uuid_of_.find(obj.get()); known != uuid_of_.end() && last_) {
      auto old = last_->by_uuid.find(known->second);
      if (old != last_->by_uuid.end()) {
        view->by_uuid.emplace(old->first, old->second);
        uuid_of[obj.get()] = known->second;
        continue;
      }
    }
    absl::StatusOr<model::GpuCapacity> g = model::Decode<model::GpuCapacity>(obj->json);
    if (!g.ok()) continue;
    uuid_of[obj.get()] = g->spec.uuid;
    view->by_uuid.emplace(g->spec.uuid, std::move(*g));
  }
  view->in_order.reserve(view->by_uuid.size());
  for (const auto& obj : snap->items) {
    if (auto u = uuid_of.find(obj.get()); u != uuid_of.end()) view->in_order.push_back(&view->by_uuid.at(u->second));
  }
  last_ = view;
  uuid_of_ = std::move(uuid_of);
  return view;
}

}  // namespace gpuaas::api::internal
