#include "controller/lending.h"

#include <map>
#include <set>

#include "allocator/admission.h"
#include "allocator/lending.h"
#include "billing/billing.h"
#include "catalog/catalog.h"
#include "common/status.h"
#include "common/strings.h"
#include "controller/inventory.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::Workload;
using model::WorkloadPhase;

constexpr std::string_view kAll = "all";
constexpr std::string_view kLendingPools = "lending";
constexpr std::string_view kPendingBorrowers = "pending-borrowers";
constexpr std::string_view kRunsOfPool = "runs-of-pool";  // Profiles of workloads' runs, by "ns/pool"
constexpr std::string_view kLoansOf = "loans-of";         // Loans by borrower project

// A pool that lends, or a reservation (which lends until its start).
bool Lends(const model::GpuPool* p) {
  return p != nullptr && ((p->spec.lending && p->spec.lending->enabled) || p->spec.start_time);
}

// Seconds of [a, b) within [from, to).
double Overlap(Time a, Time b, Time from, Time to) {
  const Time s = std::max(a, from);
  const Time e = std::min(b, to);
  return e > s ? std::chrono::duration<double>(e - s).count() : 0.0;
}

}  // namespace

void AddLendingIndexes(runtime::Informer<Workload>& workloads, runtime::Informer<model::Loan>& loans) {
  workloads.AddIndex(std::string(kBorrowersOf), [](const Workload& w) {
    if (!model::IsBorrower(w) || w.status.phase != WorkloadPhase::kRunning || !w.status.borrowed_from) {
      return std::vector<std::string>{};
    }
    return std::vector<std::string>{runtime::ObjectKey(w.status.borrowed_from->project, w.status.borrowed_from->pool)};
  });
  loans.AddIndex(std::string(kOpenLoansOf), [](const model::Loan& l) {
    return l.spec.end ? std::vector<std::string>{}
                      : std::vector<std::string>{runtime::ObjectKey(l.spec.lender, l.spec.pool)};
  });
}

absl::StatusOr<std::vector<Workload>> BorrowersOn(store::Txn& tx, const runtime::Informer<Workload>& workloads,
                                                  int64_t seen, const std::string& ns, const std::string& pool) {
  std::set<std::pair<std::string, std::string>> candidates;
  for (const auto& w : workloads.ByIndex(std::string(kBorrowersOf), runtime::ObjectKey(ns, pool))) {
    candidates.insert({w->metadata.ns, w->metadata.name});
  }
  ASSIGN_OR_RETURN(std::vector<store::Key> changed, tx.ChangedKeys(Workload::kKind, seen));
  for (store::Key& k : changed) candidates.insert({std::move(k.ns), std::move(k.name)});
  std::vector<Workload> out;
  for (const auto& [wns, name] : candidates) {
    ASSIGN_OR_RETURN(std::optional<Workload> w, store::GetObject<Workload>(tx, wns, name));
    if (w && model::IsBorrower(*w) && w->status.phase == WorkloadPhase::kRunning && w->status.borrowed_from &&
        w->status.borrowed_from->project == ns && w->status.borrowed_from->pool == pool) {
      out.push_back(std::move(*w));
    }
  }
  return out;
}

