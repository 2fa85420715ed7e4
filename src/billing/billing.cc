#include "billing/billing.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <tuple>

#include "absl/time/civil_time.h"
#include "catalog/catalog.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"

namespace gpuaas::billing {
namespace {

using std::chrono::seconds;

int64_t Sec(Time t) { return std::chrono::floor<seconds>(t.time_since_epoch()).count(); }
Time AtSec(int64_t s) { return Time(seconds(s)); }

}  // namespace

std::string Decimal(Micros micros) { return FixedMicros(micros); }

absl::StatusOr<Micros> ParseDecimal(std::string_view v) {
  const size_t dot = v.find('.');
  const std::string_view whole = v.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view() : v.substr(dot + 1);
  auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || whole.size() > 12 || frac.size() > 6 || !digits(whole) || !digits(frac) ||
      (dot != std::string_view::npos && frac.empty())) {
    return absl::InvalidArgumentError(fmt::format("\"{}\" is not an amount such as 4.50 (at most six decimals)", v));
  }
  Micros micros = 0;
  for (char c : whole) micros = micros * 10 + (c - '0');
  for (size_t i = 0; i < 6; ++i) micros = micros * 10 + (i < frac.size() ? frac[i] - '0' : 0);
  return micros;
}

namespace {

// "1234.500000 USD".
std::string Money(__int128 micros, std::string_view currency) {
  return fmt::format("{} {}", Decimal(static_cast<Micros>(micros)), currency.empty() ? "(no currency)" : currency);
}

// A pool item or a credited device, over [from, to) in seconds, cut where the card changes.
template <typename F>
void ForEachPricedSpan(const PriceBook& prices, int64_t from, int64_t to, F&& f) {
  if (to <= from) return;
  int64_t a = from;
  for (Time change : prices.ChangesWithin(AtSec(from), AtSec(to))) {
    const int64_t c = Sec(change);
    if (c <= a) continue;
    f(a, c, prices.At(AtSec(a)));
    a = c;
  }
  f(a, to, prices.At(AtSec(a)));
}

// Every chargeable stretch of `records` within [from, to), cut where the card changes: each
// held device entry's, from the later of the meter's start and the entry's `since` (credit null),
// and each credited device's (a fault credit, clipped to its meter). Open meters and credits run
// to `open_until`; `project` (when given) skips other projects' records. The one traversal
// rating and costing share.
struct Charge {
  const model::UsageRecord& record;
  const model::UsageRecord::Held* held;      // usage of these devices (credit null)
  const model::UsageRecord::Credit* credit;  // a fault credit (held null)
  int64_t a, b;
  const model::RateCard* card;               // null: no card in force
};
template <typename F>
void ForEachCharge(const std::vector<model::UsageRecord>& records, const PriceBook& prices, int64_t from, int64_t to,
                   int64_t open_until, std::string_view project, F&& f) {
  for (const model::UsageRecord& r : records) {
    if (!project.empty() && !r.metadata.ns.empty() && r.metadata.ns != project) continue;
    const int64_t r_from = Sec(r.spec.start);
    const int64_t r_to = r.spec.end ? Sec(*r.spec.end) : open_until;
    const std::vector<model::UsageRecord::Held> held = model::BilledDevices(r);
    for (const model::UsageRecord::Held& h : held) {
      ForEachPricedSpan(prices, std::max({Sec(h.since), r_from, from}), std::min(r_to, to),
                        [&](int64_t a, int64_t b, const model::RateCard* card) { f(Charge{r, &h, nullptr, a, b, card}); });
    }
    for (const model::UsageRecord::Credit& c : r.spec.credits) {
      const int64_t c_from = std::max({Sec(c.start), r_from, from});
      const int64_t c_to = std::min({c.end ? Sec(*c.end) : r_to, r_to, to});
      ForEachPricedSpan(prices, c_from, c_to,
                        [&](int64_t a, int64_t b, const model::RateCard* card) { f(Charge{r, nullptr, &c, a, b, card}); });
    }
  }
}

constexpr int64_t kQuietAllocationSeconds = 60;

struct LineKey {
  std::string pool;
  int category = 0;  // 0 usage, 1 credit
  std::string model, profile, gpu, card;
  Micros price = 0;
  int64_t quantity = 0;
  std::string description;
  friend auto operator<=>(const LineKey&, const LineKey&) = default;
};

}  // namespace

