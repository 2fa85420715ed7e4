// The agent's nvidia-smi source (`gpuaas agent --nvidia-smi [--nvidia-smi-xml FILE]`): runs
// `nvidia-smi -q -x` each interval (or reads a saved capture) and reads it with
// telemetry::ParseNvidiaSmiXml. For nodes where NVML cannot be loaded by the agent itself; it
// has no energy counter and no XID events (NVML has both).
#ifndef GPUAAS_AGENT_NVIDIA_SMI_SOURCE_H_
#define GPUAAS_AGENT_NVIDIA_SMI_SOURCE_H_

#include <memory>
#include <string>

#include "agent/source.h"

namespace gpuaas::agent {

// `xml_file` empty: run `nvidia-smi -q -x` from PATH.
std::unique_ptr<GpuSource> MakeNvidiaSmiSource(const std::string& node, const std::string& xml_file);

}  // namespace gpuaas::agent

#endif  // GPUAAS_AGENT_NVIDIA_SMI_SOURCE_H_
