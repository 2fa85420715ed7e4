// The lending controller: puts waiting borrowers (preemptible workloads that name no pool) on the
// idle devices of other projects' lending pools, by allocator/lending.h, in one transaction that
// reads the pools, their workloads and the borrowers afresh. For each loan it starts the
// borrower's run (its Workload status, with status.borrowedFrom, and the Profile of the run) and
// writes the receipt (model::Loan) that billing charges and credits from.
//
// It owns the status of borrowers while they wait and the start of their runs; the workload
// controller of the lending pool (controller/workloads.h) owns the rest of a loan's life: the
// reclaim, the deadline, the end of the run and of the receipt.
//
// One key ("lending"): the decision is fair across every project, so it sees them all. Keys come
// from borrowers arriving or leaving, from the runs of lending pools (a device falls idle), from
// pools switching lending, from the moment the next device has been idle long enough, and from
// a project's budget changing. A project whose money budget (without overruns) is spent this
// month, its pools and its loans so far (billing::CheckBorrowing), borrows nothing more: its
// borrowers wait with reason BudgetExceeded; those already running are not stopped.
#ifndef GPUAAS_CONTROLLER_LENDING_H_
#define GPUAAS_CONTROLLER_LENDING_H_

#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

struct LendingStats {
  int64_t loans = 0;  // borrower runs started
  int64_t waits = 0;  // pending borrowers told why they wait
};

class LendingController final : public runtime::Reconciler {
 public:
  static constexpr std::string_view kKey = "lending";
  // Registers itself with `manager`.
  LendingController(store::Store& store, runtime::Manager& manager);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& key) override;
  LendingStats stats() const;

 private:
  store::Store& store_;
  runtime::Manager& manager_;
  runtime::Informer<model::GpuPool>& pools_;
  runtime::Informer<model::Workload>& workloads_;
  runtime::Informer<model::Profile>& profiles_;
  runtime::Informer<model::Loan>& loans_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  runtime::Informer<model::Project>& projects_;
  mutable std::mutex mu_;
  LendingStats stats_ ABSL_GUARDED_BY(mu_);
};

// Informer index names shared with the workload controller.
inline constexpr std::string_view kBorrowersOf = "borrowed-from";  // running borrowers, by "ns/pool" lent from
inline constexpr std::string_view kOpenLoansOf = "open-loans";     // Loans not ended, by "ns/pool" lent from
void AddLendingIndexes(runtime::Informer<model::Workload>& workloads, runtime::Informer<model::Loan>& loans);

// The running borrowers on pool `ns/pool`, read in `tx`: those the informer indexes, and any
// workload changed after `seen` (the informer's synced revision, taken before the transaction),
// which it may not show yet. A loan committed a moment ago is never missed.
absl::StatusOr<std::vector<model::Workload>> BorrowersOn(store::Txn& tx, const runtime::Informer<model::Workload>& workloads,
                                                         int64_t seen, const std::string& ns, const std::string& pool);

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_LENDING_H_