Micros RoundDiv(__int128 num, __int128 den) {
  const bool negative = num < 0;
  const __int128 n = negative ? -num : num;
  __int128 q = (n + den / 2) / den;  // half up on the magnitude: half away from zero
  // Beyond 9.2 x 10^12 currency units nothing is real; saturate rather than wrap.
  q = std::min<__int128>(q, std::numeric_limits<Micros>::max());
  return static_cast<Micros>(negative ? -q : q);
}

Micros AddMicros(Micros a, Micros b) {
  const __int128 s = static_cast<__int128>(a) + b;
  return static_cast<Micros>(std::clamp<__int128>(s, std::numeric_limits<Micros>::min() + 1,
                                                  std::numeric_limits<Micros>::max()));
}

std::string Period::Name() const {
  const std::chrono::year_month_day ymd{std::chrono::floor<std::chrono::days>(start)};
  return fmt::format("{:04}-{:02}", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()));
}

Period MonthOf(Time t) {
  const std::chrono::year_month_day ymd{std::chrono::floor<std::chrono::days>(t)};
  const std::chrono::year_month first = ymd.year() / ymd.month();
  const std::chrono::year_month next = first + std::chrono::months(1);
  return {Time(std::chrono::sys_days(first / 1)), Time(std::chrono::sys_days(next / 1))};
}

absl::StatusOr<Period> ParsePeriod(std::string_view text) {
  // Abseil's civil-time parser, and only its own spelling back (2026-01, never 2026-1 or " 2026-01").
  absl::CivilMonth month;
  const absl::string_view given(text.data(), text.size());
  if (!absl::ParseCivilTime(given, &month) || absl::FormatCivilTime(month) != given || month.year() < 1970 ||
      month.year() > 2199) {
    return absl::InvalidArgumentError(fmt::format("period \"{}\": expected YYYY-MM, such as 2026-11", text));
  }
  return MonthOf(Time(std::chrono::sys_days(std::chrono::year(static_cast<int>(month.year())) /
                                            std::chrono::month(static_cast<unsigned>(month.month())) / 1)));
}

std::vector<Period> MonthsBetween(Time from, Time to) {
  std::vector<Period> out;
  for (Period p = MonthOf(from); p.start < to; p = MonthOf(p.end)) out.push_back(p);
  return out;
}

PriceBook::PriceBook(std::vector<model::RateCard> cards) : cards_(std::move(cards)) {
  std::sort(cards_.begin(), cards_.end(), [](const model::RateCard& a, const model::RateCard& b) {
    return std::tie(a.spec.effective_from, a.metadata.name) < std::tie(b.spec.effective_from, b.metadata.name);
  });
}

const model::RateCard* PriceBook::At(Time t) const {
  auto it = std::upper_bound(cards_.begin(), cards_.end(), t,
                             [](Time x, const model::RateCard& c) { return x < c.spec.effective_from; });
  return it == cards_.begin() ? nullptr : &*std::prev(it);
}

std::vector<Time> PriceBook::ChangesWithin(Time from, Time to) const {
  std::vector<Time> out;
  for (const model::RateCard& c : cards_) {
    if (c.spec.effective_from > from && c.spec.effective_from < to &&
        (out.empty() || out.back() != c.spec.effective_from)) {
      out.push_back(c.spec.effective_from);
    }
  }
  return out;
}

std::optional<Micros> UnitPrice(const model::RateCard& card, std::string_view model, std::string_view profile) {
  const catalog::GpuModel* m = catalog::FindModel(model);
  if (m == nullptr) return std::nullopt;
  std::optional<Micros> full;
  for (const model::RateCard::Price& p : card.spec.prices) {
    if (catalog::FindModel(p.model) != m) continue;
    if (p.profile == profile) return p.price_per_hour_micros;
    if (p.profile == catalog::kFullProfile) full = p.price_per_hour_micros;
  }
  if (profile == catalog::kFullProfile || !full || card.spec.mig_pricing == model::RateCard::MigPricing::kExplicit) {
    return std::nullopt;
  }
  const catalog::MigProfile* mp = catalog::FindProfile(*m, profile);
  if (mp == nullptr || m->compute_slices <= 0 || m->memory_slices <= 0) return std::nullopt;
  if (card.spec.mig_pricing == model::RateCard::MigPricing::kMemory) {
    return RoundDiv(static_cast<__int128>(*full) * mp->memory_slices, m->memory_slices);
  }
  return RoundDiv(static_cast<__int128>(*full) * mp->compute_slices, m->compute_slices);
}

