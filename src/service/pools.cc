#include "service/pools.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <set>

#include "billing/billing.h"
#include "billing/codec.h"
#include "catalog/catalog.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/fleet.h"
#include "nlohmann/json.hpp"
#include "store/objects.h"

namespace gpuaas::service {
namespace {

using model::Condition;
using model::ConditionStatus;
using model::GpuPool;

std::string PoolRef(const GpuPool& p) {
  return fmt::format("gpupools/{}/{}", p.metadata.ns, p.metadata.name);
}

// Whole GPUs and MIG compute slices a set of items asks for, by model.
void AddDemand(const std::vector<model::PoolItem>& items, std::map<std::string, int64_t>& full,
               std::map<std::string, int64_t>& slices) {
  for (const model::PoolItem& i : items) {
    const catalog::GpuModel* m = catalog::FindModel(i.model);
    if (m == nullptr) continue;
    const std::string name(m->name);
    if (i.profile == catalog::kFullProfile) {
      full[name] += i.count;
    } else if (const catalog::MigProfile* p = catalog::FindProfile(*m, i.profile)) {
      slices[name] += i.count * p->compute_slices;
    }
  }
}

// The project's budget against its pools' cost to the month's end with `items` added now (and
// what its loans came to so far).
absl::Status CheckBudgetIn(store::Txn& tx, const model::Project& project, const std::vector<model::PoolItem>& items,
                           Time now) {
  if (!project.spec.budget || project.spec.budget->allow_overrun) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<model::UsageRecord> records,
                   store::ListObjects<model::UsageRecord>(tx, project.metadata.name));
  ASSIGN_OR_RETURN(std::vector<model::RateCard> cards, store::ListObjects<model::RateCard>(tx));
  ASSIGN_OR_RETURN(std::vector<model::Loan> loans, store::ListObjects<model::Loan>(tx));
  return billing::CheckBudget(project, records, items, billing::PriceBook(std::move(cards)), now, loans);
}

}  // namespace

absl::Status PoolService::Record(store::Txn& tx, const std::string& user, std::string action,
                                 std::string object, std::string detail) {
  return RecordAudit(tx, clock_.Now(), user, std::move(action), std::move(object), std::move(detail));
}

PoolService::PoolService(store::Store& store, const Clock& clock, FleetCounter fleet)
    : store_(store),
      clock_(clock),
      fleet_(fleet),
      dry_store_(std::make_unique<store::DryRunStore>(store)),
      dry_run_(new PoolService(*dry_store_, clock, std::move(fleet), DryRunTag{})) {}

PoolService::PoolService(store::Store& store, const Clock& clock, FleetCounter fleet, DryRunTag)
    : store_(store), clock_(clock), fleet_(std::move(fleet)) {}

absl::Status RecordAudit(store::Txn& tx, Time now, const std::string& user, std::string action, std::string object,
                         std::string detail) {
  nlohmann::json j = {{"apiVersion", "gpuaas.io/v1"},
                      {"kind", kAuditKind},
                      {"time", FormatTime(now)},
                      {"user", user},
                      {"action", std::move(action)},
                      {"object", std::move(object)},
                      {"detail", std::move(detail)}};
  // Named by revision, then a process-wide counter for events of the same transaction, so that
  // names sort in log order.
  static std::atomic<uint64_t> seq{0};
  const std::string name = fmt::format("{:016}-{:06}", tx.revision(), seq++ % 1000000);
  j["metadata"] = {{"name", name}};
  return tx.Put({std::string(kAuditKind), "", name}, "", j.dump(), store::kMustNotExist);
}

absl::StatusOr<model::Project> PoolService::CreateProject(model::Project p, const std::string& user) {
  p.metadata.ns.clear();
  p.status = {};
  RETURN_IF_ERROR(model::ValidateProject(p));
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    absl::Status s = store::CreateObject(tx, p, clock_.Now());
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(fmt::format("projects \"{}\" already exists", p.metadata.name));
    }
    RETURN_IF_ERROR(s);
    return Record(tx, user, "CreateProject", "projects/" + p.metadata.name, p.spec.display_name);
  }));
  return p;
}

