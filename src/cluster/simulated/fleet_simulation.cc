#include "cluster/simulated/fleet_simulation.h"

#include <functional>

#include "agent/agent.h"

namespace gpuaas::cluster::simulated {

void FleetSimulation::Follow(int64_t revision, const std::vector<std::shared_ptr<const model::GpuCapacity>>& gpus) {
  if (revision == followed_) return;
  std::vector<const model::GpuCapacity*> view;
  view.reserve(gpus.size());
  for (const auto& g : gpus) view.push_back(g.get());
  for (auto& [node, sim_gpus] : agent::SimGpusOf(view, "")) {
    std::unique_ptr<agent::Simulator>& sim = nodes_[node];
    if (sim) {
      sim->SetGpus(std::move(sim_gpus));
    } else {
      sim = std::make_unique<agent::Simulator>(node, std::move(sim_gpus), std::vector<agent::Fault>{},
                                               std::hash<std::string>{}(node));
    }
  }
  followed_ = revision;
}

void FleetSimulation::Tick(int64_t now_ms) {
  for (auto& [node, sim] : nodes_) {
    if (absl::StatusOr<telemetry::NodeReport> r = sim->Read(now_ms); r.ok()) {
      (void)hub_.IngestReport(*r, now_ms, /*simulated=*/true);
    }
  }
}

}  // namespace gpuaas::cluster::simulated
