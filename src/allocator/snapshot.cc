#include "allocator/snapshot.h"

#include <algorithm>

namespace gpuaas::allocator {

bool GpuState::Idle() const {
  if (!owner.empty() || busy) return false;
  return std::none_of(instances.begin(), instances.end(),
                      [](const InstanceState& i) { return !i.owner.empty() || i.busy; });
}

catalog::Layout GpuState::Layout() const {
  catalog::Layout l;
  for (const InstanceState& i : instances) l.push_back({i.profile, i.start});
  catalog::SortLayout(l);
  return l;
}

FleetSnapshot BuildSnapshot(std::span<const model::GpuCapacity> gpus,
                            std::span<const model::NodeCapacity> nodes,
                            const std::map<std::string, std::string>& owners,
                            const std::set<std::string>& busy) {
  std::map<std::string, bool> schedulable;
  for (const model::NodeCapacity& n : nodes) schedulable[n.metadata.name] = n.spec.schedulable;
  auto owner_of = [&](const std::string& uuid) {
    auto it = owners.find(uuid);
    return it == owners.end() ? std::string() : it->second;
  };
  FleetSnapshot f;
  f.gpus.reserve(gpus.size());
  for (const model::GpuCapacity& g : gpus) {
    GpuState s;
    s.uuid = g.spec.uuid;
    s.cluster = g.spec.cluster;
    s.node = g.spec.node;
    s.index = static_cast<int>(g.spec.index);
    s.model = catalog::FindModel(g.spec.model);
    s.healthy = g.status.health != model::Health::kUnhealthy;
    auto sch = schedulable.find(g.spec.node);
    s.schedulable = sch == schedulable.end() || sch->second;
    s.mig_enabled = g.status.mig_mode == model::MigMode::kEnabled;
    s.owner = owner_of(g.spec.uuid);
    s.busy = busy.count(g.spec.uuid) > 0 || g.status.allocated;
    for (const model::MigInstance& m : g.status.mig_instances) {
      const catalog::MigProfile* p = s.model ? catalog::FindProfile(*s.model, m.profile) : nullptr;
      if (p == nullptr) {
        s.model = nullptr;  // a layout we cannot reason about: never touch this GPU
        continue;
      }
      s.instances.push_back({p, static_cast<int>(m.start), m.uuid, owner_of(m.uuid),
                             busy.count(m.uuid) > 0 || m.allocated});
    }
    f.gpus.push_back(std::move(s));
  }
  std::sort(f.gpus.begin(), f.gpus.end(), [](const GpuState& a, const GpuState& b) {
    return std::tie(a.cluster, a.node, a.index) < std::tie(b.cluster, b.node, b.index);
  });
  return f;
}

}  // namespace gpuaas::allocator
