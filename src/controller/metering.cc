#include "controller/metering.h"

#include <map>
#include <set>

#include "billing/billing.h"
#include "billing/codec.h"
#include "common/log.h"
#include "common/status.h"
#include "fmt/format.h"
#include "model/billing.h"
#include "model/fleet.h"
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
  if (!backfilled_) {
    RETURN_IF_ERROR(OpenMissingMeters());
    backfilled_ = true;
  }
  const billing::Period month = billing::MonthOf(clock_.Now());
  if (finalized_through_ < month.start) {
    // At start, the last three months (a server down across a month's end); then each new one.
    RETURN_IF_ERROR(FinalizeClosedMonths(finalized_through_ == Time{} ? 3 : 1));
    finalized_through_ = month.start;
  }
  return runtime::Result::After(period_);
}

absl::Status MeteringController::OpenMissingMeters() {
  return store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::GpuPool> pools, store::ListObjects<model::GpuPool>(tx));
    for (const model::GpuPool& p : pools) {
      if (!p.status.approval || !p.status.approval->approved) continue;
      ASSIGN_OR_RETURN(std::optional<store::Record> have,
                       tx.Get(store::KeyOf<model::UsageRecord>(p.metadata.ns, p.metadata.name)));
      if (have) continue;
      model::UsageRecord meter;
      meter.metadata.ns = p.metadata.ns;
      meter.metadata.name = p.metadata.name;
      meter.metadata.labels = {{"gpuaas.io/pool", p.metadata.name}};
      meter.spec.pool = p.metadata.name;
      meter.spec.pool_uid = p.metadata.uid;
      meter.spec.cluster = p.spec.cluster.empty() && !p.status.allocation.empty() ? p.status.allocation.front().cluster
                                                                                : p.spec.cluster;
      meter.spec.items = p.spec.items;
      meter.spec.start = std::chrono::floor<std::chrono::seconds>(p.status.approval->time);
      if (const model::Condition* rel = model::FindCondition(p.status.conditions, model::kReleased)) {
        meter.spec.end = std::max<Time>(meter.spec.start, std::chrono::floor<std::chrono::seconds>(rel->last_transition_time));
      }
      RETURN_IF_ERROR(store::CreateObject(tx, meter, clock_.Now()));
      ++meters_opened_;
      log::Info("metering: opened the meter of pool {}/{} from its approval at {}", p.metadata.ns, p.metadata.name,
                FormatTime(meter.spec.start));
    }
    return absl::OkStatus();
  });
}

absl::Status MeteringController::FinalizeClosedMonths(int months) {
  const Time now = clock_.Now();
  std::vector<billing::Period> closed;
  billing::Period p = billing::MonthOf(now);
  for (int i = 0; i < months; ++i) {
    p = billing::MonthOf(p.start - std::chrono::seconds(1));
    closed.push_back(p);
  }
  ASSIGN_OR_RETURN(std::vector<store::Record> card_records, store_.List(model::RateCard::kKind, ""));
  std::vector<model::RateCard> cards;
  for (const store::Record& r : card_records) {
    ASSIGN_OR_RETURN(model::RateCard c, store::DecodeRecord<model::RateCard>(r));
    cards.push_back(std::move(c));
  }
  const billing::PriceBook prices(std::move(cards));
  ASSIGN_OR_RETURN(std::vector<store::Record> meter_records, store_.List(model::UsageRecord::kKind, ""));
  std::map<std::string, std::vector<model::UsageRecord>> by_project;
  for (const store::Record& r : meter_records) {
    ASSIGN_OR_RETURN(model::UsageRecord u, store::DecodeRecord<model::UsageRecord>(r));
    by_project[u.metadata.ns].push_back(std::move(u));
  }
  ASSIGN_OR_RETURN(std::vector<store::Record> note_records, store_.List(model::CreditNote::kKind, ""));
  std::map<std::string, std::vector<model::CreditNote>> notes_of;
  for (const store::Record& r : note_records) {
    ASSIGN_OR_RETURN(model::CreditNote n, store::DecodeRecord<model::CreditNote>(r));
    by_project.try_emplace(n.metadata.ns);  // a project with a credit note but no meter yet
    notes_of[n.metadata.ns].push_back(std::move(n));
  }
  std::map<std::string, model::GpuCapacity> gpus;  // read only when an invoice is written
  for (const billing::Period& month : closed) {
    for (const auto& [project, records] : by_project) {
      const std::vector<model::CreditNote>& notes = notes_of[project];
      const bool touched =
          std::any_of(records.begin(), records.end(),
                      [&](const model::UsageRecord& u) {
                        return u.spec.start < month.end && (!u.spec.end || *u.spec.end > month.start);
                      }) ||
          std::any_of(notes.begin(), notes.end(), [&](const model::CreditNote& n) {
            return n.spec.issued >= month.start && n.spec.issued < month.end;
          });
      if (!touched) continue;
      const store::Key key{std::string(model::kInvoiceKind), project, month.Name()};
      ASSIGN_OR_RETURN(std::optional<store::Record> kept, store_.Get(key));
      if (kept) continue;  // final: never written twice
      billing::Invoice inv = billing::Rate(project, records, prices, month, now);
      billing::AddCreditNotes(inv, notes);
      if (gpus.empty()) {
        ASSIGN_OR_RETURN(std::vector<store::Record> gpu_records, store_.List(model::GpuCapacity::kKind, ""));
        for (const store::Record& r : gpu_records) {
          ASSIGN_OR_RETURN(model::GpuCapacity g, store::DecodeRecord<model::GpuCapacity>(r));
          gpus.emplace(g.spec.uuid, std::move(g));
        }
      }
      ASSIGN_OR_RETURN(std::vector<store::Record> run_records, store_.List(model::Profile::kKind, project));
      std::vector<model::Profile> runs;
      for (const store::Record& r : run_records) {
        ASSIGN_OR_RETURN(model::Profile run, store::DecodeRecord<model::Profile>(r));
        runs.push_back(std::move(run));
      }
      for (billing::Line& l : inv.lines) {
        if (l.category != "Usage") continue;
        l.used_gpu_hours = telemetry::UsedGpuHours(hub_, runs, l.pool, gpus, l.model, l.profile, UnixSeconds(l.start),
                                                   UnixSeconds(l.end), UnixSeconds(now));
      }
      const std::string doc = billing::EncodeInvoice(inv);
      absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
        return tx.Put(key, "", doc, store::kMustNotExist);
      });
      if (absl::IsAlreadyExists(s)) continue;  // another replica kept it first
      RETURN_IF_ERROR(s);
      ++invoices_written_;
      log::Info("metering: invoice {} of project {} is final: {} {} in {} line(s)", month.Name(), project,
                billing::Decimal(inv.total_micros), inv.currency, inv.lines.size());
    }
  }
  return absl::OkStatus();
}

}  // namespace gpuaas::controller
