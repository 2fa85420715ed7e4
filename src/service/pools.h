// The pool service: what users and operators may do to projects and pools, with every rule the
// API promises (validation against the catalogue, project quota, fleet capacity, final
// rejection), each change and its audit event in one store transaction. Used by the API; the
// pool controller does the rest of the lifecycle. Thread-safe.
#ifndef GPUAAS_SERVICE_POOLS_H_
#define GPUAAS_SERVICE_POOLS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "model/billing.h"
#include "model/pool.h"
#include "store/dry_run_store.h"
#include "store/store.h"

namespace gpuaas::service {

// An entry of the audit log (kind AuditEvent, cluster-scoped, named by revision).
struct AuditEvent {
  Time time{};
  std::string user;
  std::string action;  // CreateProject, CreatePool, Approve, Reject, Release, ...
  std::string object;  // "gpupools/vision/llm-train"
  std::string detail;
};
inline constexpr std::string_view kAuditKind = "AuditEvent";

// Writes one audit event in `tx` (every service change records one in its own transaction).
absl::Status RecordAudit(store::Txn& tx, Time now, const std::string& user, std::string action, std::string object,
                         std::string detail);

// GPUs in the fleet by catalogue model, for capacity checks.
using FleetCounter = std::function<std::map<std::string, int64_t>()>;

class PoolService {
 public:
  PoolService(store::Store& store, const Clock& clock, FleetCounter fleet);

  // The same service on the same store with every write rolled back at its end
  // (store/dry_run_store.h): each write answers as it would, checks, quota and budget included,
  // and nothing is stored (the API's ?dryRun=All).
  PoolService& DryRun() { return dry_run_ ? *dry_run_ : *this; }

  // Each returns the stored object (with its new resourceVersion) or:
  // InvalidArgument (bad input), AlreadyExists, NotFound, FailedPrecondition (state forbids it),
  // ResourceExhausted (over quota or over what the fleet could ever hold).
  absl::StatusOr<model::Project> CreateProject(model::Project project, const std::string& user);
  absl::StatusOr<model::GpuPool> CreatePool(model::GpuPool pool, const std::string& user);
  absl::StatusOr<model::GpuPool> Approve(const std::string& ns, const std::string& name,
                                         bool approve, const std::string& reason,
                                         const std::string& user);
  absl::StatusOr<model::GpuPool> Release(const std::string& ns, const std::string& name,
                                         const std::string& user);
  // Deletes a pool as kube-apiserver deletes an object with a finalizer. One that holds nothing
  // goes at once, so that its name can be used again: a request not yet decided (withdrawn), a
  // rejected pool, or a released one (its meter stays: the pool controller renames it
  // model::RetiredMeterName, and its invoices keep billing what it held). One in force is
  // released as Release releases it (billing ends now) and kept, with its deletionTimestamp and
  // the finalizer model::kReleaseFinalizer, until the pool controller has freed its devices and
  // removes it; so is one already being released. Returns the pool as it was, or as it is kept.
  absl::StatusOr<model::GpuPool> DeletePool(const std::string& ns, const std::string& name,
                                            const std::string& user);

  // A write's new object, made from the stored one: a patch, a server-side apply or a
  // replacement (the API makes it; this service only judges it).
  template <typename T>
  using Edit = absl::FunctionRef<absl::StatusOr<T>(const T& stored)>;

  // Change a stored object as `edit` says, in one transaction with its audit event. One set of
  // rules for every kind: the name and namespace stay; a resourceVersion or uid that the edit
  // carries must be the stored one (Aborted: the object changed since it was read); labels and
  // annotations are validated; status, finalizers, deletionTimestamp and what the store sets stay
  // as stored (status is its controllers'); an edit that changes nothing writes nothing and
  // returns the object as stored. Per kind: a project's spec may change, validated as on
  // creation; a pool's only until an operator decided on it, checked again as a new request
  // (catalogue, fleet, quota, budget), and never spec.releaseRequested (a release or a deletion
  // sets it); workloads, rate cards and credit notes keep their spec (labels and annotations
  // change). InvalidArgument names the field that may not change.
  absl::StatusOr<model::Project> UpdateProject(const std::string& name, Edit<model::Project> edit,
                                               const std::string& user);
  absl::StatusOr<model::GpuPool> UpdatePool(const std::string& ns, const std::string& name, Edit<model::GpuPool> edit,
                                            const std::string& user);
  absl::StatusOr<model::Workload> UpdateWorkload(const std::string& ns, const std::string& name,
                                                 Edit<model::Workload> edit, const std::string& user);
  absl::StatusOr<model::RateCard> UpdateRateCard(const std::string& name, Edit<model::RateCard> edit,
                                                 const std::string& user);
  absl::StatusOr<model::CreditNote> UpdateCreditNote(const std::string& ns, const std::string& name,
                                                     Edit<model::CreditNote> edit, const std::string& user);

