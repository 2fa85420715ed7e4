// A simulated node for the agent (`gpuaas agent --simulate`): plausible readings for each GPU and
// MIG instance, and faults injected on request, so that monitoring, health and the dashboard can
// be exercised without hardware.
//
// Each device follows a load that drifts between idle and busy; power follows load between the
// model's idle draw and its board limit (H200/H100 SXM: 700 W), the energy counter integrates it
// in mJ, temperature follows power with lag, framebuffer use follows the load. Faults:
//   xid=N      an XID event (79 the GPU falls off the bus and stops reporting readings but XIDs)
//   dbe        a double-bit ECC error (volatile and aggregate counters, and XID 48)
//   hot        the GPU runs at 93 °C
//   remap-fail row remapping failed
//   reset      the GPU is reset: energy and volatile ECC counters restart, faults clear
// each aimed at a GPU by UUID or index, optionally after a delay: "xid=79@GPU-…+30s".
#ifndef GPUAAS_AGENT_SIMULATOR_H_
#define GPUAAS_AGENT_SIMULATOR_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/source.h"

namespace gpuaas::agent {

struct SimInstance {
  int gi = 0;
  std::string profile;  // "3g.71gb"
  int start = 0;
  int size = 0;
  std::string uuid;
  int compute_slices = 1;
  int64_t memory_mib = 0;
};

struct SimGpu {
  std::string uuid;
  int index = 0;
  std::string name = "NVIDIA H200";
  int64_t memory_mib = 143771;
  double max_power_w = 700;
  double idle_power_w = 75;
  std::vector<SimInstance> instances;  // non-empty: MIG enabled
};

struct Fault {
  enum class Kind { kXid, kDoubleBitEcc, kHot, kRemapFailure, kReset };
  Kind kind = Kind::kXid;
  int xid = 0;
  std::string target;   // GPU UUID or index
  int64_t after_ms = 0; // from the simulator's first reading
};

// Parses "xid=79@GPU-…", "dbe@0+30s", "hot@GPU-…", "remap-fail@1", "reset@0+2m".
absl::StatusOr<Fault> ParseFault(std::string_view spec);

// `count` H200 GPUs with stable UUIDs derived from `node`.
std::vector<SimGpu> SyntheticGpus(const std::string& node, int count);

class Simulator final : public GpuSource {
 public:
  Simulator(std::string node, std::vector<SimGpu> gpus, std::vector<Fault> faults, uint64_t seed = 1);
  absl::StatusOr<telemetry::NodeReport> Read(int64_t now_ms) override;
  const std::vector<SimGpu>& gpus() const { return gpus_; }
  // Follows a changed inventory (a new MIG layout, GPUs added or gone); GPUs that stay keep their
  // counters and faults.
  void SetGpus(std::vector<SimGpu> gpus);

 private:
  struct State {
    double load = 0.2;  // 0..1, per GPU (MIG: per instance below)
    std::vector<double> instance_load;
    double energy_mj = 0;
    double temp_c = 35;
    double sbe = 0, dbe_volatile = 0, dbe_aggregate = 0;
    bool hot = false, remap_failure = false, off_bus = false;
    int last_xid = 0;
    std::vector<telemetry::XidEvent> pending_xids;
  };
  void Apply(const Fault& f, size_t gpu, int64_t now_ms);

  std::string node_;
  std::vector<SimGpu> gpus_;
  std::vector<Fault> faults_;
  std::vector<bool> fired_;
  std::vector<State> state_;
  std::mt19937_64 rng_;
  int64_t start_ms_ = -1;
  int64_t last_ms_ = -1;
};

}  // namespace gpuaas::agent

#endif  // GPUAAS_AGENT_SIMULATOR_H_
