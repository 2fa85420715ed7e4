// Where the node agent's readings come from: NVML (the driver's library, loaded at run time) or
// a simulation. Layer 11 of docs/architecture.md.
#ifndef GPUAAS_AGENT_SOURCE_H_
#define GPUAAS_AGENT_SOURCE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "telemetry/report.h"

namespace gpuaas::agent {

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // One report: inventory, readings, and the XID events since the last call. `now_ms` stamps it.
  virtual absl::StatusOr<telemetry::NodeReport> Read(int64_t now_ms) = 0;
};

}  // namespace gpuaas::agent

#endif  // GPUAAS_AGENT_SOURCE_H_
