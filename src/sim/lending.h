// Lending on a trace: how much of the GPU time that dedicated pools leave idle goes to other
// projects' preemptible work, and what taking it back costs the owners, beside the same run
// without lending. The model of docs/lending.md at whole-GPU grain, in simulated time:
//   - the trace's pods are split over `projects` projects by a hash of their name, and a share of
//     them (`borrower_share`, by another hash) are preemptible borrowers; the rest are the
//     projects' own work;
//   - each project holds a dedicated pool of as many GPUs as its own work ever runs at once (the
//     peak, so that its work never waits for capacity: any wait is the lending's);
//   - a pool's GPU is lent once no run of its project used it for `idle_after` seconds, to a
//     waiting borrower of another project (oldest first), all of a borrower's GPUs from one pool;
//   - the project's work that finds too few free GPUs takes lent ones back: their borrowers leave
//     `grace` seconds later (or sooner, when they end), and queue again with the work they had
//     left; a borrower waits at most its own run time, then gives up.
// A pod asks for max(1, num_gpu) whole GPUs; times are the trace's creation and deletion times,
// arrivals sped up by `speedup` as churn mode does. Pure; no I/O.
#ifndef GPUAAS_SIM_LENDING_H_
#define GPUAAS_SIM_LENDING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/trace.h"

namespace gpuaas::sim {

struct LendingConfig {
  int projects = 8;
  double borrower_share = 0.3;
  int64_t idle_after = 600;  // seconds
  int64_t grace = 30;        // seconds
  double speedup = 1;
  bool lending = true;
};

struct LendingResult {
  int64_t owner_pods = 0;
  int64_t borrower_pods = 0;
  int64_t pool_gpus = 0;         // the projects' dedicated pools, together
  double pool_gpu_hours = 0;     // what they hold over the run
  double owner_gpu_hours = 0;    // what their own work used
  double idle_gpu_hours = 0;     // held and unused by their own work
  double lent_gpu_hours = 0;     // of those, lent to borrowers
  int64_t borrowers_started = 0;  // runs begun (a reclaimed borrower may begin again)
  int64_t borrowers_completed = 0;
  int64_t borrowers_gave_up = 0;
  int64_t reclaims = 0;       // borrower runs taken back
  int64_t owners_delayed = 0;  // the projects' pods that waited for lent GPUs to come back
  double delay_p50_s = 0;      // of those waits
  double delay_p99_s = 0;
  double delay_max_s = 0;
};

// InvalidArgument for a pod without creation and deletion times, or a config out of range
// (projects 2..1000, borrower share 0..1, idle and grace 0..86400 s, speedup 1..1,000,000).
absl::StatusOr<LendingResult> RunLending(const std::vector<TracePod>& pods, uint64_t seed, const LendingConfig& config);

}  // namespace gpuaas::sim

#endif  // GPUAAS_SIM_LENDING_H_