absl::Status PoolService::CheckPoolRequest(GpuPool& pool) const {
  RETURN_IF_ERROR(model::ValidatePool(pool));
  // Normalise model names to the catalogue's spelling.
  for (model::PoolItem& i : pool.spec.items) i.model = std::string(catalog::FindModel(i.model)->name);

  // More than the whole fleet could ever hold is refused now rather than waiting forever.
  const std::map<std::string, int64_t> fleet = fleet_();
  for (const model::PoolItem& i : pool.spec.items) {
    const catalog::GpuModel* m = catalog::FindModel(i.model);
    auto it = fleet.find(i.model);
    const int64_t gpus = it == fleet.end() ? 0 : it->second;
    const int64_t per_gpu = i.profile == catalog::kFullProfile ? 1 : catalog::FindProfile(*m, i.profile)->max_count;
    if (i.count > gpus * per_gpu) {
      return absl::ResourceExhaustedError(fmt::format(
          "{} x {}/{} is more than the whole fleet could ever hold: it has {} {} GPU(s), room for {}",
          i.count, i.model, i.profile, gpus, i.model, gpus * per_gpu));
    }
  }
  return absl::OkStatus();
}

absl::Status PoolService::CheckPoolInProject(store::Txn& tx, const GpuPool& pool) const {
  ASSIGN_OR_RETURN(std::optional<model::Project> project, store::GetObject<model::Project>(tx, "", pool.metadata.ns));
  if (!project) {
    return absl::NotFoundError(fmt::format("projects \"{}\" not found", pool.metadata.ns));
  }
  if (project->spec.quota) {
    // What the project's other live pools ask for (a pool being edited counts once, as edited).
    std::map<std::string, int64_t> full, slices;
    ASSIGN_OR_RETURN(std::vector<GpuPool> pools, store::ListObjects<GpuPool>(tx, pool.metadata.ns));
    for (const GpuPool& other : pools) {
      if (model::PoolIsLive(other) && other.metadata.name != pool.metadata.name) {
        AddDemand(other.spec.items, full, slices);
      }
    }
    std::map<std::string, int64_t> want_full, want_slices;
    AddDemand(pool.spec.items, want_full, want_slices);
    auto check = [&](const std::map<std::string, int64_t>& want, const std::map<std::string, int64_t>& have,
                     const std::map<std::string, int64_t>& quota, std::string_view what) -> absl::Status {
      for (const auto& [model, n] : want) {
        auto q = quota.find(model);
        if (q == quota.end()) continue;  // no limit set for this model
        const int64_t used = have.count(model) ? have.at(model) : 0;
        if (used + n > q->second) {
          return absl::ResourceExhaustedError(fmt::format(
              "project {} quota exceeded: {} {} of {} asked, {} in use by its pools, quota {}",
              pool.metadata.ns, n, what, model, used, q->second));
        }
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(check(want_full, full, project->spec.quota->full_gpus, "full GPUs"));
    RETURN_IF_ERROR(check(want_slices, slices, project->spec.quota->mig_compute_slices, "MIG compute slices"));
  }
  return CheckBudgetIn(tx, *project, pool.spec.items, clock_.Now());
}

absl::Status PoolService::CheckReservation(store::Txn& tx, const GpuPool& pool) const {
  const Time now = clock_.Now();
  if (pool.spec.start_time && *pool.spec.start_time < now - std::chrono::minutes(1)) {
    return absl::InvalidArgumentError(fmt::format("spec.startTime: {} has passed (it is {}); leave it out to start at "
                                                  "the approval", FormatTime(*pool.spec.start_time), FormatTime(now)));
  }
  if (pool.spec.end_time && *pool.spec.end_time <= now) {
    return absl::InvalidArgumentError(
        fmt::format("spec.endTime: {} has passed (it is {})", FormatTime(*pool.spec.end_time), FormatTime(now)));
  }
  // The window is held from the approval (its devices are lent until the start), so it can be
  // held only if the fleet has the room now: whole GPUs no live pool holds a device of, and MIG
  // compute slices on the GPUs no pool holds whole.
  const std::map<std::string, int64_t> fleet = fleet_();
  ASSIGN_OR_RETURN(std::vector<GpuPool> pools, store::ListObjects<GpuPool>(tx));
  std::map<std::string, std::set<std::string>> touched;  // model -> GPUs with a device of a live pool
  std::map<std::string, std::set<std::string>> whole;    // model -> GPUs a live pool holds whole
  std::map<std::string, int64_t> slices;                  // model -> MIG compute slices held
  for (const GpuPool& other : pools) {
    if (!model::PoolIsLive(other)) continue;
    for (const model::AllocatedDevice& d : other.status.allocation) {
      ASSIGN_OR_RETURN(std::optional<model::GpuCapacity> g, store::GetObject<model::GpuCapacity>(tx, "", ToLower(d.gpu_uuid)));
      if (!g) continue;
      touched[g->spec.model].insert(d.gpu_uuid);
      if (d.profile == catalog::kFullProfile) whole[g->spec.model].insert(d.gpu_uuid);
      const catalog::GpuModel* m = catalog::FindModel(g->spec.model);
      const catalog::MigProfile* mp = m == nullptr ? nullptr : catalog::FindProfile(*m, d.profile);
      slices[g->spec.model] += d.profile == catalog::kFullProfile || mp == nullptr ? 0 : mp->compute_slices;
    }
  }
  for (const model::PoolItem& i : pool.spec.items) {
    const catalog::GpuModel* m = catalog::FindModel(i.model);
    auto it = fleet.find(i.model);
    const int64_t gpus = it == fleet.end() ? 0 : it->second;
    const int64_t untouched = gpus - static_cast<int64_t>(touched[i.model].size());
    const bool full = i.profile == catalog::kFullProfile;
    const int64_t free = full ? untouched
                              : (gpus - static_cast<int64_t>(whole[i.model].size())) * m->compute_slices - slices[i.model];
    const int64_t want = full ? i.count : i.count * catalog::FindProfile(*m, i.profile)->compute_slices;
    if (want > free) {
      return absl::ResourceExhaustedError(fmt::format(
          "the reservation cannot be held: {} x {}/{} needs {} {} and the fleet has {} free now (a reservation holds "
          "its devices from its approval, lent until its start)",
          i.count, i.model, i.profile, want, full ? "whole GPU(s)" : "MIG compute slice(s)", free));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GpuPool> PoolService::CreatePool(GpuPool pool, const std::string& user) {
  pool.status = {};
  RETURN_IF_ERROR(CheckPoolRequest(pool));
  pool.status.conditions = {{std::string(model::kApproved), ConditionStatus::kUnknown,
                             "AwaitingApproval", "an operator must approve or reject the pool",
                             clock_.Now(), 1}};
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    RETURN_IF_ERROR(CheckPoolInProject(tx, pool));
    if (pool.spec.start_time || pool.spec.end_time) RETURN_IF_ERROR(CheckReservation(tx, pool));
    absl::Status s = store::CreateObject(tx, pool, clock_.Now());
    if (absl::IsAlreadyExists(s)) {
      // What the caller can do about it depends on the pool that has the name.
      ASSIGN_OR_RETURN(std::optional<GpuPool> other, store::GetObject<GpuPool>(tx, pool.metadata.ns, pool.metadata.name));
      std::string next = "choose another name";
      if (other && !model::PoolIsLive(*other)) {
        next = fmt::format("it is {}: delete it to use its name again (gpuaas pool delete {} -p {})",
                           other->status.approval && !other->status.approval->approved ? "rejected" : "released",
                           pool.metadata.name, pool.metadata.ns);
      } else if (other && model::PoolReleaseRequested(*other)) {
        next = fmt::format("it is being released: once it is, delete it to use its name again (gpuaas pool delete {} -p {})",
                           pool.metadata.name, pool.metadata.ns);
      }
      return absl::AlreadyExistsError(fmt::format("gpupools \"{}\" already exists in project {}; {}",
                                                  pool.metadata.name, pool.metadata.ns, next));
    }
    RETURN_IF_ERROR(s);
    std::string items;
    for (const model::PoolItem& i : pool.spec.items) {
      items += fmt::format("{}{} x {}/{}", items.empty() ? "" : ", ", i.count, i.model, i.profile);
    }
    return Record(tx, user, "CreatePool", PoolRef(pool), items);
  }));
  return pool;
}

absl::StatusOr<GpuPool> PoolService::Approve(const std::string& ns, const std::string& name,
                                             bool approve, const std::string& reason,
                                             const std::string& user) {
  GpuPool pool;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, ns, name));
    if (!cur) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found in project {}", name, ns));
    if (cur->status.approval) {
      // Advice that fits the state the pool is in.
      std::string next;
      if (!cur->status.approval->approved) {
        next = fmt::format("a rejection is final: ask for a new pool (or delete this one to use its name again: "
                           "gpuaas pool delete {} -p {})", name, ns);
      } else if (model::PoolReleaseRequested(*cur)) {
        next = !model::PoolIsLive(*cur)
                   ? fmt::format("it has been released: ask for a new pool (or delete this one to use its name again: "
                                 "gpuaas pool delete {} -p {})", name, ns)
                   : "it is being released";
      } else {
        next = fmt::format("it is in force; to end it, release it: gpuaas pool release {} -p {}", name, ns);
      }
      return absl::FailedPreconditionError(fmt::format("gpupools \"{}\" was already {} by {}; {}", name,
                                                       cur->status.approval->approved ? "approved" : "rejected",
                                                       cur->status.approval->user, next));
    }
    const Time now = clock_.Now();
    if (approve) {
      // The pool controller opens the meter (from this approval) and bills each device from its
      // allocation, so a pool that waits for capacity pays nothing for what it has not got.
      ASSIGN_OR_RETURN(std::optional<model::Project> project, store::GetObject<model::Project>(tx, "", ns));
      if (project) RETURN_IF_ERROR(CheckBudgetIn(tx, *project, cur->spec.items, now));
    }
    cur->status.approval = GpuPool::Approval{approve, reason, user, now};
    model::SetCondition(cur->status.conditions,
                        {std::string(model::kApproved),
                         approve ? ConditionStatus::kTrue : ConditionStatus::kFalse,
                         approve ? "Approved" : "Rejected",
                         reason.empty() ? (approve ? "approved" : "rejected") : reason, now,
                         cur->metadata.generation});
    RETURN_IF_ERROR(store::UpdateObject(tx, *cur));
    pool = *cur;
    return Record(tx, user, approve ? "Approve" : "Reject", PoolRef(*cur), reason);
  }));
  return pool;
}

