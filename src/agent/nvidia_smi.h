// Reads `nvidia-smi -q -x` output into a node report: the agent's second source (`gpuaas agent
// --nvidia-smi`), for nodes where only the tool is at hand, and the way to replay a capture.
// Pure; tinyxml2 inside nvidia_smi.cc.
//
// The schema drifts between drivers (DTD v11 of driver 510, v12 of 535, v13 of 580 and later;
// shared/reference/monitoring-billing.md §2.4): power is <power_readings><power_draw>,
// <gpu_power_readings><power_draw> or <gpu_power_readings><average_power_draw>; the recovery
// action is <gpu_recovery_action> (v13) or <gpu_reset_status> (v12). Elements a driver renamed or
// a GPU does not support ("N/A") are left out of the readings, never read as zero. The XML has no
// energy counter and no XID events; MIG instances come without profile names or placements.
#ifndef GPUAAS_AGENT_NVIDIA_SMI_H_
#define GPUAAS_AGENT_NVIDIA_SMI_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "telemetry/report.h"

namespace gpuaas::agent {

// InvalidArgument when the text is not XML or has no <nvidia_smi_log> root.
absl::StatusOr<telemetry::NodeReport> ParseNvidiaSmiXml(std::string_view xml, const std::string& node, int64_t now_ms);

}  // namespace gpuaas::agent

#endif  // GPUAAS_AGENT_NVIDIA_SMI_H_
