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
#include "nlohmann/json.hpp"
#include "service/pools.h"
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
    RETURN_IF_ERROR(FinalizeClosedMonths(/*all=*/finalized_through_ == Time{}));
    finalized_through_ = month.start;
  }
  return runtime::Result::After(period_);
}

absl::Status MeteringController::OpenMissingMeters() {
  return store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::GpuPool> pools, store::ListObjects<model::GpuPool>(tx));
    // When each release was asked for: the audit log's Release events (the pool's Released
    // condition moves on when the release completes).
    std::map<std::string, Time> release_asked;
    bool audit_read = false;
    auto released_at = [&](const model::GpuPool& p) -> absl::StatusOr<std::optional<Time>> {
      if (!audit_read) {
        ASSIGN_OR_RETURN(std::vector<store::Record> events, tx.List(service::kAuditKind, ""));
        for (const store::Record& e : events) {
          const nlohmann::json j = nlohmann::json::parse(e.data, nullptr, false);
          if (!j.is_object() || j.value("action", "") != "Release") continue;
          if (std::optional<Time> t = ParseTime(j.value("time", ""))) release_asked.try_emplace(j.value("object", ""), *t);
        }
        audit_read = true;
      }
      auto it = release_asked.find(fmt::format("gpupools/{}/{}", p.metadata.ns, p.metadata.name));
      if (it != release_asked.end()) return std::optional<Time>(it->second);
      const model::Condition* rel = model::FindCondition(p.status.conditions, model::kReleased);
      if (rel == nullptr) return std::optional<Time>();
      return std::optional<Time>(rel->last_transition_time);
    };
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
      if (model::FindCondition(p.status.conditions, model::kReleased) != nullptr) {
        ASSIGN_OR_RETURN(std::optional<Time> asked, released_at(p));
        if (asked) meter.spec.end = std::max<Time>(meter.spec.start, std::chrono::floor<std::chrono::seconds>(*asked));
      }
      RETURN_IF_ERROR(store::CreateObject(tx, meter, clock_.Now()));
      ++meters_opened_;
      log::Info("metering: opened the meter of pool {}/{} from its approval at {}", p.metadata.ns, p.metadata.name,
                FormatTime(meter.spec.start));
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
  for (std::string_view kind : {model::UsageRecord::kKind, model::CreditNote::kKind}) {
    ASSIGN_OR_RETURN(std::vector<store::Record> records, store_.List(kind, ""));
    for (const store::Record& r : records) {
      Time first = running.start;
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
        inv = billing::Rate(project, records, billing::PriceBook(std::move(cards)), month, now);
        billing::AddCreditNotes(inv, notes);
        if (inv.lines.empty()) return absl::OkStatus();  // nothing happened that month
        for (billing::Line& l : inv.lines) {
          if (l.category != "Usage") continue;
          if (std::optional<telemetry::GpuHoursUsed> used = telemetry::UsedGpuHours(
                  hub_, telemetry::MeteredDevices(hub_, records, l.pool, l.model, l.profile, UnixSeconds(now)),
                  UnixSeconds(l.start), UnixSeconds(l.end), UnixSeconds(now))) {
            l.used_gpu_hours = used->used;
          }
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
