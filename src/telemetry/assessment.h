// Assessment of pools: allocated against used GPU-hours over a period, idle pools, and right-size
// suggestions. Pure over the hub's series (no I/O).
//
// Definitions (docs/monitoring.md):
//   allocated GPU-hours  Σ over the pool's devices of weight × hours allocated in the period,
//                        where a whole GPU weighs 1 and a MIG instance its compute slices / 7;
//   used GPU-hours       Σ weight × SM activity × hours, over the steps with readings;
//   utilization          used / allocated GPU-hours of the steps with readings (0–1);
//   idle                 allocated, with readings, and under `idle_below` utilization for the
//                        last `idle_for` seconds without a break;
//   right-size           a smaller profile of the same GPU model whose memory holds the peak
//                        framebuffer use (plus 10%) and whose compute slices hold the peak SM
//                        activity, e.g. 7g instances that never exceed 3g-size memory and SMs.
#ifndef GPUAAS_TELEMETRY_ASSESSMENT_H_
#define GPUAAS_TELEMETRY_ASSESSMENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/fleet.h"
#include "model/billing.h"
#include "model/pool.h"
#include "absl/status/statusor.h"
#include "telemetry/hub.h"

namespace gpuaas::telemetry {

struct AssessedDevice {
  DeviceRef ref;
  std::string model;    // catalogue name
  std::string profile;  // MIG profile or "full"
};

struct PoolUsage {
  std::string ns;
  std::string name;
  int64_t allocated_since = 0;  // unix seconds: when billing of its devices began
  std::vector<AssessedDevice> devices;  // what it holds now
  // As its invoice counts them (billing::CostOver over the window), and the devices its meter
  // billed (MeteredDevices): the assessment's GPU-hours are the invoice's.
  double allocated_gpu_hours = 0;
  std::vector<DeviceRef> metered{};
};

struct AssessmentOptions {
  double idle_below = 0.05;
  int64_t idle_for_s = 3600;
};

struct PoolAssessment {
  std::string ns;
  std::string name;
  double allocated_gpus = 0;
  double allocated_gpu_hours = 0;
  double used_gpu_hours = 0;
  double covered_gpu_hours = 0;  // allocated GPU-hours that had readings
  double utilization = 0;
  bool idle = false;
  int64_t idle_seconds = 0;  // the current run under the threshold
  double peak_fb_used_mib = 0;
  double peak_sm_gpu_fraction = 0;  // peak SM activity in GPU terms (weight × SM active)
  std::string suggestion;           // empty when the pool fits its work
  // The suggestion as a code and its figures, for front ends that word it in their reader's
  // language: "RightSize" with devices, profile, peakFbUsedMiB, peakSmPercent, suggested,
  // suggestedShare and share (of a GPU, each).
  std::string suggestion_code;
  std::map<std::string, std::string> suggestion_params;
};

// `step`: 60 for periods up to a day, else 3600, as the rollups hold them. Unavailable when the
// telemetry history does not answer (Hub::Query).
absl::StatusOr<PoolAssessment> AssessPool(const Hub& hub, const PoolUsage& pool, int64_t from, int64_t to, int64_t now,
                          const AssessmentOptions& options);

// The GPU with a UUID (as the inventory spells it), or null: how the functions below find the
// GPUs they need, whether the caller holds a map of its own or the API's decoded fleet.
using GpuLookup = std::function<const model::GpuCapacity*(const std::string& uuid)>;
GpuLookup LookupIn(const std::map<std::string, model::GpuCapacity>& gpus);

// A device a workload ran on (a whole GPU, or the MIG instance with that UUID) as the hub names
// it, weighted by its share of the GPU.
DeviceRef WorkloadDeviceRef(const Hub& hub, const model::WorkloadDevice& d, const GpuLookup& gpus);

// GPU-hours used, and measured (had readings), over [from, to) by `devices`: each device's share
// of a GPU times its SM activity (DCGM_FI_PROF_SM_ACTIVE, else the graphics engine's, else GPU
// utilization for a whole GPU), over the part of [from, to) within its window (from_s, to_s),
// to the second. nullopt when no reading covers any of them. The one definition invoices and the
// assessment share (docs/monitoring.md, "Allocated and used GPU-hours").
struct GpuHoursUsed {
  double used = 0;
  double measured = 0;  // the allocated GPU-hours that had readings
};
absl::StatusOr<std::optional<GpuHoursUsed>> UsedGpuHours(const Hub& hub, const std::vector<DeviceRef>& devices, int64_t from,
                                         int64_t to, int64_t now);

// The devices `meters` bill for `pool` (of `model`/`profile` when they are not empty: one invoice
// line's), each weighted by its share of a GPU and windowed from the later of its meter's start
// and its entry's `since` to the meter's end (or `open_until`, unix seconds). Entries without
// device names (meters written before they had them) give none.
std::vector<DeviceRef> MeteredDevices(const Hub& hub, const std::vector<model::UsageRecord>& meters, std::string_view pool,
                                      std::string_view model, std::string_view profile, int64_t open_until);

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_ASSESSMENT_H_