LendingController::LendingController(store::Store& store, runtime::Manager& manager)
    : store_(store),
      manager_(manager),
      pools_(manager.informers().For<model::GpuPool>()),
      workloads_(manager.informers().For<Workload>()),
      profiles_(manager.informers().For<model::Profile>()),
      loans_(manager.informers().For<model::Loan>()),
      gpus_(manager.informers().For<model::GpuCapacity>()),
      projects_(manager.informers().For<model::Project>()) {
  runtime::WorkQueue& q = manager.Add("lending", *this);
  AddLendingIndexes(workloads_, loans_);
  pools_.AddIndex(std::string(kLendingPools), [](const model::GpuPool& p) {
    return Lends(&p) ? std::vector<std::string>{std::string(kAll)} : std::vector<std::string>{};
  });
  workloads_.AddIndex(std::string(kPendingBorrowers), [](const Workload& w) {
    return model::IsBorrower(w) && w.status.phase == WorkloadPhase::kPending ? std::vector<std::string>{std::string(kAll)}
                                                                             : std::vector<std::string>{};
  });
  profiles_.AddIndex(std::string(kRunsOfPool), [](const model::Profile& p) {
    return p.metadata.labels.contains(std::string(kLabelCluster))
               ? std::vector<std::string>{}
               : std::vector<std::string>{runtime::ObjectKey(p.metadata.ns, p.spec.pool)};
  });
  loans_.AddIndex(std::string(kLoansOf), [](const model::Loan& l) { return std::vector<std::string>{l.spec.borrower}; });
  const std::string key(kKey);
  workloads_.OnChange([this, &q, key](const Workload* before, const Workload* after) {
    const Workload& w = after ? *after : *before;
    if (model::IsBorrower(w) || Lends(pools_.Get(w.metadata.ns, w.spec.pool).get())) q.Add(key);
  });
  pools_.OnChange([&q, key](const model::GpuPool* before, const model::GpuPool* after) {
    for (const model::GpuPool* p : {before, after}) {
      if (p != nullptr && (p->spec.lending || p->spec.start_time)) q.Add(key);
    }
  });
  // A budget raised (or overruns allowed) lets a project's waiting borrowers borrow again.
  projects_.OnChange([&q, key](const model::Project* before, const model::Project* after) {
    if (before != nullptr && after != nullptr && before->spec.budget != after->spec.budget) q.Add(key);
  });
}

LendingStats LendingController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

