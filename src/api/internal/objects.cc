#include "api/internal/objects.h"

#include <algorithm>
#include <tuple>

#include "catalog/catalog.h"
#include "common/strings.h"

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
  const std::string name = ToLower(uuid);
  const auto& items = snapshot->items;
  // (The kind is cluster-scoped: every item's namespace is empty, and they are sorted by name.)
  auto it = std::lower_bound(items.begin(), items.end(), name, [](const auto& obj, const std::string& n) {
    return obj->ns.empty() && obj->name < n;
  });
  if (it == items.end() || !it->get()->ns.empty() || it->get()->name != name) return nullptr;
  const model::GpuCapacity* g = decoded[static_cast<size_t>(it - items.begin())].get();
  return g != nullptr && EqualsIgnoreCase(g->spec.uuid, uuid) ? g : nullptr;
}

void DecodedGpus::View::Rank() const {
  std::call_once(ranked_, [this] {
    std::vector<uint32_t> by_place(in_order.size());
    for (uint32_t i = 0; i < by_place.size(); ++i) by_place[i] = i;
    auto place = [this](uint32_t i) {
      const model::GpuCapacity& g = *in_order[i];
      return std::tie(g.spec.cluster, g.spec.node, g.spec.index, g.metadata.name);
    };
    std::sort(by_place.begin(), by_place.end(), [&](uint32_t a, uint32_t b) { return place(a) < place(b); });
    place_rank_.resize(by_place.size());
    for (uint32_t r = 0; r < by_place.size(); ++r) place_rank_[by_place[r]] = r;
    place_order_ = std::move(by_place);
  });
}

const std::vector<uint32_t>& DecodedGpus::View::PlaceRank() const {
  Rank();
  return place_rank_;
}

const std::vector<uint32_t>& DecodedGpus::View::PlaceOrder() const {
  Rank();
  return place_order_;
}

std::shared_ptr<const DecodedGpus::View> DecodedGpus::Get() {
  std::shared_ptr<const store::KindSnapshot> snap = cache_.Snapshot(std::string(model::GpuCapacity::kKind));
  std::lock_guard<std::mutex> lock(mu_);
  if (last_ && last_->snapshot == snap) return last_;
  auto view = std::make_shared<View>();
  view->snapshot = snap;
  view->decoded.resize(snap->items.size());
  view->in_order.reserve(snap->items.size());
  // The view before, walked beside the new snapshot (both sorted by namespace and name): an
  // object that is the same cached object keeps what was decoded of it.
  const std::vector<std::shared_ptr<const store::CachedObject>> none;
  const auto& before = last_ ? last_->snapshot->items : none;
  size_t j = 0;
  for (size_t i = 0; i < snap->items.size(); ++i) {
    const store::CachedObject* obj = snap->items[i].get();
    while (j < before.size() && std::tie(before[j]->ns, before[j]->name) < std::tie(obj->ns, obj->name)) ++j;
    std::shared_ptr<const model::GpuCapacity> g;
    if (j < before.size() && before[j].get() == obj) {
      g = last_->decoded[j];
    } else {
      absl::StatusOr<model::GpuCapacity> fresh = model::Decode<model::GpuCapacity>(obj->json);
      if (fresh.ok()) g = std::make_shared<const model::GpuCapacity>(std::move(*fresh));
    }
    if (g != nullptr) view->in_order.push_back(g.get());
    view->decoded[i] = std::move(g);
  }
  last_ = view;
  return view;
}

}  // namespace gpuaas::api::internal
