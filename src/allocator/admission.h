// Workload admission inside a pool: which of a project's workloads run on which of the pool's
// devices, which wait, and which are preempted. Pure: it takes the pool and its workloads and
// returns a decision that the workload controller commits (controller/workloads.h).
//
// Rules:
//   - A device takes as many workloads as the pool's time-slicing replicas (one without).
//   - A pool that is gone or no longer live evicts its workloads; one that is not Ready yet
//     holds them pending.
//   - A running workload whose device left the pool (its GPU failed) ends its run and queues
//     again, to restart on the replacement.
//   - Pending work is taken in priority order (inference, batch, preemptible), then oldest first,
//     then by name; an inference workload that does not fit preempts running batch or
//     preemptible workloads of its profile, newest first, but only when that is enough.
//   - Borrowers (other projects' runs on the pool's lent devices, allocator/lending.h) hold their
//     devices whole. When the pool's own work does not fit, the borrowers on as many devices as it
//     needs are all told in this one decision (kReclaim: the deadline is now plus the pool's
//     reclaim grace), and the devices they free are the pool's work's before anyone else's; a
//     borrower already told is never told again, and one still there at its deadline is removed
//     (it queues again unless it asked not to). Lending switched off reclaims every borrower; a
//     reservation (spec.startTime) lends until its start less the grace, then reclaims every
//     borrower by its start, and ends its runs at its end (spec.endTime) as a release does.
#ifndef GPUAAS_ALLOCATOR_ADMISSION_H_
#define GPUAAS_ALLOCATOR_ADMISSION_H_

#include <string>
#include <string_view>
#include <vector>

#include "model/pool.h"

namespace gpuaas::allocator {

// One step of a decision. Steps are applied in order: a run may end (preemption) after another
// started, and a workload started in this decision may be preempted by a later one.
struct AdmissionStep {
  enum class Kind {
    kEnd,    // the run ends: the workload goes to `phase` (Pending: queued again; Evicted)
    kStart,  // the workload starts on `devices`
    kWait,   // a pending workload stays pending, showing `reason` and `message`
    kReclaim,  // a borrower is told to leave by `deadline`
  };
  Kind kind;
  size_t workload;  // index into the workloads given (into the borrowers when `borrower`)
  model::WorkloadPhase phase = model::WorkloadPhase::kPending;
  std::string reason;
  std::string message;
  std::vector<model::WorkloadDevice> devices;  // kStart
  bool borrower = false;
  Time deadline{};  // kReclaim
};

struct AdmissionDecision {
  std::vector<AdmissionStep> steps;
  int Count(AdmissionStep::Kind k, std::string_view reason = "") const;
};

// The reclaim grace of a pool that does not say (a reservation without spec.lending).
inline constexpr int64_t kDefaultReclaimGraceSeconds = 30;

// `pool` is null when the pool does not exist. `workloads` are the pool's Pending and Running
// workloads (others are ignored); `borrowers` the running borrowers on its devices.
AdmissionDecision Admit(const model::GpuPool* pool, const std::vector<const model::Workload*>& workloads,
                        const std::vector<const model::Workload*>& borrowers = {}, Time now = Time{});

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_ADMISSION_H_