absl::Status PoolService::RequestRelease(store::Txn& tx, GpuPool& pool, const std::string& user) {
  // The request is the pool's spec; the pool controller ends its runs, frees its devices and
  // ends its billing at this time.
  pool.spec.release_requested = GpuPool::Spec::ReleaseRequest{user, std::chrono::floor<std::chrono::seconds>(clock_.Now())};
  return store::UpdateObject(tx, pool);
}

absl::StatusOr<GpuPool> PoolService::Release(const std::string& ns, const std::string& name,
                                             const std::string& user) {
  GpuPool pool;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, ns, name));
    if (!cur) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found in project {}", name, ns));
    if (!cur->status.approval) {
      return absl::FailedPreconditionError(fmt::format(
          "gpupools \"{}\" is not approved yet, so it holds nothing to release; to withdraw the request, delete "
          "it: gpuaas pool delete {} -p {}", name, name, ns));
    }
    if (!cur->status.approval->approved) {
      return absl::FailedPreconditionError(fmt::format(
          "gpupools \"{}\" was rejected and holds nothing to release; delete it to use its name again: "
          "gpuaas pool delete {} -p {}", name, name, ns));
    }
    if (const std::optional<GpuPool::Spec::ReleaseRequest>& asked = cur->spec.release_requested) {
      return absl::FailedPreconditionError(
          model::PoolIsLive(*cur)
              ? fmt::format("gpupools \"{}\" is already being released (asked{} at {})", name,
                            asked->user.empty() ? "" : " by " + asked->user, FormatTime(asked->time))
              : fmt::format("gpupools \"{}\" is already released; delete it to use its name again: "
                            "gpuaas pool delete {} -p {}", name, name, ns));
    }
    RETURN_IF_ERROR(RequestRelease(tx, *cur, user));
    pool = *cur;
    return Record(tx, user, "Release", PoolRef(*cur), "");
  }));
  return pool;
}

