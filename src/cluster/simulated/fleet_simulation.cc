#include "agent/fleet_simulation.h"

#include <functional>

#include "agent/agent.h"
#include "common/status.h"
#include "model/codec.h"

namespace gpuaas::agent {

absl::Status FleetSimulation::Refresh(std::string_view gpucapacities_json) {
  auto nodes = SimGpusFromInventory(gpucapacities_json, "");
  if (!nodes.ok()) return nodes.status();
  for (auto& [node, gpus] : *nodes) {
    std::unique_ptr<Simulator>& sim = nodes_[node];
    if (sim) {
      sim->SetGpus(std::move(gpus));
    } else {
      sim = std::make_unique<Simulator>(node, std::move(gpus), std::vector<Fault>{}, std::hash<std::string>{}(node));
    }
  }
  return absl::OkStatus();
}

absl::Status FleetSimulation::Follow(int64_t revision,
                                     const std::vector<std::shared_ptr<const model::GpuCapacity>>& gpus) {
  if (revision == followed_) return absl::OkStatus();
  std::string body = "{\"items\":[";
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i > 0) body += ',';
    body += model::Encode(*gpus[i]);
  }
  body += "]}";
  RETURN_IF_ERROR(Refresh(body));
  followed_ = revision;
  return absl::OkStatus();
}

void FleetSimulation::Tick(int64_t now_ms) {
  for (auto& [node, sim] : nodes_) {
    if (absl::StatusOr<telemetry::NodeReport> r = sim->Read(now_ms); r.ok()) {
      (void)hub_.IngestReport(*r, now_ms, /*simulated=*/true);
    }
  }
}

}  // namespace gpuaas::agent
