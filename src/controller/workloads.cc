#include "controller/workloads.h"

#include <set>

#include "allocator/admission.h"
#include "common/status.h"
#include "controller/inventory.h"
#include "controller/lending.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::Workload;
using model::WorkloadPhase;
using Kind = allocator::AdmissionStep::Kind;

bool Active(const Workload& w) { return w.status.phase == WorkloadPhase::kPending || w.status.phase == WorkloadPhase::kRunning; }

constexpr std::string_view kOpenRunsOf = "open";  // Profiles of workloads' runs not yet ended, by pool

// The Profile of a workload's run (a cluster pod's carries the cluster label; the podruns
// controller keeps those).
bool OfWorkload(const model::Profile& p) { return !p.metadata.labels.contains(std::string(kLabelCluster)); }

// The receipt of a borrower's run ends with it.
absl::Status EndLoan(store::Txn& tx, const std::string& ns, const std::string& profile, std::string_view reason,
                     Time now) {
  ASSIGN_OR_RETURN(std::optional<model::Loan> l, store::GetObject<model::Loan>(tx, "", fmt::format("{}.{}", ns, profile)));
  if (!l || l->spec.end) return absl::OkStatus();
  l->spec.end = now;
  l->spec.end_reason = std::string(reason);
  return store::UpdateObject(tx, *l);
}

// Ends a workload's run: closes its Profile (written here) and sets the phase; `w` is then
// written by the caller, in the same transaction.
absl::Status EndRun(store::Txn& tx, Workload& w, WorkloadPhase phase, std::string reason, std::string message,
                    Time now) {
  if (!w.status.profile.empty()) {
    ASSIGN_OR_RETURN(std::optional<model::Profile> p, store::GetObject<model::Profile>(tx, w.metadata.ns, w.status.profile));
    if (p && !p->spec.end) {
      p->spec.end = now;
      RETURN_IF_ERROR(store::UpdateObject(tx, *p));
    }
    if (w.status.borrowed_from) RETURN_IF_ERROR(EndLoan(tx, w.metadata.ns, w.status.profile, reason, now));
  }
  w.status.borrowed_from.reset();
  w.status.reclaim_deadline.reset();
  w.status.phase = phase;
  w.status.reason = std::move(reason);
  w.status.message = std::move(message);
  w.status.devices.clear();
  w.status.profile.clear();
  w.status.start_time.reset();
  return absl::OkStatus();
}

}  // namespace

WorkloadController::WorkloadController(store::Store& store, runtime::Manager& manager)
    : store_(store),
      manager_(manager),
      workloads_(manager.informers().For<Workload>()),
      profiles_(manager.informers().For<model::Profile>()),
      loans_(manager.informers().For<model::Loan>()) {
  runtime::WorkQueue& q = manager.Add("workloads", *this);
  AddLendingIndexes(workloads_, loans_);
  profiles_.AddIndex(std::string(kOpenRunsOf), [](const model::Profile& p) {
    return OfWorkload(p) && !p.spec.end ? std::vector<std::string>{runtime::ObjectKey(p.metadata.ns, p.spec.pool)}
                                        : std::vector<std::string>{};
  });
  workloads_.AddIndex("pool", [](const Workload& w) {
    return Active(w) && !w.spec.pool.empty() ? std::vector<std::string>{runtime::ObjectKey(w.metadata.ns, w.spec.pool)}
                                             : std::vector<std::string>{};
  });
  // A workload's pool; a borrower's lending pool (while it runs there, and once it left).
  workloads_.OnChange([&q](const Workload* before, const Workload* after) {
    const Workload& w = after ? *after : *before;
    if (!w.spec.pool.empty()) q.Add(runtime::ObjectKey(w.metadata.ns, w.spec.pool));
    for (const Workload* v : {before, after}) {
      if (v != nullptr && v->status.borrowed_from) {
        q.Add(runtime::ObjectKey(v->status.borrowed_from->project, v->status.borrowed_from->pool));
      }
    }
  });
  manager.informers().For<model::GpuPool>().OnChange([this, &q](const model::GpuPool* before, const model::GpuPool* after) {
    const model::GpuPool& p = after ? *after : *before;
    const std::string key = runtime::ObjectKey(p.metadata.ns, p.metadata.name);
    if (!workloads_.ByIndex("pool", key).empty() || !workloads_.ByIndex(std::string(kBorrowersOf), key).empty() ||
        !loans_.ByIndex(std::string(kOpenLoansOf), key).empty()) {
      q.Add(key);
    }
  });
}

