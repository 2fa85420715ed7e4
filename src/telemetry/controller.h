// The telemetry controller: the hub's link to the store. Each pass it
//   - tells the hub which GPUs the inventory knows (for matching),
//   - writes the health rules' verdicts into each GpuCapacity's status.conditions
//     (MemoryErrors, ResetRequired, Overheating) and re-sums Healthy, so that a failed GPU leaves
//     allocation (the allocator's Health filter) and its pool is told (controller/pools.cc),
//   - persists closed rollups and prunes those past retention (a day of minutes, 30 days of hours).
// Level-triggered: GPUs whose verdict changed are written at once, and every GPU the hub tracks
// is compared again every `resync` passes. Thread-compatible: one pass at a time.
#ifndef GPUAAS_TELEMETRY_CONTROLLER_H_
#define GPUAAS_TELEMETRY_CONTROLLER_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "store/store.h"
#include "telemetry/hub.h"

namespace gpuaas::telemetry {

struct TelemetryPassStats {
  int gpus_updated = 0;
  int rollups_written = 0;
};

class TelemetryController {
 public:
  TelemetryController(store::Store& store, Hub& hub, const Clock& clock, int resync = 30)
      : store_(store), hub_(hub), clock_(clock), resync_(resync) {}

  // Call once, at start: loads persisted rollups of the retention window into the hub, and the
  // health verdicts a previous run wrote (GPUs with MemoryErrors or ResetRequired True stay failed
  // until a reset is seen). Returns the rollup buckets loaded.
  absl::StatusOr<size_t> Restore();
  absl::StatusOr<TelemetryPassStats> RunOnce();

 private:
  store::Store& store_;
  Hub& hub_;
  const Clock& clock_;
  int resync_;
  int64_t passes_ = 0;
  int64_t known_revision_ = -1;  // store revision of the last known-GPU list
  int64_t known_pass_ = 0;       // the pass that listed it
  std::set<std::string> tracked_;  // GPUs with a verdict written at least once
  std::set<std::string> retry_;    // verdicts a failed pass could not write
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_CONTROLLER_H_