  // Billing. The pool controller keeps each pool's UsageRecord (controller/pool_meter.h): opened
  // from the approval, ended at spec.releaseRequested. A new pool, and an approval, pass the
  // project's budget (ResourceExhausted, reason BudgetExceeded, with the figures).
  //
  // A rate card takes effect no earlier than the start of the current month (a closed month's
  // invoices are final) and in the currency of the cards before it; cards are never edited, a
  // later one supersedes.
  absl::StatusOr<model::RateCard> CreateRateCard(model::RateCard card, const std::string& user);
  // A credit note against a closed month's invoice: at most what that month billed less earlier
  // notes; a reason is required. FailedPrecondition for a month still running.
  absl::StatusOr<model::CreditNote> IssueCreditNote(const std::string& project, const std::string& period,
                                                    int64_t amount_micros, const std::string& reason,
                                                    const std::string& user);
  // Sets (or, with nullopt, removes) a project's budget.
  absl::StatusOr<model::Project> SetBudget(const std::string& project, std::optional<model::Project::Budget> budget,
                                           const std::string& user);

  // Workloads: created Pending (the workload controller admits them); refused at once when the
  // pool could never hold them (more devices of a profile than it has). Deleting removes the
  // workload, so that its name can be used again; the workload controller then closes the
  // Profile of a run it had (which stays, as the record of the run).
  absl::StatusOr<model::Workload> CreateWorkload(model::Workload w, const std::string& user);
  absl::StatusOr<model::Workload> DeleteWorkload(const std::string& ns, const std::string& name,
                                                 const std::string& user);

  // The audit log, oldest first, at most `limit` (0: all) events after revision `after`.
  absl::StatusOr<std::vector<std::pair<int64_t, AuditEvent>>> Audit(int64_t after, size_t limit);

 private:
  absl::Status Record(store::Txn& tx, const std::string& user, std::string action,
                      std::string object, std::string detail);
  // A pool request's own checks (catalogue, what the fleet could ever hold), normalising model
  // names; then the project's: it exists, its quota (the pool's other live pools with this
  // one), its budget.
  absl::Status CheckPoolRequest(model::GpuPool& pool) const;
  // A reservation's window (spec.startTime/endTime): not past, and room in the fleet now.
  absl::Status CheckReservation(store::Txn& tx, const model::GpuPool& pool) const;
  absl::Status CheckPoolInProject(store::Txn& tx, const model::GpuPool& pool) const;
  // Asks for the release of an approved pool in force (sets spec.releaseRequested).
  absl::Status RequestRelease(store::Txn& tx, model::GpuPool& pool, const std::string& user);
  // UpdateProject and its siblings: the common rules, then `spec_rule` (the kind's) on a changed
  // spec, which may also normalise the desired object.
  template <typename T>
  absl::StatusOr<T> Update(const std::string& ns, const std::string& name, Edit<T> edit, const std::string& user,
                           absl::FunctionRef<absl::Status(store::Txn&, const T& stored, T& desired)> spec_rule);
  struct DryRunTag {};
  PoolService(store::Store& store, const Clock& clock, FleetCounter fleet, DryRunTag);

  store::Store& store_;
  const Clock& clock_;
  FleetCounter fleet_;
  std::unique_ptr<store::DryRunStore> dry_store_;  // null in the dry-run twin itself
  std::unique_ptr<PoolService> dry_run_;
};

}  // namespace gpuaas::service

#endif  // GPUAAS_SERVICE_POOLS_H_