absl::StatusOr<GpuPool> PoolService::DeletePool(const std::string& ns, const std::string& name,
                                                const std::string& user) {
  GpuPool pool;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, ns, name));
    if (!cur) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found in project {}", name, ns));
    std::string action = "DeletePool";
    if (!cur->status.approval) {
      action = "WithdrawPool";
    } else if (model::PoolIsLive(*cur)) {
      // In force or being released: released as a release is (billing ends now), and kept until
      // the pool controller has freed its devices; it then removes the pool.
      if (cur->metadata.deletion_timestamp) {
        pool = *cur;  // asked before: nothing more to do
        return absl::OkStatus();
      }
      const bool asked = model::PoolReleaseRequested(*cur);
      cur->metadata.deletion_timestamp = std::chrono::floor<std::chrono::seconds>(clock_.Now());
      cur->metadata.finalizers.emplace_back(model::kReleaseFinalizer);
      if (asked) {
        RETURN_IF_ERROR(store::UpdateObject(tx, *cur));
      } else {
        RETURN_IF_ERROR(RequestRelease(tx, *cur, user));
      }
      pool = *cur;
      return Record(tx, user, "DeletePool", PoolRef(*cur),
                    asked ? "kept until its release is done" : "released; kept until its release is done");
    }
    // Released or rejected: its meter stays (its months are billed from it); the pool controller
    // renames it model::RetiredMeterName, so that the name can be used again.
    RETURN_IF_ERROR(store::DeleteObject<GpuPool>(tx, ns, name));
    pool = *cur;
    pool.metadata.resource_version = tx.revision();  // the deletion's: a reader waits for it
    return Record(tx, user, action, PoolRef(*cur), "");
  }));
  return pool;
}

