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
#include "model/pool.h"
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
  int64_t allocated_since = 0;  // unix seconds
  std::vector<AssessedDevice> devices;
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

// `step`: 60 for periods up to a day, else 3600, as the rollups hold them.
PoolAssessment AssessPool(const Hub& hub, const PoolUsage& pool, int64_t from, int64_t to, int64_t now,
                          const AssessmentOptions& options);

// The GPU with a UUID (as the inventory spells it), or null: how the functions below find the
// GPUs they need, whether the caller holds a map of its own or the API's decoded fleet.
using GpuLookup = std::function<const model::GpuCapacity*(const std::string& uuid)>;
GpuLookup LookupIn(const std::map<std::string, model::GpuCapacity>& gpus);

// A device a workload ran on (a whole GPU, or the MIG instance with that UUID) as the hub names
// it, weighted by its share of the GPU.
DeviceRef WorkloadDeviceRef(const Hub& hub, const model::WorkloadDevice& d, const GpuLookup& gpus);

// GPU-hours used (share x SM activity) over [from, to) by the runs (Profiles) of `pool` on
// devices of `model`/`profile`, each device counted while its run lasted; nullopt when no
// reading covers them (showback beside billed hours).
std::optional<double> UsedGpuHours(const Hub& hub, const std::vector<model::Profile>& runs, std::string_view pool,
                                   const GpuLookup& gpus, std::string_view model,
                                   std::string_view profile, int64_t from, int64_t to, int64_t now);

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_ASSESSMENT_H_