WorkloadStats WorkloadController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

absl::StatusOr<runtime::Result> WorkloadController::Reconcile(const std::string& key) {
  if (workloads_.ByIndex("pool", key).empty() && profiles_.ByIndex(kOpenRunsOf, key).empty() &&
      workloads_.ByIndex(std::string(kBorrowersOf), key).empty() && loans_.ByIndex(std::string(kOpenLoansOf), key).empty()) {
    return runtime::Result::Done();
  }
  // Named, not structured bindings: clang 14 (the fuzz preset) cannot capture those in lambdas.
  const std::pair<std::string, std::string> split = runtime::SplitKey(key);
  const std::string& ns = split.first;
  const std::string& pool_name = split.second;
  WorkloadStats delta;
  std::optional<Time> deadline;  // the next borrower's reclaim deadline
  const Time now = manager_.clock().Now();
  const int64_t seen = workloads_.SyncedRevision();
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    delta = WorkloadStats{};
    deadline.reset();
    ASSIGN_OR_RETURN(std::optional<model::GpuPool> pool, store::GetObject<model::GpuPool>(tx, ns, pool_name));
    ASSIGN_OR_RETURN(std::vector<Workload> in_ns, store::ListObjects<Workload>(tx, ns));
    std::vector<Workload*> mine;
    std::vector<const Workload*> view;
    for (Workload& w : in_ns) {
      if (w.spec.pool == pool_name && Active(w)) {
        mine.push_back(&w);
        view.push_back(&w);
      }
    }
    // Other projects' runs on the pool's lent devices, read afresh.
    ASSIGN_OR_RETURN(std::vector<Workload> lent, BorrowersOn(tx, workloads_, seen, ns, pool_name));
    std::vector<const Workload*> borrowers;
    for (const Workload& b : lent) borrowers.push_back(&b);
    const allocator::AdmissionDecision d = allocator::Admit(pool ? &*pool : nullptr, view, borrowers, now);
    std::vector<bool> dirty(mine.size(), false);
    std::vector<bool> lent_dirty(lent.size(), false);
    for (const allocator::AdmissionStep& step : d.steps) {
      if (step.borrower) {
        Workload& b = lent[step.workload];
        lent_dirty[step.workload] = true;
        if (step.kind == Kind::kReclaim) {
          b.status.reason = step.reason;
          b.status.message = step.message;
          b.status.reclaim_deadline = step.deadline;
          ++delta.reclaimed;
        } else if (step.kind == Kind::kEnd) {
          RETURN_IF_ERROR(EndRun(tx, b, step.phase, step.reason, step.message, now));
          if (step.reason == "Reclaimed") ++delta.removed;
        }
        continue;
      }
      Workload& w = *mine[step.workload];
      dirty[step.workload] = true;
      switch (step.kind) {
        case Kind::kEnd:
          RETURN_IF_ERROR(EndRun(tx, w, step.phase, step.reason, step.message, now));
          if (step.phase == WorkloadPhase::kEvicted) ++delta.evicted;
          if (step.reason == "Preempted") ++delta.preempted;
          if (step.reason == "DeviceFailed") ++delta.requeued;
          break;
        case Kind::kReclaim:
          break;  // only borrowers are reclaimed
        case Kind::kStart: {
          model::Profile prof;
          prof.metadata.name = fmt::format("{}-{}", w.metadata.name, tx.revision());
          prof.metadata.ns = ns;
          prof.spec = {w.metadata.name, pool_name, ns, step.devices, now, std::nullopt};
          RETURN_IF_ERROR(store::CreateObject(tx, prof, now));
          w.status.phase = WorkloadPhase::kRunning;
          w.status.reason = step.reason;
          w.status.message = step.message;
          w.status.devices = step.devices;
          w.status.start_time = now;
          w.status.profile = prof.metadata.name;
          ++delta.admitted;
          break;
        }
        case Kind::kWait:
          w.status.reason = step.reason;
          w.status.message = step.message;
          if (step.reason == "Queued") ++delta.queued;
          break;
      }
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      if (dirty[i]) RETURN_IF_ERROR(store::UpdateObject(tx, *mine[i]));
    }
    // A reservation takes its lent devices back its grace before its start.
    std::optional<Time> lend_until;
    if (pool && pool->spec.start_time) {
      const int64_t grace =
          pool->spec.lending ? pool->spec.lending->reclaim_grace_seconds : allocator::kDefaultReclaimGraceSeconds;
      const Time t = *pool->spec.start_time - std::chrono::seconds(grace);
      if (t > now) lend_until = t;
    }
    for (size_t i = 0; i < lent.size(); ++i) {
      if (lent_dirty[i]) RETURN_IF_ERROR(store::UpdateObject(tx, lent[i]));
      const Workload& b = lent[i];
      if (b.status.phase != WorkloadPhase::kRunning) continue;
      const std::optional<Time> due = b.status.reclaim_deadline ? b.status.reclaim_deadline : lend_until;
      if (due && (!deadline || *due < *deadline)) deadline = *due;
    }
    // Receipts of loans whose borrower is gone (deleted while it ran): they end now, with the
    // borrower's Profile.
    std::set<std::string> borrowing;
    for (const Workload& b : lent) {
      if (b.status.phase == WorkloadPhase::kRunning) borrowing.insert(fmt::format("{}.{}", b.metadata.ns, b.status.profile));
    }
    for (const auto& open : loans_.ByIndex(std::string(kOpenLoansOf), key)) {
      if (borrowing.contains(open->metadata.name)) continue;
      const std::string& bns = open->spec.borrower;
      ASSIGN_OR_RETURN(std::optional<Workload> b, store::GetObject<Workload>(tx, bns, open->spec.workload));
      const std::string run = open->metadata.name.substr(bns.size() + 1);
      if (b && b->status.profile == run) continue;  // still its run (it moved on in another reconcile)
      RETURN_IF_ERROR(EndLoan(tx, bns, run, "Deleted", now));
      ASSIGN_OR_RETURN(std::optional<model::Profile> p, store::GetObject<model::Profile>(tx, bns, run));
      if (p && !p->spec.end) {
        p->spec.end = now;
        RETURN_IF_ERROR(store::UpdateObject(tx, *p));
      }
    }
    // Runs whose workload was deleted (the API removes it): their Profiles end now.
    std::set<std::string> running;
    for (const Workload& w : in_ns) {
      if (!w.status.profile.empty()) running.insert(w.status.profile);
    }
    for (const auto& open : profiles_.ByIndex(kOpenRunsOf, key)) {
      if (running.contains(open->metadata.name)) continue;
      ASSIGN_OR_RETURN(std::optional<model::Profile> p, store::GetObject<model::Profile>(tx, ns, open->metadata.name));
      if (!p || p->spec.end) continue;
      p->spec.end = now;
      RETURN_IF_ERROR(store::UpdateObject(tx, *p));
    }
    return absl::OkStatus();
  }));
  std::lock_guard<std::mutex> lock(mu_);
  stats_.admitted += delta.admitted;
  stats_.preempted += delta.preempted;
  stats_.evicted += delta.evicted;
  stats_.queued += delta.queued;
  stats_.requeued += delta.requeued;
  stats_.reclaimed += delta.reclaimed;
  stats_.removed += delta.removed;
  if (deadline) return runtime::Result::After(std::max<Duration>(*deadline - now, std::chrono::milliseconds(1)));
  return runtime::Result::Done();
}

}  // namespace gpuaas::controller
