// Lending: which devices of the pools that lend are idle enough to lend, and which waiting
// borrowers (preemptible workloads that name no pool) get them. Pure: the lending controller
// (controller/lending.h) gathers the inputs and commits the decision; taking devices back is the
// pool's own admission (allocator/admission.h), which sees the borrowers on its devices.
//
// Rules (docs/lending.md):
//   - A device is lent whole (a whole GPU, or a MIG instance as it stands; lending never changes
//     a MIG layout or moves the pool's allocation), only while the pool lends, is Ready and not
//     being released, no run of the pool uses it, none of the pool's work of its profile waits,
//     and no run of the pool has used it for spec.lending.idleAfterSeconds.
//   - A borrower takes all its devices from one pool of another project, of its profile and, if
//     it names one, its model; within its project's borrowing limit for that model.
//   - Waiting borrowers are served fairly across projects: the project that borrowed the fewest
//     GPU-seconds lately goes first (then the fewest devices borrowed now, then the name); within
//     a project, the oldest first. A borrower that does not fit does not hold back smaller ones.
#ifndef GPUAAS_ALLOCATOR_LENDING_H_
#define GPUAAS_ALLOCATOR_LENDING_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/pool.h"

namespace gpuaas::allocator {

// How far back a project's borrowing counts for the fairness order.
inline constexpr Duration kFairnessWindow = std::chrono::hours(24);

struct LendableDevice {
  model::WorkloadDevice device;
  std::string model;  // catalogue name
  std::string profile;
  friend bool operator==(const LendableDevice&, const LendableDevice&) = default;
};

// A lending pool's devices and what it knows of their use.
struct LenderView {
  const model::GpuPool* pool = nullptr;
  std::map<std::string, std::string> model_of_gpu;  // GPU UUID -> catalogue model
  // Device key (LendKey) -> when a run of the pool last left it; a device never used counts
  // from `ready_since`.
  std::map<std::string, Time> last_used;
  Time ready_since{};
  std::vector<const model::Workload*> owner;      // the pool's Pending and Running workloads
  std::vector<const model::Workload*> borrowers;  // running on its devices
};

// "gpu/instance": how lending names a device.
std::string LendKey(const model::WorkloadDevice& d);

// The devices of `v` that may be lent at `now`, in the order of the allocation; `next` (when
// not null) gets the earliest later moment at which another device becomes idle enough.
std::vector<LendableDevice> Lendable(const LenderView& v, Time now, std::optional<Time>* next = nullptr);

struct Borrowing {
  size_t borrower;  // index into the borrowers given
  size_t lender;    // index into the lenders given
  std::string model;
  std::string profile;
  std::vector<model::WorkloadDevice> devices;
};
struct BorrowerWait {
  size_t borrower;
  std::string message;
};
struct LendingDecision {
  std::vector<Borrowing> loans;
  std::vector<BorrowerWait> waits;  // pending borrowers that got nothing, and why
};

struct BorrowingState {
  // project -> GPU-seconds borrowed within kFairnessWindow (MIG instances by their share).
  std::map<std::string, double> recent_gpu_seconds;
  // project -> model -> devices its borrowers hold now.
  std::map<std::string, std::map<std::string, int64_t>> held;
  // project -> model -> the most it may hold (spec.quota.borrowing); absent: no limit.
  std::map<std::string, std::map<std::string, int64_t>> limits;
};

// Places the Pending ones of `borrowers` on what `lendable` offers (lendable[i] belongs to
// lenders[i]).
LendingDecision Lend(const std::vector<LenderView>& lenders, const std::vector<std::vector<LendableDevice>>& lendable,
                     const std::vector<const model::Workload*>& borrowers, const BorrowingState& state);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_LENDING_H_