std::string_view ToString(InvoiceState s) { return s == InvoiceState::kFinal ? "final" : "draft"; }

Invoice Rate(std::string_view project, const std::vector<model::UsageRecord>& records, const PriceBook& prices,
             const Period& period, Time now) {
  Invoice inv;
  inv.project = std::string(project);
  inv.period = period;
  inv.state = now >= period.end ? InvoiceState::kFinal : InvoiceState::kDraft;
  inv.currency = prices.currency();
  const int64_t p_from = Sec(period.start), p_to = std::min(Sec(period.end), Sec(now));
  std::map<LineKey, Line> lines;
  auto add = [&](LineKey key, const std::string& model, const std::string& profile, int64_t a, int64_t b) {
    auto [it, fresh] = lines.try_emplace(key);
    Line& l = it->second;
    if (fresh) {
      l.pool = key.pool;
      l.model = model;
      l.profile = profile;
      l.category = key.category == 0 ? "Usage" : "Credit";
      l.description = key.description;
      l.rate_card = key.card;
      l.quantity = key.quantity;
      l.unit_price_micros = key.price;
      l.start = AtSec(a);
      l.end = AtSec(b);
    }
    l.seconds += b - a;
    l.start = std::min(l.start, AtSec(a));
    l.end = std::max(l.end, AtSec(b));
  };
  ForEachCharge(records, prices, p_from, p_to, Sec(now), project, [&](const Charge& ch) {
    const std::string& pool = ch.record.spec.pool;
    if (ch.held != nullptr) {
      const model::UsageRecord::Held& h = *ch.held;
      const std::optional<Micros> price = ch.card ? UnitPrice(*ch.card, h.model, h.profile) : std::nullopt;
      // A line says when billing of its devices began where that was not the approval: they
      // came to the pool later, because it waited for capacity (the seconds an allocation
      // takes right after an approval are not worth a word; the line's start shows them).
      std::string why = price ? ""
                        : ch.card ? fmt::format("rate card {} does not price {}/{}", ch.card->metadata.name, h.model,
                                                h.profile)
                                  : "no rate card in force";
      if (Sec(h.since) > Sec(ch.record.spec.start) + kQuietAllocationSeconds) {
        why += fmt::format("{}billed from the allocation at {}, not the approval at {}", why.empty() ? "" : "; ",
                           FormatTime(AtSec(Sec(h.since))), FormatTime(ch.record.spec.start));
      }
      LineKey key{pool, 0, h.model, h.profile, "", price ? ch.card->metadata.name : "", price.value_or(0), h.count,
                  std::move(why)};
      add(std::move(key), h.model, h.profile, ch.a, ch.b);
      return;
    }
    const model::UsageRecord::Credit& c = *ch.credit;
    const std::optional<Micros> price = ch.card ? UnitPrice(*ch.card, c.model, c.profile) : std::nullopt;
    if (!price) return;  // nothing was charged for it
    LineKey key{pool, 1, c.model, c.profile, c.gpu_uuid, ch.card->metadata.name, *price, 1,
                fmt::format("GPU {} out of service ({}) until replaced", c.gpu_uuid, c.reason)};
    add(std::move(key), c.model, c.profile, ch.a, ch.b);
  });
  for (auto& [key, l] : lines) {
    const Micros amount = RoundDiv(static_cast<__int128>(l.seconds) * l.quantity * l.unit_price_micros, 3600);
    const double hours = static_cast<double>(l.seconds) * static_cast<double>(l.quantity) *
                         catalog::GpuShare(l.model, l.profile) / 3600.0;
    l.amount_micros = key.category == 0 ? amount : -amount;
    l.allocated_gpu_hours = key.category == 0 ? hours : -hours;
    inv.total_micros = AddMicros(inv.total_micros, l.amount_micros);
    inv.allocated_gpu_hours += l.allocated_gpu_hours;
    inv.lines.push_back(std::move(l));
  }
  return inv;
}

