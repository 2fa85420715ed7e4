#include "api/internal/billing_api.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "api/internal/objects.h"
#include "api/problem.h"
#include "billing/billing.h"
#include "billing/codec.h"
#include "billing/focus.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/billing.h"
#include "nlohmann/json.hpp"
#include "telemetry/assessment.h"

namespace gpuaas::api::internal {
namespace {

using nlohmann::json;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kCsv = "text/csv; charset=utf-8";
constexpr int kMaxMonths = 36;  // the longest range an export or summary spans

int64_t Seconds(Time t) { return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count(); }

billing::PriceBook Prices(store::ObjectCache& cache) { return billing::PriceBook(DecodeAll<model::RateCard>(cache)); }

// "YYYY-MM" (the month's start) or an RFC 3339 time.
absl::StatusOr<Time> ParseWhen(std::string_view name, std::string_view v) {
  if (v.size() == 7) {
    absl::StatusOr<billing::Period> p = billing::ParsePeriod(v);
    if (p.ok()) return p->start;
  }
  if (std::optional<Time> t = ParseTime(v)) return *t;
  return absl::InvalidArgumentError(
      fmt::format("{}: \"{}\" is neither a month (YYYY-MM) nor an RFC 3339 time", name, v));
}

// The months a from/to query spans: by default the running month.
absl::StatusOr<std::vector<billing::Period>> MonthsOf(const HttpRequest& req, Time now) {
  const billing::Period running = billing::MonthOf(now);
  Time from = running.start, to = running.end;
  if (req.HasParam("from")) {
    ASSIGN_OR_RETURN(from, ParseWhen("from", req.Param("from")));
  }
  if (req.HasParam("to")) {
    ASSIGN_OR_RETURN(to, ParseWhen("to", req.Param("to")));
  } else if (req.HasParam("from")) {
    to = std::max(running.end, from + std::chrono::seconds(1));
  }
  if (to <= from) return absl::InvalidArgumentError("to: must be after from");
  std::vector<billing::Period> months = billing::MonthsBetween(from, to);
  if (months.size() > kMaxMonths) {
    return absl::InvalidArgumentError(fmt::format("from/to span {} months; at most {}", months.size(), kMaxMonths));
  }
  return months;
}

// The receipts of the loans a project took or gave.
std::vector<model::Loan> LoansOf(store::ObjectCache& cache, const std::string& project) {
  std::vector<model::Loan> out;
  for (model::Loan& l : DecodeAll<model::Loan>(cache)) {
    if (l.spec.borrower == project || l.spec.lender == project) out.push_back(std::move(l));
  }
  return out;
}

// The invoice of one project and month: the kept one once the month has closed, else rated now
// (with used GPU-hours from monitoring where there are readings).
billing::Invoice InvoiceOf(store::ObjectCache& cache, telemetry::Hub* hub, const std::string& project,
                                  const std::vector<model::UsageRecord>& records, const billing::PriceBook& prices,
                                  const billing::Period& period, Time now) {
  if (period.end <= now) {
    if (std::shared_ptr<const store::CachedObject> kept = cache.Get(model::kInvoiceKind, project, period.Name())) {
      if (absl::StatusOr<billing::Invoice> inv = billing::DecodeInvoice(kept->json); inv.ok()) return *inv;
    }
  }
  billing::Invoice inv = billing::Rate(project, records, prices, period, now);
  billing::AddCreditNotes(inv, DecodeAll<model::CreditNote>(cache, project));
  billing::AddLoans(inv, LoansOf(cache, project), prices, now);
  if (hub == nullptr || inv.lines.empty()) return inv;
  // Used GPU-hours of the devices each line billed (telemetry::UsedGpuHours: the assessment's
  // definition too). They inform; the charges do not depend on them, so a telemetry history that
  // does not answer leaves them out (logged) rather than the invoice.
  for (billing::Line& l : inv.lines) {
    if (l.category != "Usage" || !l.loan.empty()) continue;
    absl::StatusOr<std::optional<telemetry::GpuHoursUsed>> used = telemetry::UsedGpuHours(
        *hub, telemetry::MeteredDevices(*hub, records, l.pool, l.model, l.profile, Seconds(now)), Seconds(l.start),
        Seconds(l.end), Seconds(now));
    if (!used.ok()) {
      log::Warn("invoice of {}: used GPU-hours left out: {}", project, used.status().message());
      break;
    }
    if (*used) l.used_gpu_hours = (*used)->used;
  }
  return inv;
}

}  // namespace

absl::StatusOr<HttpResponse> BillingApi::Invoices(const HttpRequest& req, const std::string& project,
                                                  const Principal& who) {
  if (!who.Sees(project) || !cache_.Get(model::Project::kKind, "", project)) {
    return absl::NotFoundError(fmt::format("projects \"{}\" not found", project));
  }
  const Time now = clock_.Now();
  const std::vector<model::UsageRecord> records = DecodeAll<model::UsageRecord>(cache_, project);
  std::vector<billing::Period> periods;
  if (req.HasParam("period")) {
    ASSIGN_OR_RETURN(billing::Period p, billing::ParsePeriod(req.Param("period")));
    periods.push_back(p);
  } else {
    Time first = now;
    for (const model::UsageRecord& r : records) first = std::min(first, r.spec.start);
    for (const model::CreditNote& n : DecodeAll<model::CreditNote>(cache_, project)) first = std::min(first, n.spec.issued);
    for (const model::Loan& l : LoansOf(cache_, project)) first = std::min(first, l.spec.start);
    if (first < now) periods = billing::MonthsBetween(first, now + std::chrono::seconds(1));
    std::reverse(periods.begin(), periods.end());  // newest first
  }
  const billing::PriceBook prices = Prices(cache_);
  std::string body = "{\"items\":[";
  bool first_item = true;
  for (const billing::Period& p : periods) {
    const billing::Invoice inv = InvoiceOf(cache_, hub_, project, records, prices, p, now);
    if (inv.lines.empty() && !req.HasParam("period")) continue;  // a month with nothing billed in it
    body += first_item ? "" : ",";
    body += billing::EncodeInvoice(inv);
    first_item = false;
  }
  body += "]}";
  return HttpResponse{200, std::string(kJson), std::move(body), {}};
}

absl::StatusOr<HttpResponse> BillingApi::Invoice(const HttpRequest& req, const std::string& project,
                                                 const std::string& period, const Principal& who) {
  if (!who.Sees(project) || !cache_.Get(model::Project::kKind, "", project)) {
    return absl::NotFoundError(fmt::format("projects \"{}\" not found", project));
  }
  ASSIGN_OR_RETURN(billing::Period p, billing::ParsePeriod(period));
  const std::string format = req.Param("format");
  if (!format.empty() && format != "json" && format != "csv") {
    return absl::InvalidArgumentError("format: must be json or csv");
  }
  const billing::Invoice inv = InvoiceOf(cache_, hub_, project, DecodeAll<model::UsageRecord>(cache_, project),
                                         Prices(cache_), p, clock_.Now());
  if (format == "csv") {
    return HttpResponse{200, std::string(kCsv), billing::LinesCsv(inv),
                        {{"Content-Disposition", fmt::format("attachment; filename=\"{}-{}.csv\"", project, p.Name())}}};
  }
  return HttpResponse{200, std::string(kJson), billing::EncodeInvoice(inv), {}};
}

namespace {

// Every project's invoices of `months` that have lines (usage, credits or credit notes), with
// the meters they were rated from.
struct Ledger {
  std::vector<billing::Invoice> invoices;
  std::map<std::string, std::vector<model::UsageRecord>> meters;  // by project
  std::string currency;
};
Ledger InvoicesOf(store::ObjectCache& cache, const std::vector<billing::Period>& months, Time now) {
  Ledger out;
  for (model::UsageRecord& r : DecodeAll<model::UsageRecord>(cache)) out.meters[r.metadata.ns].push_back(std::move(r));
  for (const model::CreditNote& n : DecodeAll<model::CreditNote>(cache)) out.meters.try_emplace(n.metadata.ns);
  for (const model::Loan& l : DecodeAll<model::Loan>(cache)) {
    out.meters.try_emplace(l.spec.borrower);
    out.meters.try_emplace(l.spec.lender);
  }
  const billing::PriceBook prices = Prices(cache);
  out.currency = prices.currency();
  for (const billing::Period& m : months) {
    if (m.start > now) break;
    for (const auto& [project, records] : out.meters) {
      billing::Invoice inv = InvoiceOf(cache, nullptr, project, records, prices, m, now);
      if (!inv.lines.empty()) out.invoices.push_back(std::move(inv));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<HttpResponse> BillingApi::Focus(const HttpRequest& req) {
  const Time now = clock_.Now();
  ASSIGN_OR_RETURN(std::vector<billing::Period> months, MonthsOf(req, now));
  // ?project=NAME: that project's rows only.
  const std::string project = req.Param("project");
  if (!project.empty() && !cache_.Get(model::Project::kKind, "", project)) {
    return absl::NotFoundError(fmt::format("projects \"{}\" not found", project));
  }
  std::vector<billing::Invoice> invoices = InvoicesOf(cache_, months, now).invoices;
  if (!project.empty()) std::erase_if(invoices, [&](const billing::Invoice& i) { return i.project != project; });
  return HttpResponse{
      200, std::string(kCsv), billing::FocusCsv(invoices),
      {{"Content-Disposition", fmt::format("attachment; filename=\"gpuaas-focus-{}{}-{}.csv\"",
                                           project.empty() ? "" : project + "-", months.front().Name(),
                                           months.back().Name())}}};
}

absl::StatusOr<HttpResponse> BillingApi::Summary(const HttpRequest& req) {
  const Time now = clock_.Now();
  ASSIGN_OR_RETURN(std::vector<billing::Period> months, MonthsOf(req, now));
  const Ledger ledger = InvoicesOf(cache_, months, now);
  // A pool's cluster, as its meter recorded it (the pool's, or where it was first allocated: a
  // meter bills only what was allocated, so every line's pool has one, but for meters from
  // before the cluster was recorded).
  std::map<std::pair<std::string, std::string>, std::string> cluster_of;
  for (const auto& [project, records] : ledger.meters) {
    for (const model::UsageRecord& r : records) {
      std::string& c = cluster_of[{project, r.spec.pool}];
      if (c.empty() || c == "(unknown)") c = r.spec.cluster.empty() ? "(unknown)" : r.spec.cluster;
    }
  }
  struct Sum {
    billing::Micros amount = 0;
    double hours = 0;
  };
  std::map<std::string, Sum> by_model, by_cluster, by_project;
  Sum total;
  for (const billing::Invoice& inv : ledger.invoices) {
    for (const billing::Line& l : inv.lines) {
      const bool note = !l.corrects.empty();
      // A borrowed line names the lending pool as "<project>/<pool>": its devices are there.
      const size_t slash = l.loan == "borrowed" ? l.pool.find('/') : std::string::npos;
      const std::pair<std::string, std::string> pool =
          slash == std::string::npos ? std::make_pair(inv.project, l.pool)
                                     : std::make_pair(l.pool.substr(0, slash), l.pool.substr(slash + 1));
      for (Sum* s : {&by_model[note ? "(credit notes)" : l.model],
                     &by_cluster[note ? "(credit notes)" : cluster_of[pool]], &by_project[inv.project],
                     &total}) {
        s->amount = billing::AddMicros(s->amount, l.amount_micros);
        s->hours += l.allocated_gpu_hours;
      }
    }
  }
  auto rows = [](const std::map<std::string, Sum>& m, const char* key) {
    json a = json::array();
    for (const auto& [k, s] : m) a.push_back({{key, k}, {"amountMicros", s.amount}, {"allocatedGpuHours", s.hours}});
    return a;
  };
  const json out = {{"from", FormatTime(months.front().start)},
                    {"to", FormatTime(months.back().end)},
                    {"currency", ledger.currency},
                    {"amountMicros", total.amount},
                    {"allocatedGpuHours", total.hours},
                    {"byModel", rows(by_model, "model")},
                    {"byCluster", rows(by_cluster, "cluster")},
                    {"byProject", rows(by_project, "project")}};
  return HttpResponse{200, std::string(kJson), out.dump(), {}};
}

std::string BillingApi::BudgetWarning(const model::Project& p) {
  if (!p.spec.budget) return "";
  const Time now = clock_.Now();
  const billing::Period month = billing::MonthOf(now);
  const billing::PriceBook prices = Prices(cache_);
  const billing::Cost committed =
      billing::CostOver(DecodeAll<model::UsageRecord>(cache_, p.metadata.name), prices, month.start, month.end);
  const model::Project::Budget& b = *p.spec.budget;
  std::vector<std::string> over;
  if (b.amount_micros > 0 && committed.amount_micros > b.amount_micros) {
    over.push_back(fmt::format("{} {} against {} {}", billing::Decimal(committed.amount_micros), prices.currency(),
                               billing::Decimal(b.amount_micros), prices.currency()));
  }
  if (b.gpu_hours > 0 && committed.gpu_hours > static_cast<double>(b.gpu_hours)) {
    over.push_back(fmt::format("{:.1f} GPU-hours against {}", committed.gpu_hours, b.gpu_hours));
  }
  if (over.empty()) return "";
  return fmt::format("project {}'s pools already cost more by the end of {} than this budget allows ({}): {}",
                     p.metadata.name, month.Name(), fmt::join(over, "; "),
                     b.allow_overrun ? "overruns are allowed, so the budget alerts fire"
                                     : "new pools and approvals will be refused until pools are released");
}

std::string BillingApi::BudgetAlertsJson() {
  const Time now = clock_.Now();
  json items = json::array();
  std::vector<model::Project> budgeted;
  for (model::Project& p : DecodeAll<model::Project>(cache_)) {
    if (p.spec.budget) budgeted.push_back(std::move(p));
  }
  if (budgeted.empty()) return items.dump();
  const billing::PriceBook prices = Prices(cache_);
  const std::string month = billing::MonthOf(now).Name();
  const std::vector<model::Loan> loans = DecodeAll<model::Loan>(cache_);
  for (const model::Project& p : budgeted) {
    for (const billing::BudgetAlert& a :
         billing::BudgetAlerts(p, DecodeAll<model::UsageRecord>(cache_, p.metadata.name), prices, now, loans)) {
      const bool money = a.what == "money";
      auto amount = [&](double v) {
        return money ? fmt::format("{} {}", billing::Decimal(static_cast<billing::Micros>(v)), prices.currency())
                     : fmt::format("{:.1f} GPU-hours", v);
      };
      items.push_back({{"id", fmt::format("budget/{}/{}/{}", p.metadata.name, money ? "money" : "gpu-hours", a.percent)},
                       {"time", FormatTime(a.since)},
                       {"severity", a.percent >= 100 ? "critical" : "warning"},
                       {"project", p.metadata.name},
                       {"source", "Budget"},
                       {"condition", ""},
                       {"reason", a.percent >= 100 ? "BudgetExceeded" : "BudgetNearlySpent"},
                       {"message", fmt::format("project {} has spent {} of its {} budget for {} ({}%)", p.metadata.name,
                                               amount(a.spent), amount(a.budget), month,
                                               static_cast<int>(a.spent * 100 / a.budget))},
                       {"action", p.spec.budget->allow_overrun
                                      ? "overruns are allowed: review the project's pools"
                                      : "raise the budget, release idle pools, or allow overruns; new pools "
                                        "that would pass it are refused"},
                       {"actionCode", p.spec.budget->allow_overrun ? "ReviewPools" : "RaiseBudget"},
                       // Money in units of the currency (not micro-units), as the message quotes it.
                       {"params", {{"percent", static_cast<int>(a.spent * 100 / a.budget)},
                                   {"spent", money ? a.spent / 1e6 : a.spent},
                                   {"budget", money ? a.budget / 1e6 : a.budget},
                                   {"unit", money ? prices.currency() : "GPU-hours"},
                                   {"month", month}}},
                       {"active", true}});
    }
  }
  return items.dump();
}

}  // namespace gpuaas::api::internal
