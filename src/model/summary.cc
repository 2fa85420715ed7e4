#include "model/summary.h"

#include <set>
#include <string_view>
#include <vector>

namespace gpuaas::model {

FleetSummary Summarize(std::span<const GpuCapacity> gpus) {
  std::vector<const GpuCapacity*> all;
  all.reserve(gpus.size());
  for (const GpuCapacity& g : gpus) all.push_back(&g);
  return Summarize(all);
}

FleetSummary Summarize(std::span<const GpuCapacity* const> gpus) {
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
      for (const MigInstance& inst : g.status.mig_instances) add(inst.profile, inst.allocated);
    } else {
      add("full", g.status.allocated);
    }
  }
  return s;
}

}  // namespace gpuaas::model