absl::StatusOr<model::RateCard> PoolService::CreateRateCard(model::RateCard card, const std::string& user) {
  card.metadata.ns.clear();
  card.status = {};
  RETURN_IF_ERROR(model::ValidateRateCard(card));
  for (model::RateCard::Price& p : card.spec.prices) p.model = std::string(catalog::FindModel(p.model)->name);
  card.spec.effective_from = std::chrono::floor<std::chrono::seconds>(card.spec.effective_from);
  const Time now = clock_.Now();
  const billing::Period month = billing::MonthOf(now);
  if (card.spec.effective_from < month.start) {
    return absl::InvalidArgumentError(fmt::format(
        "spec.effectiveFrom: {} is in a closed billing period; a card may take effect from {} (the start of {}) on",
        FormatTime(card.spec.effective_from), FormatTime(month.start), month.Name()));
  }
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::RateCard> cards, store::ListObjects<model::RateCard>(tx));
    for (const model::RateCard& other : cards) {
      if (other.spec.currency != card.spec.currency) {
        return absl::InvalidArgumentError(fmt::format(
            "spec.currency: {} differs from rate card {} ({}); every card prices in one currency",
            card.spec.currency, other.metadata.name, other.spec.currency));
      }
    }
    absl::Status s = store::CreateObject(tx, card, now);
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(fmt::format(
          "ratecards \"{}\" already exists; cards are not edited: create another with a later effectiveFrom",
          card.metadata.name));
    }
    RETURN_IF_ERROR(s);
    return Record(tx, user, "CreateRateCard", "ratecards/" + card.metadata.name,
                  fmt::format("{} from {}", card.spec.currency, FormatTime(card.spec.effective_from)));
  }));
  return card;
}

absl::StatusOr<model::CreditNote> PoolService::IssueCreditNote(const std::string& project, const std::string& period,
                                                              int64_t amount_micros, const std::string& reason,
                                                              const std::string& user) {
  ASSIGN_OR_RETURN(const billing::Period month, billing::ParsePeriod(period));
  if (amount_micros <= 0) return absl::InvalidArgumentError("amountMicros: must be positive");
  if (reason.empty() || reason.size() > 1024 || !IsValidUtf8(reason)) {
    return absl::InvalidArgumentError("reason: required, at most 1024 bytes of UTF-8");
  }
  model::CreditNote note;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    // Read in the transaction: the note is dated in the month it commits in (after a month's
    // invoice is kept, that is the next one).
    const Time now = clock_.Now();
    if (month.end > now) {
      return absl::FailedPreconditionError(fmt::format(
          "{} has not closed: its invoice is a draft and follows the meters; a credit note corrects a final invoice",
          period));
    }
    ASSIGN_OR_RETURN(std::optional<model::Project> p, store::GetObject<model::Project>(tx, "", project));
    if (!p) return absl::NotFoundError(fmt::format("projects \"{}\" not found", project));
    // What the month billed for its own usage (less fault credits; not the notes it carries
    // for other months): its kept invoice, else rated from the meters (the same figures).
    billing::Invoice inv;
    ASSIGN_OR_RETURN(std::optional<store::Record> kept, tx.Get({std::string(model::kInvoiceKind), project, period}));
    if (kept) {
      ASSIGN_OR_RETURN(inv, billing::DecodeInvoice(kept->data));
    } else {
      ASSIGN_OR_RETURN(std::vector<model::UsageRecord> records, store::ListObjects<model::UsageRecord>(tx, project));
      ASSIGN_OR_RETURN(std::vector<model::RateCard> cards, store::ListObjects<model::RateCard>(tx));
      inv = billing::Rate(project, records, billing::PriceBook(std::move(cards)), month, now);
    }
    billing::Micros billed = 0;
    for (const billing::Line& l : inv.lines) {
      if (l.corrects.empty()) billed = billing::AddMicros(billed, l.amount_micros);
    }
    ASSIGN_OR_RETURN(std::vector<model::CreditNote> notes, store::ListObjects<model::CreditNote>(tx, project));
    billing::Micros credited = 0;
    int64_t n = 0;
    for (const model::CreditNote& other : notes) {
      if (other.spec.period != period) continue;
      credited = billing::AddMicros(credited, other.spec.amount_micros);
      ++n;
    }
    if (static_cast<__int128>(amount_micros) > static_cast<__int128>(billed) - credited) {
      return absl::InvalidArgumentError(fmt::format(
          "amountMicros: {} is more than is left to credit for {}: billed {}, credited {} before",
          amount_micros, period, billed, credited));
    }
    note.metadata.ns = project;
    note.metadata.name = fmt::format("{}-{}", period, n + 1);
    note.spec = {period, amount_micros, reason, std::chrono::floor<std::chrono::seconds>(now), user};
    RETURN_IF_ERROR(store::CreateObject(tx, note, now));
    return Record(tx, user, "IssueCreditNote", fmt::format("creditnotes/{}/{}", project, note.metadata.name),
                  fmt::format("{} micro-units for {}: {}", amount_micros, period, reason));
  }));
  return note;
}