void AddCreditNotes(Invoice& inv, const std::vector<model::CreditNote>& notes) {
  for (const model::CreditNote& n : notes) {
    if (!n.metadata.ns.empty() && n.metadata.ns != inv.project) continue;
    if (n.spec.issued < inv.period.start || n.spec.issued >= inv.period.end) continue;
    Line l;
    l.pool = "";
    l.model = "credit-note";
    l.profile = n.metadata.name;
    l.category = "Credit";
    l.corrects = n.spec.period;
    l.description = fmt::format("credit note {} correcting {}: {}", n.metadata.name, n.spec.period, n.spec.reason);
    l.quantity = 1;
    l.amount_micros = -n.spec.amount_micros;
    l.start = l.end = n.spec.issued;
    inv.total_micros = AddMicros(inv.total_micros, l.amount_micros);
    inv.lines.push_back(std::move(l));
  }
}

void AddLoans(Invoice& inv, const std::vector<model::Loan>& loans, const PriceBook& prices, Time now) {
  struct Key {
    std::string lender, pool, borrower, model, profile, card;
    Micros price;
    int64_t quantity;
    bool borrower_side;
    auto operator<=>(const Key&) const = default;
  };
  std::map<Key, Line> lines;
  const int64_t p_from = Sec(inv.period.start), p_to = std::min(Sec(inv.period.end), Sec(now));
  for (const model::Loan& l : loans) {
    const bool borrowed = l.spec.borrower == inv.project;
    const bool lent = l.spec.lender == inv.project;
    if (!borrowed && !lent) continue;
    for (const bool side : {true, false}) {  // true: the borrower's line
      if ((side && !borrowed) || (!side && !lent)) continue;
      // A reservation's lender is credited only from its start (its own billing's).
      const int64_t from = std::max({p_from, Sec(l.spec.start),
                                     !side && l.spec.credit_from ? Sec(*l.spec.credit_from) : p_from});
      const int64_t to = std::min(p_to, l.spec.end ? Sec(*l.spec.end) : Sec(now));
      if (to <= from) continue;
      // Split at rate card changes.
      std::vector<int64_t> cuts = {from};
      for (Time c : prices.ChangesWithin(AtSec(from), AtSec(to))) cuts.push_back(Sec(c));
      cuts.push_back(to);
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        const int64_t a = cuts[i], b = cuts[i + 1];
        const model::RateCard* card = prices.At(AtSec(a));
        const std::optional<Micros> full = card ? UnitPrice(*card, l.spec.model, l.spec.profile) : std::nullopt;
        const Micros price =
            full ? RoundDiv(static_cast<__int128>(*full) * card->spec.preemptible_price_percent, 100) : 0;
        const Key key{l.spec.lender, l.spec.pool, l.spec.borrower, l.spec.model, l.spec.profile,
                      full ? card->metadata.name : "", price, static_cast<int64_t>(l.spec.devices.size()), false};
        Key k = key;
        k.borrower_side = side;
        auto [it, fresh] = lines.try_emplace(k);
        Line& line = it->second;
        if (fresh) {
          line.pool = side ? fmt::format("{}/{}", l.spec.lender, l.spec.pool) : l.spec.pool;
          line.model = l.spec.model;
          line.profile = l.spec.profile;
          line.category = side ? "Usage" : "Credit";
          line.loan = side ? "borrowed" : "lent";
          line.rate_card = key.card;
          line.quantity = key.quantity;
          line.unit_price_micros = price;
          line.start = AtSec(a);
          line.end = AtSec(b);
          const std::string pct = card ? fmt::format("{}%", card->spec.preemptible_price_percent) : "";
          line.description =
              !full ? (card ? fmt::format("rate card {} does not price {}/{}", card->metadata.name, l.spec.model,
                                          l.spec.profile)
                            : "no rate card in force")
              : side ? fmt::format("borrowed from pool {} of project {}, preemptible at {} of the price", l.spec.pool,
                                   l.spec.lender, pct)
                     : fmt::format("lent to project {}, preemptible at {} of the price", l.spec.borrower, pct);
        }
        line.seconds += b - a;
        line.start = std::min(line.start, AtSec(a));
        line.end = std::max(line.end, AtSec(b));
      }
    }
  }
  for (auto& [key, l] : lines) {
    const Micros amount = RoundDiv(static_cast<__int128>(l.seconds) * l.quantity * l.unit_price_micros, 3600);
    const double hours =
        static_cast<double>(l.seconds) * static_cast<double>(l.quantity) * catalog::GpuShare(l.model, l.profile) / 3600.0;
    const bool credit = l.loan == "lent";
    l.amount_micros = credit ? -amount : amount;
    // GPU-hours the project used: a borrower's count, a lender's do not change (its pool held them).
    l.allocated_gpu_hours = credit ? 0 : hours;
    inv.total_micros = AddMicros(inv.total_micros, l.amount_micros);
    inv.allocated_gpu_hours += l.allocated_gpu_hours;
    inv.lines.push_back(std::move(l));
  }
}

