// A node's telemetry report: what the agent reads from NVML in one interval (inventory, readings,
// XID events) and pushes to `POST /api/v1/telemetry` as JSON. The same report renders as
// Prometheus text in dcgm-exporter's metric names and labels, which the agent serves on its
// /metrics and which the server also accepts. Pure.
//
// JSON shape (readings use the series names of fields.h; absent means not read):
//   {"node": "h200-a", "time_ms": 1764000000000,
//    "gpus": [{"uuid": "GPU-…", "index": 0, "name": "NVIDIA H200", "memory_mib": 143771,
//              "mig_enabled": true, "readings": {"power_w": 412.5, "energy_mj": 1.2e9, …},
//              "instances": [{"gi": 1, "profile": "3g.71gb", "start": 0, "size": 4,
//                             "uuid": "MIG-…", "readings": {"sm_active": 0.4, "fb_used_mib": 20000}}],
//              "xid_events": [{"xid": 79, "gi": -1, "time_ms": 1764000000000}]}]}
#ifndef GPUAAS_TELEMETRY_REPORT_H_
#define GPUAAS_TELEMETRY_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "telemetry/fields.h"

namespace gpuaas::telemetry {

using Readings = std::map<Field, double>;

// A container holding a device, as the kubelet's PodResources API names it.
struct PodRef {
  std::string ns;
  std::string pod;
  std::string container;
  friend bool operator==(const PodRef&, const PodRef&) = default;
  friend auto operator<=>(const PodRef&, const PodRef&) = default;
};

struct InstanceReport {
  int gi = 0;  // GPU instance id
  std::string profile;
  int start = 0;  // placement start (memory slices)
  int size = 0;
  std::string uuid;  // "MIG-…"
  Readings readings;
  std::vector<PodRef> pods = {};  // who holds the instance (several when time-sliced)
  friend bool operator==(const InstanceReport&, const InstanceReport&) = default;
};

struct XidEvent {
  int xid = 0;
  int gi = -1;  // the MIG GPU instance it belongs to, -1 for the GPU
  int64_t time_ms = 0;
  friend bool operator==(const XidEvent&, const XidEvent&) = default;
};

struct GpuReport {
  std::string uuid;
  int index = 0;
  std::string name;
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  Readings readings;
  std::vector<InstanceReport> instances;
  std::vector<XidEvent> xid_events;
  std::vector<PodRef> pods = {};  // who holds the whole GPU
  friend bool operator==(const GpuReport&, const GpuReport&) = default;
};

struct NodeReport {
  std::string node;
  std::string driver_version;
  int64_t time_ms = 0;
  std::vector<GpuReport> gpus;
  // Which agent process sent it (its host and a random id made at its start), and the boot of
  // its node (/proc/sys/kernel/random/boot_id): a GPU's counters are read against one agent's
  // history, and a new boot tells a reboot (which resets GPUs) from a restarted agent.
  std::string agent{};
  std::string boot_id{};
  friend bool operator==(const NodeReport&, const NodeReport&) = default;
};

std::string EncodeReport(const NodeReport& r, bool pretty = false);
// InvalidArgument naming the offending field; unknown reading names are errors too, so that a
// typo does not silently drop data.
absl::StatusOr<NodeReport> DecodeReport(std::string_view json);

// dcgm-exporter's exposition of the report: HELP and TYPE per family, labels gpu, UUID,
// device, modelName, Hostname (and GPU_I_PROFILE, GPU_I_ID on instance rows; GPU-level fields
// repeat on every instance row, as dcgm-exporter does), err_code on XID rows, and container,
// namespace and pod where a pod holds the device (the first, by namespace and name, of a
// time-sliced device's).
// Several reports (an agent that plays many nodes) render with each family's HELP and TYPE once.
std::string RenderDcgmText(const NodeReport& r);
std::string RenderDcgmText(const std::vector<NodeReport>& reports);

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_REPORT_H_