absl::StatusOr<runtime::Result> LendingController::Reconcile(const std::string&) {
  if (workloads_.ByIndex(std::string(kPendingBorrowers), kAll).empty()) return runtime::Result::Done();
  const Time now = manager_.clock().Now();
  std::optional<Time> next;
  LendingStats delta;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    next.reset();
    delta = {};
    // The lending pools and every workload of the namespaces in play, read afresh.
    std::vector<model::GpuPool> pools;
    std::set<std::string> namespaces;
    for (const auto& cached : pools_.ByIndex(std::string(kLendingPools), kAll)) {
      ASSIGN_OR_RETURN(std::optional<model::GpuPool> p,
                       store::GetObject<model::GpuPool>(tx, cached->metadata.ns, cached->metadata.name));
      if (p && Lends(&*p)) {
        namespaces.insert(p->metadata.ns);
        pools.push_back(std::move(*p));
      }
    }
    for (const auto& b : workloads_.ByIndex(std::string(kPendingBorrowers), kAll)) namespaces.insert(b->metadata.ns);
    for (const model::GpuPool& p : pools) {
      for (const auto& b : workloads_.ByIndex(std::string(kBorrowersOf), runtime::ObjectKey(p.metadata.ns, p.metadata.name))) {
        namespaces.insert(b->metadata.ns);
      }
    }
    std::map<std::string, std::vector<Workload>> in_ns;
    for (const std::string& ns : namespaces) {
      ASSIGN_OR_RETURN(in_ns[ns], store::ListObjects<Workload>(tx, ns));
    }
    auto model_of = [&](const std::string& gpu_uuid) -> std::string {
      const std::shared_ptr<const model::GpuCapacity> g = gpus_.Get("", ToLower(gpu_uuid));
      return g ? g->spec.model : "";
    };

    std::vector<allocator::LenderView> views(pools.size());
    std::vector<std::vector<allocator::LendableDevice>> lendable(pools.size());
    for (size_t i = 0; i < pools.size(); ++i) {
      const model::GpuPool& p = pools[i];
      allocator::LenderView& v = views[i];
      v.pool = &p;
      if (const model::Condition* c = model::FindCondition(p.status.conditions, model::kReady)) {
        v.ready_since = c->last_transition_time;
      }
      for (const model::AllocatedDevice& d : p.status.allocation) v.model_of_gpu[d.gpu_uuid] = model_of(d.gpu_uuid);
      const std::string key = runtime::ObjectKey(p.metadata.ns, p.metadata.name);
      for (const auto& run : profiles_.ByIndex(std::string(kRunsOfPool), key)) {
        // A run the informer still shows open may have just ended: it counts as used now.
        const Time last = run->spec.end.value_or(now);
        for (const model::WorkloadDevice& d : run->spec.devices) {
          Time& t = v.last_used[allocator::LendKey(d)];
          t = std::max(t, last);
        }
      }
      for (const Workload& w : in_ns[p.metadata.ns]) {
        if (w.spec.pool == p.metadata.name &&
            (w.status.phase == WorkloadPhase::kPending || w.status.phase == WorkloadPhase::kRunning)) {
          v.owner.push_back(&w);
        }
      }
      for (const auto& [ns, ws] : in_ns) {
        for (const Workload& w : ws) {
          if (model::IsBorrower(w) && w.status.phase == WorkloadPhase::kRunning && w.status.borrowed_from &&
              w.status.borrowed_from->project == p.metadata.ns && w.status.borrowed_from->pool == p.metadata.name) {
            v.borrowers.push_back(&w);
          }
        }
      }
      lendable[i] = allocator::Lendable(v, now, &next);
    }

    // The borrowers, and what their projects hold and borrowed lately.
    std::vector<Workload*> borrowers;
    std::vector<const Workload*> view;
    allocator::BorrowingState state;
    for (auto& [ns, ws] : in_ns) {
      for (Workload& w : ws) {
        if (!model::IsBorrower(w)) continue;
        if (w.status.phase == WorkloadPhase::kPending) {
          borrowers.push_back(&w);
          view.push_back(&w);
        } else if (w.status.phase == WorkloadPhase::kRunning) {
          for (const model::WorkloadDevice& d : w.status.devices) ++state.held[ns][model_of(d.gpu_uuid)];
        }
      }
    }
    // A project whose money budget is spent (its pools and its loans this month) borrows no
    // more: its borrowers wait, saying so.
    std::map<std::string, std::string> over_budget;  // project -> why
    std::optional<billing::PriceBook> prices;
    for (const Workload* b : view) {
      const std::string& project = b->metadata.ns;
      if (state.limits.contains(project) || state.recent_gpu_seconds.contains(project)) continue;
      ASSIGN_OR_RETURN(std::optional<model::Project> pr, store::GetObject<model::Project>(tx, "", project));
      if (pr && pr->spec.budget && !pr->spec.budget->allow_overrun && pr->spec.budget->amount_micros > 0) {
        if (!prices) {
          ASSIGN_OR_RETURN(std::vector<model::RateCard> cards, store::ListObjects<model::RateCard>(tx));
          prices.emplace(std::move(cards));
        }
        ASSIGN_OR_RETURN(std::vector<model::UsageRecord> records, store::ListObjects<model::UsageRecord>(tx, project));
        std::vector<model::Loan> borrowed;
        for (const auto& l : loans_.ByIndex(std::string(kLoansOf), project)) borrowed.push_back(*l);
        if (absl::Status s = billing::CheckBorrowing(*pr, records, borrowed, *prices, now); !s.ok()) {
          over_budget[project] = std::string(s.message());
        }
      }
      state.limits[project] = pr && pr->spec.quota ? pr->spec.quota->borrowing : std::map<std::string, int64_t>{};
      double seconds = 0;
      for (const auto& l : loans_.ByIndex(std::string(kLoansOf), project)) {
        seconds += Overlap(l->spec.start, l->spec.end.value_or(now), now - allocator::kFairnessWindow, now) *
                   static_cast<double>(l->spec.devices.size()) * catalog::GpuShare(l->spec.model, l->spec.profile);
      }
      state.recent_gpu_seconds[project] = seconds;
    }

    if (!over_budget.empty()) {
      std::vector<const Workload*> within;
      for (size_t i = 0; i < view.size(); ++i) {
        auto why = over_budget.find(view[i]->metadata.ns);
        if (why == over_budget.end()) {
          within.push_back(view[i]);
          continue;
        }
        Workload& w = *borrowers[i];
        if (w.status.reason != "BudgetExceeded" || w.status.message != why->second) {
          w.status.reason = "BudgetExceeded";
          w.status.message = why->second;
          RETURN_IF_ERROR(store::UpdateObject(tx, w));
          ++delta.waits;
        }
      }
      // Lend decides over the others; its answers name them by their place among those.
      std::vector<Workload*> kept;
      for (Workload* w : borrowers) {
        if (!over_budget.contains(w->metadata.ns)) kept.push_back(w);
      }
      borrowers = std::move(kept);
      view = std::move(within);
    }
    const allocator::LendingDecision d = allocator::Lend(views, lendable, view, state);
    for (const allocator::Borrowing& loan : d.loans) {
      Workload& w = *borrowers[loan.borrower];
      const model::GpuPool& lender = pools[loan.lender];
      model::Profile prof;
      prof.metadata.name = fmt::format("{}-{}", w.metadata.name, tx.revision());
      prof.metadata.ns = w.metadata.ns;
      prof.spec = {w.metadata.name, runtime::ObjectKey(lender.metadata.ns, lender.metadata.name), w.metadata.ns,
                   loan.devices, now, std::nullopt};
      RETURN_IF_ERROR(store::CreateObject(tx, prof, now));
      model::Loan receipt;
      receipt.metadata.name = fmt::format("{}.{}", w.metadata.ns, prof.metadata.name);
      receipt.spec = {w.metadata.ns, w.metadata.name, lender.metadata.ns, lender.metadata.name, loan.model,
                      loan.profile,  loan.devices,    now,                std::nullopt,         ""};
      if (model::PoolBeforeStart(lender, now)) receipt.spec.credit_from = lender.spec.start_time;
      RETURN_IF_ERROR(store::CreateObject(tx, receipt, now));
      w.status.phase = WorkloadPhase::kRunning;
      w.status.reason = "Borrowed";
      w.status.message = fmt::format(
          "running on {} lent {} device(s) of pool {} of project {}; taken back on {} s notice when that pool needs them",
          loan.devices.size(), loan.profile, lender.metadata.name, lender.metadata.ns,
          lender.spec.lending ? lender.spec.lending->reclaim_grace_seconds : allocator::kDefaultReclaimGraceSeconds);
      w.status.devices = loan.devices;
      w.status.start_time = now;
      w.status.profile = prof.metadata.name;
      w.status.borrowed_from = Workload::Lender{lender.metadata.ns, lender.metadata.name};
      w.status.reclaim_deadline.reset();
      RETURN_IF_ERROR(store::UpdateObject(tx, w));
      ++delta.loans;
    }
    for (const allocator::BorrowerWait& wait : d.waits) {
      Workload& w = *borrowers[wait.borrower];
      // A reclaimed borrower keeps saying so while it waits.
      if (w.status.reason == "Reclaimed" || (w.status.reason == "Queued" && w.status.message == wait.message)) continue;
      w.status.reason = "Queued";
      w.status.message = wait.message;
      RETURN_IF_ERROR(store::UpdateObject(tx, w));
      ++delta.waits;
    }
    return absl::OkStatus();
  }));
  if (delta.loans > 0) manager_.AwaitRevision(store_.Revision());  // see our own loans next time
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.loans += delta.loans;
    stats_.waits += delta.waits;
  }
  if (next) return runtime::Result::After(std::max<Duration>(*next - now, std::chrono::milliseconds(1)));
  return runtime::Result::Done();
}

}  // namespace gpuaas::controller
