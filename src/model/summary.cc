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

GpuPart PartOf(const GpuCapacity& g, const HeldDevices& held) {
  GpuPart part;
  part.uuid = g.spec.uuid;
  part.model = g.spec.model.empty() ? "unknown" : g.spec.model;
  part.cluster = g.spec.cluster;
  part.node = g.spec.node;
  part.mig = g.status.mig_mode == MigMode::kEnabled;
  part.unhealthy = g.status.health == Health::kUnhealthy;
  if (part.mig) {
    for (const MigInstance& inst : g.status.mig_instances) {
      part.devices.push_back({inst.profile, inst.start, inst.allocated, false});
    }
  } else {
    part.devices.push_back({"full", -1, g.status.allocated, false});
  }
  Rehold(part, held);
  return part;
}

bool Rehold(GpuPart& part, const HeldDevices& held) {
  bool changed = false;
  for (GpuPart::Device& d : part.devices) {
    const bool now = Held(held, part.uuid, d.start);
    changed = changed || now != d.held;
    d.held = now;
  }
  return changed;
}

void FleetTally::Apply(const GpuPart& part, int sign) {
  FleetSummary& s = summary_;
  const std::string cluster = part.cluster.empty() ? "unknown" : part.cluster;
  // A node counts while it has a GPU: for the fleet and its cluster, and for each model.
  auto count_node = [&](int64_t& gpus_there) {
    const bool was = gpus_there > 0;
    gpus_there += sign;
    return (gpus_there > 0) != was;
  };
  int64_t& on_node = gpus_on_node_[{part.cluster, part.node}];
  const bool node_turned = count_node(on_node);
  if (on_node == 0) gpus_on_node_.erase({part.cluster, part.node});
  int64_t& model_on_node = model_gpus_on_node_[{part.model, part.node}];
  const bool model_node_turned = count_node(model_on_node);
  if (model_on_node == 0) model_gpus_on_node_.erase({part.model, part.node});

  FleetSummary::ModelCount& m = s.by_model[part.model];
  FleetSummary::ModelCount& by_cluster = s.by_cluster[cluster];
  if (node_turned) {
    by_cluster.nodes += sign;
    s.physical.nodes += sign;
  }
  if (model_node_turned) m.nodes += sign;
  for (FleetSummary::ModelCount* c : {&m, &by_cluster, &s.physical}) {
    c->gpus += sign;
    c->mig_enabled += part.mig ? sign : 0;
    c->full += part.mig ? 0 : sign;
    c->unhealthy += part.unhealthy ? sign : 0;
  }
  for (const GpuPart::Device& d : part.devices) {
    const bool allocated = d.in_use || d.held;
    const bool available = !allocated && !part.unhealthy;
    FleetSummary::DeviceCount& dc = s.logical[{part.model, d.profile}];
    for (FleetSummary::DeviceCount* c : {&dc, &s.logical_total}) {
      c->count += sign;
      c->allocated += allocated ? sign : 0;
      c->available += available ? sign : 0;
    }
    if (dc.count == 0) s.logical.erase({part.model, d.profile});
  }
  if (m.gpus == 0) s.by_model.erase(part.model);
  if (by_cluster.gpus == 0) s.by_cluster.erase(cluster);
}

FleetSummary Summarize(std::span<const GpuCapacity* const> gpus, const HeldDevices& held) {
  FleetTally tally;
  for (const GpuCapacity* g : gpus) tally.Add(PartOf(*g, held));
  return tally.summary();
}

}  // namespace gpuaas::model