Cost CostOver(const std::vector<model::UsageRecord>& records, const PriceBook& prices, Time from_t, Time to_t) {
  __int128 micro_seconds = 0;  // Σ seconds x quantity x price: divided by 3600 once
  double gpu_seconds = 0;
  const int64_t to = Sec(to_t);
  ForEachCharge(records, prices, Sec(from_t), to, to, "", [&](const Charge& ch) {
    const double secs = static_cast<double>(ch.b - ch.a);
    if (ch.credit != nullptr) {
      const Micros price = ch.card ? UnitPrice(*ch.card, ch.credit->model, ch.credit->profile).value_or(0) : 0;
      micro_seconds -= static_cast<__int128>(ch.b - ch.a) * price;
      gpu_seconds -= secs * catalog::GpuShare(ch.credit->model, ch.credit->profile);
      return;
    }
    const model::UsageRecord::Held& h = *ch.held;
    const Micros price = ch.card ? UnitPrice(*ch.card, h.model, h.profile).value_or(0) : 0;
    micro_seconds += static_cast<__int128>(ch.b - ch.a) * h.count * price;
    gpu_seconds += secs * static_cast<double>(h.count) * catalog::GpuShare(h.model, h.profile);
  });
  return {RoundDiv(micro_seconds, 3600), gpu_seconds / 3600.0};
}

Micros LoansOver(std::string_view project, const std::vector<model::Loan>& loans, const PriceBook& prices, Time from,
                 Time to) {
  Invoice inv;
  inv.project = std::string(project);
  inv.period = {from, to};
  AddLoans(inv, loans, prices, to);
  return inv.total_micros;
}

absl::Status CheckBorrowing(const model::Project& project, const std::vector<model::UsageRecord>& records,
                            const std::vector<model::Loan>& loans, const PriceBook& prices, Time now) {
  if (!project.spec.budget || project.spec.budget->allow_overrun || project.spec.budget->amount_micros <= 0) {
    return absl::OkStatus();
  }
  const Micros budget = project.spec.budget->amount_micros;
  const Period month = MonthOf(now);
  const std::string& name = project.metadata.name;
  std::vector<model::UsageRecord> own;
  for (const model::UsageRecord& r : records) {
    if (r.metadata.ns == name) own.push_back(r);
  }
  const Micros pools = CostOver(own, prices, month.start, now).amount_micros;
  const Micros borrowed = LoansOver(name, loans, prices, month.start, now);
  const Micros spent = AddMicros(pools, borrowed);
  if (spent < budget) return absl::OkStatus();
  const std::string cur = prices.currency();
  return WithReason(absl::ResourceExhaustedError(fmt::format(
                        "project {} has spent {} of its {} budget for {} ({} on its pools, {} on loans): borrowing "
                        "waits until an operator raises the budget or allows overruns",
                        name, Money(spent, cur), Money(budget, cur), month.Name(), Money(pools, cur),
                        Money(borrowed, cur))),
                    "BudgetExceeded");
}

