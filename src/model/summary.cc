#include "model/summary.h"

#include <set>
#include <string_view>
#include <vector>

namespace gpuaas::model {

HeldDevices HeldByPools(std::span<const GpuPool> pools) {
  HeldDevices held;
  for (const GpuPool& p : pools) {
    if (!PoolIsLive(p)) continue;
    for (const AllocatedDevice& d : p.status.allocation) held.emplace(d.gpu_uuid, d.profile == "full" ? -1 : d.start);
  }
  return held;
}

FleetSummary Summarize(std::span<const GpuCapacity> gpus, const HeldDevices& held) {
  std::vector<const GpuCapacity*> all;
  all.reserve(gpus.size());
  for (const GpuCapacity& g : gpus) all.push_back(&g);
  return Summarize(all, held);
}

FleetSummary Summarize(std::span<const GpuCapacity* const> gpus, const HeldDevices& held) {
  FleetSummary s;
  std::set<std::pair<std::string_view, std::string_view>> seen_nodes;  // (cluster, node)
  std::set<std::pair<std::string_view, std::string_view>> seen_model_nodes;  // (model, node)
  for (const GpuCapacity* gp : gpus) {
    const GpuCapacity& g = *gp;
    const std::string model = g.spec.model.empty() ? "unknown" : g.spec.model;
    FleetSummary::ModelCount& m = s.by_model[model];
    const bool mig = g.status.mig_mode == MigMode::kEnabled;
    const bool unhealthy = g.status.health == Health::kUnhealthy;
    FleetSummary::ModelCount& by_cluster = s.by_cluster[g.spec.cluster.empty() ? "unknown" : g.spec.cluster];
    if (seen_nodes.emplace(g.spec.cluster, g.spec.node).second) {
      by_cluster.nodes += 1;
      s.physical.nodes += 1;
    }
    if (seen_model_nodes.emplace(g.spec.model, g.spec.node).second) m.nodes += 1;
    for (FleetSummary::ModelCount* c : {&m, &by_cluster, &s.physical}) {
      c->gpus += 1;
      c->mig_enabled += mig ? 1 : 0;
      c->full += mig ? 0 : 1;
      c->unhealthy += unhealthy ? 1 : 0;
    }
    auto add = [&](const std::string& profile, bool allocated) {
      FleetSummary::DeviceCount& d = s.logical[{model, profile}];
      d.count += 1;
      d.allocated += allocated ? 1 : 0;
      d.available += !allocated && !unhealthy ? 1 : 0;
      s.logical_total.count += 1;
      s.logical_total.allocated += allocated ? 1 : 0;
      s.logical_total.available += !allocated && !unhealthy ? 1 : 0;
    };
    if (mig) {
      for (const MigInstance& inst : g.status.mig_instances) {
        add(inst.profile, inst.allocated || Held(held, g.spec.uuid, inst.start));
      }
    } else {
      add("full", g.status.allocated || Held(held, g.spec.uuid, -1));
    }
  }
  return s;
}

}  // namespace gpuaas::model
