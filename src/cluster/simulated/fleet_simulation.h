// Simulated node agents for every GPU of a simulated fleet, run inside the server (`gpuaas server
// --demo` or `--simulate-telemetry`), so that a demo has readings without running agents: the
// telemetry half of the simulated cluster. Each node gets an agent::Simulator; the fleet follows
// the inventory (new GPUs, changed MIG layouts) while every GPU keeps its counters. Readings go to
// the hub marked as simulated: a GPU that a real agent or a scrape reports is left to that source.
// Thread-compatible.
#ifndef GPUAAS_CLUSTER_SIMULATED_FLEET_SIMULATION_H_
#define GPUAAS_CLUSTER_SIMULATED_FLEET_SIMULATION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/simulator.h"
#include "model/fleet.h"
#include "telemetry/hub.h"

namespace gpuaas::cluster::simulated {

class FleetSimulation {
 public:
  explicit FleetSimulation(telemetry::Hub& hub) : hub_(hub) {}
  // Follows the inventory (the GpuCapacity informer's objects), skipped when `revision` (the
  // informer's) is the one already followed.
  void Follow(int64_t revision, const std::vector<std::shared_ptr<const model::GpuCapacity>>& gpus);
  // One reading of every simulated node into the hub.
  void Tick(int64_t now_ms);
  size_t nodes() const { return nodes_.size(); }

 private:
  telemetry::Hub& hub_;
  std::map<std::string, std::unique_ptr<agent::Simulator>> nodes_;
  int64_t followed_ = -1;
};

}  // namespace gpuaas::cluster::simulated

#endif  // GPUAAS_CLUSTER_SIMULATED_FLEET_SIMULATION_H_