absl::Status CheckBudget(const model::Project& project, const std::vector<model::UsageRecord>& records,
                         const std::vector<model::PoolItem>& items, const PriceBook& prices, Time now,
                         const std::vector<model::Loan>& loans) {
  if (!project.spec.budget || project.spec.budget->allow_overrun) return absl::OkStatus();
  const model::Project::Budget& b = *project.spec.budget;
  const Period month = MonthOf(now);
  // What the pools hold, and what approved pools still wait for as if it came now: a pool that
  // waits for capacity costs nothing yet, but will once it has its devices.
  std::vector<model::UsageRecord> committed_records = records;
  for (const model::UsageRecord& r : records) {
    if (r.spec.end || !r.spec.held) continue;
    model::UsageRecord waiting;
    waiting.spec.start = now;
    for (const model::PoolItem& i : r.spec.items) {
      int64_t have = 0;
      for (const model::UsageRecord::Held& h : *r.spec.held) have += h.model == i.model && h.profile == i.profile ? h.count : 0;
      if (have < i.count) waiting.spec.items.push_back({i.model, i.profile, i.count - have});
    }
    if (!waiting.spec.items.empty()) committed_records.push_back(std::move(waiting));
  }
  Cost committed = CostOver(committed_records, prices, month.start, month.end);
  committed.amount_micros = AddMicros(committed.amount_micros, LoansOver(project.metadata.name, loans, prices, month.start, now));
  model::UsageRecord added;
  added.spec.items = items;
  added.spec.start = now;
  const Cost more = CostOver({added}, prices, month.start, month.end);
  const std::string name = project.metadata.name;
  if (b.amount_micros > 0 && AddMicros(committed.amount_micros, more.amount_micros) > b.amount_micros) {
    const std::string cur = prices.currency();
    return WithReason(
        absl::ResourceExhaustedError(fmt::format(
            "project {} budget for {} is {}: its pools will have cost {} by the month's end and this pool would "
            "add {}, leaving {} ({} over); an operator may raise the budget or allow overruns",
            name, month.Name(), Money(b.amount_micros, cur), Money(committed.amount_micros, cur),
            Money(more.amount_micros, cur),
            Money(std::max<__int128>(0, static_cast<__int128>(b.amount_micros) - committed.amount_micros), cur),
            Money(static_cast<__int128>(committed.amount_micros) + more.amount_micros - b.amount_micros, cur))),
        "BudgetExceeded");
  }
  if (b.gpu_hours > 0 && committed.gpu_hours + more.gpu_hours > static_cast<double>(b.gpu_hours) + 1e-9) {
    return WithReason(
        absl::ResourceExhaustedError(fmt::format(
            "project {} budget for {} is {} GPU-hours: its pools will have held {:.1f} by the month's end and this "
            "pool would add {:.1f} ({:.1f} over); an operator may raise the budget or allow overruns",
            name, month.Name(), b.gpu_hours, committed.gpu_hours, more.gpu_hours,
            committed.gpu_hours + more.gpu_hours - static_cast<double>(b.gpu_hours))),
        "BudgetExceeded");
  }
  return absl::OkStatus();
}

std::vector<BudgetAlert> BudgetAlerts(const model::Project& project, const std::vector<model::UsageRecord>& records,
                                      const PriceBook& prices, Time now, const std::vector<model::Loan>& loans) {
  std::vector<BudgetAlert> out;
  if (!project.spec.budget) return out;
  const Period month = MonthOf(now);
  // The pools' cost and GPU-hours, and the loans' net cost, from the month's start to `t`.
  auto cost_at = [&](Time t) {
    Cost c = CostOver(records, prices, month.start, t);
    if (!loans.empty()) c.amount_micros = AddMicros(c.amount_micros, LoansOver(project.metadata.name, loans, prices, month.start, t));
    return c;
  };
  const Cost spent = cost_at(now);
  struct Measure {
    std::string what;
    double spent;
    double budget;
    double (*of)(const Cost&);
  };
  const Measure measures[] = {
      {"money", static_cast<double>(spent.amount_micros), static_cast<double>(project.spec.budget->amount_micros),
       [](const Cost& c) { return static_cast<double>(c.amount_micros); }},
      {"GPU-hours", spent.gpu_hours, static_cast<double>(project.spec.budget->gpu_hours),
       [](const Cost& c) { return c.gpu_hours; }},
  };
  for (const Measure& m : measures) {
    if (m.budget <= 0) continue;
    for (int percent : {100, 80}) {
      const double threshold = m.budget * percent / 100.0;
      if (m.spent + 1e-9 < threshold) continue;
      // The first second at which spending reached the threshold (spending only grows while
      // nothing is credited; a credit at worst moves the moment found later).
      int64_t lo = Sec(month.start), hi = Sec(now);
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (m.of(cost_at(AtSec(mid))) + 1e-9 >= threshold) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      out.push_back({project.metadata.name, m.what, percent, m.spent, m.budget, AtSec(lo)});
      break;  // the highest threshold reached
    }
  }
  return out;
}

}  // namespace gpuaas::billing
