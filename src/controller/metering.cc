#include "controller/metering.h"

#include <map>
#include <set>

#include "billing/billing.h"
#include "billing/codec.h"
#include "common/log.h"
#include "common/status.h"
#include "fmt/format.h"
#include "model/billing.h"
#include "model/pool.h"
#include "store/objects.h"
#include "telemetry/assessment.h"

namespace gpuaas::controller {
namespace {

constexpr std::string_view kKey = "ledger";

int64_t UnixSeconds(Time t) { return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count(); }

}  // namespace

MeteringController::MeteringController(store::Store& store, telemetry::Hub& hub, runtime::Manager& manager,
                                       Duration period)
    : store_(store), hub_(hub), clock_(manager.clock()), period_(period) {
  manager.Add("metering", *this).Add(std::string(kKey));
}

absl::StatusOr<runtime::Result> MeteringController::Reconcile(const std::string&) {
  const billing::Period month = billing::MonthOf(clock_.Now());
  if (finalized_through_ < month.start) {
    RETURN_IF_ERROR(MetersOpened());
    RETURN_IF_ERROR(FinalizeClosedMonths(/*all=*/finalized_through_ == Time{}));
    finalized_through_ = month.start;
  }
  return runtime::Result::After(period_);
}

absl::Status MeteringController::MetersOpened() {
  return store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::UsageRecord> meters, store::ListObjects<model::UsageRecord>(tx));
    std::set<std::string> uids;
    for (const model::UsageRecord& m : meters) uids.insert(m.spec.pool_uid);
    ASSIGN_OR_RETURN(std::vector<model::GpuPool> pools, store::ListObjects<model::GpuPool>(tx));
    for (const model::GpuPool& p : pools) {
      if (p.status.approval && p.status.approval->approved && !uids.contains(p.metadata.uid)) {
        return absl::UnavailableError(fmt::format(
            "the meter of approved pool {}/{} is not open yet; closed months are kept once it is", p.metadata.ns,
            p.metadata.name));
      }
    }
    return absl::OkStatus();
  });
}

absl::Status MeteringController::FinalizeClosedMonths(bool all) {
  const Time now = clock_.Now();
  const billing::Period running = billing::MonthOf(now);
  // Which projects have meters or notes, and since when (read outside a transaction: a meter or
  // note created after this read is dated now, in the running month, not in a closed one).
  std::map<std::string, Time> first_of;
  for (std::string_view kind : {model::UsageRecord::kKind, model::CreditNote::kKind, model::Loan::kKind}) {
    ASSIGN_OR_RETURN(std::vector<store::Record> records, store_.List(kind, ""));
    for (const store::Record& r : records) {
      Time first = running.start;
      if (kind == model::Loan::kKind) {
        // A loan is on both its projects' invoices.
        ASSIGN_OR_RETURN(model::Loan l, store::DecodeRecord<model::Loan>(r));
        for (const std::string& p : {l.spec.borrower, l.spec.lender}) {
          auto [it, fresh] = first_of.try_emplace(p, l.spec.start);
          if (!fresh) it->second = std::min(it->second, l.spec.start);
        }
        continue;
      }
      if (kind == model::UsageRecord::kKind) {
        ASSIGN_OR_RETURN(model::UsageRecord u, store::DecodeRecord<model::UsageRecord>(r));
        first = u.spec.start;
      } else {
        ASSIGN_OR_RETURN(model::CreditNote n, store::DecodeRecord<model::CreditNote>(r));
        first = n.spec.issued;
      }
      auto [it, fresh] = first_of.try_emplace(r.key.ns, first);
      if (!fresh) it->second = std::min(it->second, first);
    }
  }
  for (const auto& [project_name, first] : first_of) {
    const std::string project = project_name;  // clang 14 cannot capture a structured binding
    // At start every closed month since the project's first meter (a server down across months
    // ends); then the month just closed.
    std::vector<billing::Period> months = billing::MonthsBetween(first, running.start);
    if (!all && months.size() > 1) months.erase(months.begin(), months.end() - 1);
    for (const billing::Period& month : months) {
      const store::Key key{std::string(model::kInvoiceKind), project, month.Name()};
      ASSIGN_OR_RETURN(std::optional<store::Record> kept, store_.Get(key));
      if (kept) continue;  // final: never written twice
      // Rated and kept in one transaction: no meter, credit or note can change between the two
      // (the store runs transactions one at a time), and the pool controller dates no credit
      // into a month it finds kept.
      billing::Invoice inv;
      bool wrote = false;
      absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
        wrote = false;
        ASSIGN_OR_RETURN(std::optional<store::Record> other, tx.Get(key));
        if (other) return absl::OkStatus();  // another replica kept it first
        ASSIGN_OR_RETURN(std::vector<model::UsageRecord> records, store::ListObjects<model::UsageRecord>(tx, project));
        ASSIGN_OR_RETURN(std::vector<model::CreditNote> notes, store::ListObjects<model::CreditNote>(tx, project));
        ASSIGN_OR_RETURN(std::vector<model::RateCard> cards, store::ListObjects<model::RateCard>(tx));
        ASSIGN_OR_RETURN(std::vector<model::Loan> loans, store::ListObjects<model::Loan>(tx));
        const billing::PriceBook prices(std::move(cards));
        inv = billing::Rate(project, records, prices, month, now);
        billing::AddCreditNotes(inv, notes);
        billing::AddLoans(inv, loans, prices, now);
        if (inv.lines.empty()) return absl::OkStatus();  // nothing happened that month
        for (billing::Line& l : inv.lines) {
          if (l.category != "Usage" || !l.loan.empty()) continue;
          // A telemetry history that does not answer fails the keeping, retried later: a kept
          // invoice is final, so it waits for its used GPU-hours rather than go without.
          ASSIGN_OR_RETURN(const std::optional<telemetry::GpuHoursUsed> used,
                           telemetry::UsedGpuHours(
                               hub_, telemetry::MeteredDevices(hub_, records, l.pool, l.model, l.profile, UnixSeconds(now)),
                               UnixSeconds(l.start), UnixSeconds(l.end), UnixSeconds(now)));
          if (used) l.used_gpu_hours = used->used;
        }
        wrote = true;
        return tx.Put(key, "", billing::EncodeInvoice(inv), store::kMustNotExist);
      });
      RETURN_IF_ERROR(s);
      if (!wrote) continue;
      ++invoices_written_;
      log::Info("metering: invoice {} of project {} is final: {} {} in {} line(s)", month.Name(), project,
                billing::Decimal(inv.total_micros), inv.currency, inv.lines.size());
    }
  }
  return absl::OkStatus();
}

}  // namespace gpuaas::controller