absl::StatusOr<model::Project> PoolService::SetBudget(const std::string& name,
                                                      std::optional<model::Project::Budget> budget,
                                                      const std::string& user) {
  model::Project project;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::Project> cur, store::GetObject<model::Project>(tx, "", name));
    if (!cur) return absl::NotFoundError(fmt::format("projects \"{}\" not found", name));
    cur->spec.budget = budget;
    RETURN_IF_ERROR(model::ValidateProject(*cur));
    RETURN_IF_ERROR(store::UpdateObject(tx, *cur));
    project = *cur;
    return Record(tx, user, "SetBudget", "projects/" + name,
                  budget ? fmt::format("{} micro-units, {} GPU-hours a month{}", budget->amount_micros,
                                       budget->gpu_hours, budget->allow_overrun ? ", overruns allowed" : "")
                         : "removed");
  }));
  return project;
}

absl::StatusOr<model::Workload> PoolService::CreateWorkload(model::Workload w, const std::string& user) {
  w.status = {};  // Pending: the workload controller says why it waits, or admits it
  RETURN_IF_ERROR(model::ValidateWorkload(w));
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    if (model::IsBorrower(w)) {
      // A borrower waits for lent devices (controller/lending.h): its project must exist, and its
      // profile must be one that its model (or some model) has.
      ASSIGN_OR_RETURN(std::optional<model::Project> project, store::GetObject<model::Project>(tx, "", w.metadata.ns));
      if (!project) return absl::NotFoundError(fmt::format("projects \"{}\" not found", w.metadata.ns));
      const std::string profile = model::ProfileOfResource(w.spec.resource);
      if (profile != catalog::kFullProfile) {
        bool known = false;
        for (const catalog::GpuModel& m : catalog::AllModels()) {
          if (!w.spec.model.empty() && catalog::FindModel(w.spec.model) != &m) continue;
          known = known || catalog::FindProfile(m, profile) != nullptr;
        }
        if (!known) {
          return absl::InvalidArgumentError(fmt::format("spec.resources: no {} has a MIG profile {}",
                                                        w.spec.model.empty() ? "GPU model" : w.spec.model, profile));
        }
      }
      absl::Status s = store::CreateObject(tx, w, clock_.Now());
      if (absl::IsAlreadyExists(s)) {
        return absl::AlreadyExistsError(fmt::format("workloads \"{}\" already exists", w.metadata.name));
      }
      RETURN_IF_ERROR(s);
      return Record(tx, user, "CreateWorkload", fmt::format("workloads/{}/{}", w.metadata.ns, w.metadata.name),
                    fmt::format("{} x {}, preemptible, on lent devices", w.spec.count, w.spec.resource));
    }
    ASSIGN_OR_RETURN(std::optional<GpuPool> pool, store::GetObject<GpuPool>(tx, w.metadata.ns, w.spec.pool));
    if (!pool) {
      return absl::NotFoundError(fmt::format("gpupools \"{}\" not found in project {}", w.spec.pool, w.metadata.ns));
    }
    if (!model::PoolIsLive(*pool)) {
      return absl::FailedPreconditionError(fmt::format("gpupools \"{}\" is rejected or released", w.spec.pool));
    }
    const std::string profile = model::ProfileOfResource(w.spec.resource);
    int64_t devices = 0;  // of the profile, in the pool (a workload takes distinct devices)
    for (const model::PoolItem& i : pool->spec.items) devices += i.profile == profile ? i.count : 0;
    if (devices == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "spec.resources: pool {} has no {} devices", w.spec.pool, profile));
    }
    if (w.spec.count > devices) {
      return absl::InvalidArgumentError(fmt::format(
          "spec.resources: {} x {} can never run on pool {}: it has {} {} device(s) (time slicing shares a device "
          "between workloads, not within one); ask for at most {}, or for a larger pool",
          w.spec.count, w.spec.resource, w.spec.pool, devices, profile, devices));
    }
    absl::Status s = store::CreateObject(tx, w, clock_.Now());
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(fmt::format("workloads \"{}\" already exists", w.metadata.name));
    }
    RETURN_IF_ERROR(s);
    return Record(tx, user, "CreateWorkload", fmt::format("workloads/{}/{}", w.metadata.ns, w.metadata.name),
                  fmt::format("{} x {} on pool {}", w.spec.count, w.spec.resource, w.spec.pool));
  }));
  return w;
}

