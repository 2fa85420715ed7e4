// The agent's NVML source: loads the driver's libnvidia-ml.so.1 with dlopen at run time, so the
// binary builds and runs without CUDA or a GPU; without the library it says so. The few NVML
// prototypes used are declared by hand in nvml.cc (NVML 12/13 ABI: the versioned _v2 entry
// points that nvml.h maps the plain names to). Readings per GPU: power (mW → W), total energy
// (mJ since the driver loaded), utilization, framebuffer, temperature, ECC counters, remapped
// rows, the recovery action; per MIG instance: framebuffer; XID events from an NVML event set.
// A call a GPU does not support leaves that reading out rather than failing the report.
#ifndef GPUAAS_AGENT_NVML_H_
#define GPUAAS_AGENT_NVML_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/source.h"

namespace gpuaas::agent {

// Opens NVML from `library` (default "libnvidia-ml.so.1", as the driver installs it) and
// initialises it. FailedPrecondition naming the library when it cannot be loaded or initialised.
absl::StatusOr<std::unique_ptr<GpuSource>> OpenNvml(const std::string& node, const std::string& library = "");

}  // namespace gpuaas::agent

#endif  // GPUAAS_AGENT_NVML_H_