absl::StatusOr<model::Workload> PoolService::DeleteWorkload(const std::string& ns, const std::string& name,
                                                            const std::string& user) {
  model::Workload w;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::Workload> cur, store::GetObject<model::Workload>(tx, ns, name));
    if (!cur) return absl::NotFoundError(fmt::format("workloads \"{}\" not found in project {}", name, ns));
    const bool ran = cur->status.phase == model::WorkloadPhase::kRunning;
    // A run's devices are free once the workload is gone; the workload controller closes its
    // Profile, which stays as the record of what ran where. A borrower's loan ends here, so that
    // not a second more is billed.
    if (ran && cur->status.borrowed_from && !cur->status.profile.empty()) {
      ASSIGN_OR_RETURN(std::optional<model::Loan> loan,
                       store::GetObject<model::Loan>(tx, "", fmt::format("{}.{}", ns, cur->status.profile)));
      if (loan && !loan->spec.end) {
        loan->spec.end = clock_.Now();
        loan->spec.end_reason = "Deleted";
        RETURN_IF_ERROR(store::UpdateObject(tx, *loan));
      }
    }
    RETURN_IF_ERROR(store::DeleteObject<model::Workload>(tx, ns, name));
    w = *cur;
    w.metadata.resource_version = tx.revision();  // the deletion's: a reader waits for it
    return Record(tx, user, "DeleteWorkload", fmt::format("workloads/{}/{}", ns, name), ran ? "" : "ended before");
  }));
  return w;
}

template <typename T>
absl::StatusOr<T> PoolService::Update(const std::string& ns, const std::string& name, Edit<T> edit,
                                      const std::string& user,
                                      absl::FunctionRef<absl::Status(store::Txn&, const T&, T&)> spec_rule) {
  const std::string ref = ns.empty() ? fmt::format("{}/{}", T::kPlural, name) : fmt::format("{}/{}/{}", T::kPlural, ns, name);
  T out;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<T> stored, store::GetObject<T>(tx, ns, name));
    if (!stored) {
      return absl::NotFoundError(ns.empty() ? fmt::format("{} \"{}\" not found", T::kPlural, name)
                                            : fmt::format("{} \"{}\" not found in project {}", T::kPlural, name, ns));
    }
    ASSIGN_OR_RETURN(T desired, edit(*stored));
    model::ObjectMeta& m = desired.metadata;
    if (m.name != name) {
      return absl::InvalidArgumentError(fmt::format("metadata.name: \"{}\" does not match the object's name \"{}\"", m.name, name));
    }
    if (!m.ns.empty() && m.ns != ns) {
      return absl::InvalidArgumentError(
          fmt::format("metadata.namespace: \"{}\" does not match the object's namespace \"{}\"", m.ns, ns));
    }
    if (!m.uid.empty() && m.uid != stored->metadata.uid) {
      return absl::AbortedError(fmt::format("Precondition failed: UID in precondition: {}, UID in object meta: {}",
                                            m.uid, stored->metadata.uid));
    }
    if (m.resource_version != 0 && m.resource_version != stored->metadata.resource_version) {
      return absl::AbortedError(fmt::format(
          "Operation cannot be fulfilled on {}.{} \"{}\": the object has been modified; please apply your changes to "
          "the latest version and try again",
          T::kPlural, model::kGroup, name));
    }
    RETURN_IF_ERROR(model::ValidateLabels(m.labels));
    RETURN_IF_ERROR(model::ValidateAnnotations(m.annotations));
    m.ns = ns;
    m.uid = stored->metadata.uid;
    m.resource_version = stored->metadata.resource_version;
    m.generation = stored->metadata.generation;
    m.creation_timestamp = stored->metadata.creation_timestamp;
    m.deletion_timestamp = stored->metadata.deletion_timestamp;
    m.finalizers = stored->metadata.finalizers;
    desired.status = stored->status;
    if (!(desired.spec == stored->spec)) RETURN_IF_ERROR(spec_rule(tx, *stored, desired));
    if (desired.metadata == stored->metadata && desired.spec == stored->spec) {
      out = *std::move(stored);  // nothing to write
      return absl::OkStatus();
    }
    std::vector<std::string> changed;
    if (desired.metadata.labels != stored->metadata.labels) changed.emplace_back("labels");
    if (desired.metadata.annotations != stored->metadata.annotations) changed.emplace_back("annotations");
    if (!(desired.spec == stored->spec)) changed.emplace_back("spec");
    RETURN_IF_ERROR(store::UpdateObject(tx, desired));
    out = desired;
    return Record(tx, user, fmt::format("Update{}", T::kKind), ref,
                  changed.empty() ? "field managers" : fmt::format("{}", fmt::join(changed, ", ")));
  }));
  return out;
}

namespace {
// The spec rule of kinds whose spec never changes after creation.
template <typename T>
absl::Status SpecIsFixed(std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("spec: a {}'s spec cannot change ({}); labels and annotations may",
                                                T::kKind, why));
}
}  // namespace

absl::StatusOr<model::Project> PoolService::UpdateProject(const std::string& name, Edit<model::Project> edit,
                                                          const std::string& user) {
  return Update<model::Project>("", name, edit, user, [](store::Txn&, const model::Project&, model::Project& p) {
    return model::ValidateProject(p);
  });
}

absl::StatusOr<GpuPool> PoolService::UpdatePool(const std::string& ns, const std::string& name, Edit<GpuPool> edit,
                                                const std::string& user) {
  return Update<GpuPool>(ns, name, edit, user, [&](store::Txn& tx, const GpuPool& stored, GpuPool& p) -> absl::Status {
    if (p.spec.release_requested != stored.spec.release_requested) {
      return absl::InvalidArgumentError(fmt::format(
          "spec.releaseRequested: set by a release, not written: release the pool (gpuaas pool release {} -p {}) "
          "or delete it", name, ns));
    }
    if (stored.status.approval) {
      // Lending is the one thing a decided pool may change: switched on, tuned, or off (its
      // borrowers are then taken back on the grace).
      GpuPool same = stored;
      same.spec.lending = p.spec.lending;
      if (p.spec == same.spec && stored.status.approval->approved) return model::ValidatePool(p);
      return absl::InvalidArgumentError(fmt::format(
          "spec: gpupools \"{}\" was {}, and a decided pool's spec cannot change but for spec.lending; ask for "
          "another pool{}", name,
          stored.status.approval->approved ? "approved" : "rejected",
          stored.status.approval->approved ? " and release this one" : ""));
    }
    RETURN_IF_ERROR(CheckPoolRequest(p));
    if (p.spec == stored.spec) return absl::OkStatus();  // the same, spelled otherwise
    if (p.spec.start_time || p.spec.end_time) RETURN_IF_ERROR(CheckReservation(tx, p));
    return CheckPoolInProject(tx, p);
  });
}

absl::StatusOr<model::Workload> PoolService::UpdateWorkload(const std::string& ns, const std::string& name,
                                                            Edit<model::Workload> edit, const std::string& user) {
  return Update<model::Workload>(ns, name, edit, user, [](store::Txn&, const model::Workload&, model::Workload&) {
    return SpecIsFixed<model::Workload>("delete the workload and create another");
  });
}

absl::StatusOr<model::RateCard> PoolService::UpdateRateCard(const std::string& name, Edit<model::RateCard> edit,
                                                            const std::string& user) {
  return Update<model::RateCard>("", name, edit, user, [](store::Txn&, const model::RateCard&, model::RateCard&) {
    return SpecIsFixed<model::RateCard>("cards are not edited: create another with a later effectiveFrom");
  });
}

absl::StatusOr<model::CreditNote> PoolService::UpdateCreditNote(const std::string& ns, const std::string& name,
                                                                Edit<model::CreditNote> edit, const std::string& user) {
  return Update<model::CreditNote>(ns, name, edit, user,
                                   [](store::Txn&, const model::CreditNote&, model::CreditNote&) {
                                     return SpecIsFixed<model::CreditNote>("a note is final: issue another");
                                   });
}

absl::StatusOr<std::vector<std::pair<int64_t, AuditEvent>>> PoolService::Audit(int64_t after, size_t limit) {
  // Events are named "<revision, 16 digits>-<sequence, 6 digits>": the page after `after` starts
  // after the last name that revision could have.
  ASSIGN_OR_RETURN(std::vector<store::Record> records,
                   store_.ListPage(kAuditKind, "", fmt::format("{:016}-999999", std::max<int64_t>(after, 0)),
                                   limit == 0 ? static_cast<size_t>(std::numeric_limits<int64_t>::max()) : limit));
  std::vector<std::pair<int64_t, AuditEvent>> out;
  for (const store::Record& r : records) {
    nlohmann::json j = nlohmann::json::parse(r.data, nullptr, false);
    if (!j.is_object()) continue;
    AuditEvent e;
    e.time = ParseTime(j.value("time", "")).value_or(Time{});
    e.user = j.value("user", "");
    e.action = j.value("action", "");
    e.object = j.value("object", "");
    e.detail = j.value("detail", "");
    out.emplace_back(r.resource_version, std::move(e));
  }
  return out;
}

}  // namespace gpuaas::service
