#include "billing/billing.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "billing/focus.h"
#include "gtest/gtest.h"

namespace gpuaas::billing {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr std::string_view kH200 = "H200-SXM-141GB";

Time T(std::string_view rfc3339) { return *ParseTime(rfc3339); }

model::RateCard Card(std::string name, std::string_view from, std::vector<model::RateCard::Price> prices,
                     model::RateCard::MigPricing mig = model::RateCard::MigPricing::kCompute) {
  model::RateCard c;
  c.metadata.name = std::move(name);
  c.spec.currency = "USD";
  c.spec.effective_from = T(from);
  c.spec.prices = std::move(prices);
  c.spec.mig_pricing = mig;
  return c;
}

model::UsageRecord Record(std::string pool, std::vector<model::PoolItem> items, std::string_view start,
                          std::optional<std::string_view> end = std::nullopt) {
  model::UsageRecord r;
  r.metadata.ns = "vision";
  r.metadata.name = pool;
  r.spec.pool = std::move(pool);
  r.spec.items = std::move(items);
  r.spec.start = T(start);
  if (end) r.spec.end = T(*end);
  return r;
}

const std::vector<model::RateCard> kCards = {
    Card("list-2026", "2026-01-01T00:00:00Z", {{std::string(kH200), "full", 3'600'000}})};

TEST(Billing, RoundingIsHalfAwayFromZeroOncePerLine) {
  EXPECT_EQ(RoundDiv(1800, 3600), 1);   // 0.5 -> 1
  EXPECT_EQ(RoundDiv(1799, 3600), 0);   // 0.4997 -> 0
  EXPECT_EQ(RoundDiv(-1800, 3600), -1);
  EXPECT_EQ(RoundDiv(5399, 3600), 1);
  EXPECT_EQ(RoundDiv(static_cast<__int128>(INT64_MAX) * 7, 7), INT64_MAX);  // exact in 128 bits
  EXPECT_EQ(RoundDiv(static_cast<__int128>(INT64_MAX) * 7200, 3600), INT64_MAX);  // saturates, never wraps
  EXPECT_EQ(AddMicros(INT64_MAX, 5), INT64_MAX);
  for (const Micros m : {Micros{0}, Micros{4'500'000}, Micros{1}, Micros{999'999'999'999'999'999}}) {
    EXPECT_EQ(ParseDecimal(Decimal(m)).value_or(-1), m) << m;
  }
  EXPECT_EQ(ParseDecimal("4.5").value_or(-1), 4'500'000);
  EXPECT_EQ(ParseDecimal("12").value_or(-1), 12'000'000);
  for (std::string_view bad : {"", "-1", "1.", ".5", "1.2345678", "1,5", "1e3", "1234567890123"}) {
    EXPECT_FALSE(ParseDecimal(bad).ok()) << bad;
  }
}

TEST(Billing, PeriodsAreCalendarMonthsInUtc) {
  const Period p = MonthOf(T("2026-02-14T10:00:00Z"));
  EXPECT_EQ(p.start, T("2026-02-01T00:00:00Z"));
  EXPECT_EQ(p.end, T("2026-03-01T00:00:00Z"));
  EXPECT_EQ(p.Name(), "2026-02");
  EXPECT_EQ(MonthOf(T("2026-12-31T23:59:59Z")).end, T("2027-01-01T00:00:00Z"));
  EXPECT_EQ(ParsePeriod("2028-02")->end - ParsePeriod("2028-02")->start, hours(24 * 29));  // a leap year
  for (std::string_view bad : {"2026-13", "2026-00", "26-11", "2026/11", "2026-1", "1969-12", "abcd-ef", "", "2026-1 ", "+026-11", "2026- 1"}) {
    EXPECT_FALSE(ParsePeriod(bad).ok()) << bad;
  }
  const std::vector<Period> months = MonthsBetween(T("2026-11-30T23:00:00Z"), T("2027-01-01T00:00:00Z"));
  ASSERT_EQ(months.size(), 2u);
  EXPECT_EQ(months[1].Name(), "2026-12");
}

TEST(Billing, APoolApprovedAndReleasedInsideOnePeriod) {
  const PriceBook prices(kCards);
  const std::vector<model::UsageRecord> records = {
      Record("train", {{std::string(kH200), "full", 2}}, "2026-11-03T10:00:00Z", "2026-11-03T11:30:00Z")};
  const Invoice draft = Rate("vision", records, prices, MonthOf(T("2026-11-10T00:00:00Z")), T("2026-11-10T00:00:00Z"));
  EXPECT_EQ(draft.state, InvoiceState::kDraft);
  EXPECT_EQ(draft.currency, "USD");
  ASSERT_EQ(draft.lines.size(), 1u);
  const Line& l = draft.lines[0];
  EXPECT_EQ(l.item(), "H200-SXM-141GB/full");
  EXPECT_EQ(l.quantity, 2);
  EXPECT_EQ(l.seconds, 5400);
  EXPECT_EQ(l.unit_price_micros, 3'600'000);
  EXPECT_EQ(l.amount_micros, 5400LL * 2 * 3'600'000 / 3600);  // 10.8 USD
  EXPECT_EQ(l.rate_card, "list-2026");
  EXPECT_DOUBLE_EQ(l.allocated_gpu_hours, 3.0);
  EXPECT_EQ(draft.total_micros, 10'800'000);
  const Invoice final_one = Rate("vision", records, prices, MonthOf(T("2026-11-10T00:00:00Z")), T("2026-12-01T00:00:00Z"));
  EXPECT_EQ(final_one.state, InvoiceState::kFinal);
  EXPECT_EQ(final_one.total_micros, draft.total_micros);
  // Another project's records are not on this invoice; the next month has nothing.
  EXPECT_TRUE(Rate("other", records, prices, MonthOf(T("2026-11-10T00:00:00Z")), T("2026-12-01T00:00:00Z")).lines.empty());
  EXPECT_TRUE(Rate("vision", records, prices, MonthOf(T("2026-12-10T00:00:00Z")), T("2026-12-20T00:00:00Z")).lines.empty());
}

// Each device from the later of the approval and its allocation: an hour of waiting is free, and
// the line says when its devices came.
TEST(Billing, DevicesAreBilledFromTheirAllocationNotTheApproval) {
  const PriceBook prices(kCards);
  model::UsageRecord r = Record("train", {{std::string(kH200), "full", 3}}, "2026-11-03T10:00:00Z", "2026-11-03T13:00:00Z");
  r.spec.held = std::vector<model::UsageRecord::Held>{
      {std::string(kH200), "full", 2, T("2026-11-03T11:00:00Z")},   // waited an hour for capacity
      {std::string(kH200), "full", 1, T("2026-11-03T12:30:00Z")}};  // the third came later still
  const Invoice inv = Rate("vision", {r}, prices, MonthOf(T("2026-11-10T00:00:00Z")), T("2026-11-10T00:00:00Z"));
  ASSERT_EQ(inv.lines.size(), 2u);
  int64_t device_seconds = 0;
  for (const Line& l : inv.lines) {
    device_seconds += l.quantity * l.seconds;
    EXPECT_NE(l.description.find("billed from the allocation at 2026-11-03T1"), std::string::npos) << l.description;
    EXPECT_NE(l.description.find("not the approval at 2026-11-03T10:00:00Z"), std::string::npos) << l.description;
  }
  EXPECT_EQ(device_seconds, 2 * 7200 + 1 * 1800);
  EXPECT_EQ(inv.total_micros, (2 * 7200 + 1800) * 1000);
  // Nothing held, nothing billed; a meter from before `held` bills its items from its start.
  r.spec.held->clear();
  EXPECT_TRUE(Rate("vision", {r}, prices, MonthOf(T("2026-11-10T00:00:00Z")), T("2026-11-10T00:00:00Z")).lines.empty());
  r.spec.held.reset();
  EXPECT_EQ(Rate("vision", {r}, prices, MonthOf(T("2026-11-10T00:00:00Z")), T("2026-11-10T00:00:00Z")).total_micros,
            3 * 10800 * 1000);
  // A device held since before the approval (clock skew) is billed from the approval only.
  r.spec.held = std::vector<model::UsageRecord::Held>{{std::string(kH200), "full", 1, T("2026-11-03T09:00:00Z")}};
  EXPECT_EQ(Rate("vision", {r}, prices, MonthOf(T("2026-11-10T00:00:00Z")), T("2026-11-10T00:00:00Z")).total_micros,
            10800 * 1000);
}

// A budget counts what approved pools still wait for as if it came now: a waiting pool costs
// nothing yet, but the budget must have room for it when it is allocated.
TEST(Billing, ABudgetCountsTheDevicesApprovedPoolsStillWaitFor) {
  const PriceBook prices(kCards);
  model::Project p;
  p.metadata.name = "vision";
  p.spec.budget = model::Project::Budget{100'000'000, 0, false};  // 100 USD a month
  const Time last_day = T("2026-11-30T00:00:00Z");                // 24 h left: 86.4 USD a GPU
  const std::vector<model::PoolItem> one = {{std::string(kH200), "full", 1}};
  model::UsageRecord waiting = Record("a", one, "2026-11-29T00:00:00Z");
  waiting.spec.held.emplace();  // approved, nothing allocated yet
  EXPECT_TRUE(Rate("vision", {waiting}, prices, MonthOf(last_day), last_day).lines.empty());
  EXPECT_FALSE(CheckBudget(p, {waiting}, one, prices, last_day).ok()) << "86.4 waiting + 86.4 asked > 100";
  waiting.spec.end = last_day;  // released while it waited: it will never cost anything
  EXPECT_TRUE(CheckBudget(p, {waiting}, one, prices, last_day).ok());
}

TEST(Billing, APoolSpanningAMonthBoundaryIsSplitThere) {
  const PriceBook prices(kCards);
  const std::vector<model::UsageRecord> open = {
      Record("train", {{std::string(kH200), "full", 1}}, "2026-11-30T23:00:00Z")};  // still running
  const Time now = T("2026-12-01T01:30:00Z");
  const Invoice nov = Rate("vision", open, prices, MonthOf(T("2026-11-30T00:00:00Z")), now);
  const Invoice dec = Rate("vision", open, prices, MonthOf(now), now);
  ASSERT_EQ(nov.lines.size(), 1u);
  ASSERT_EQ(dec.lines.size(), 1u);
  EXPECT_EQ(nov.state, InvoiceState::kFinal);
  EXPECT_EQ(nov.lines[0].seconds, 3600);
  EXPECT_EQ(nov.lines[0].end, T("2026-12-01T00:00:00Z"));
  EXPECT_EQ(dec.state, InvoiceState::kDraft);
  EXPECT_EQ(dec.lines[0].seconds, 5400);  // to now
  EXPECT_EQ(dec.lines[0].start, T("2026-12-01T00:00:00Z"));
  EXPECT_EQ(nov.total_micros + dec.total_micros, RoundDiv(9000LL * 3'600'000, 3600));
}

TEST(Billing, ARateCardChangeMidPoolSplitsItsLines) {
  std::vector<model::RateCard> cards = kCards;
  cards.push_back(Card("list-2026-11b", "2026-11-15T12:00:00Z", {{std::string(kH200), "full", 7'200'000}}));
  cards.push_back(Card("future", "2027-01-01T00:00:00Z", {{std::string(kH200), "full", 1}}));
  const PriceBook prices(cards);
  EXPECT_EQ(prices.At(T("2026-11-15T11:59:59Z"))->metadata.name, "list-2026");
  EXPECT_EQ(prices.At(T("2026-11-15T12:00:00Z"))->metadata.name, "list-2026-11b");
  EXPECT_EQ(prices.At(T("2025-12-31T00:00:00Z")), nullptr);
  const std::vector<model::UsageRecord> records = {
      Record("train", {{std::string(kH200), "full", 1}}, "2026-11-15T11:00:00Z", "2026-11-15T14:00:00Z")};
  const Invoice inv = Rate("vision", records, prices, MonthOf(T("2026-11-15T00:00:00Z")), T("2026-12-02T00:00:00Z"));
  ASSERT_EQ(inv.lines.size(), 2u);
  EXPECT_EQ(inv.lines[0].rate_card, "list-2026");
  EXPECT_EQ(inv.lines[0].seconds, 3600);
  EXPECT_EQ(inv.lines[0].amount_micros, 3'600'000);
  EXPECT_EQ(inv.lines[1].rate_card, "list-2026-11b");
  EXPECT_EQ(inv.lines[1].seconds, 7200);
  EXPECT_EQ(inv.lines[1].amount_micros, 14'400'000);
  EXPECT_EQ(inv.total_micros, 18'000'000);
}

TEST(Billing, MigInstancesArePricedByComputeOrMemorySlicesOrExplicitly) {
  const std::string h200(kH200);
  const model::RateCard compute = Card("c", "2026-01-01T00:00:00Z", {{h200, "full", 7'000'000}});
  const model::RateCard memory =
      Card("m", "2026-01-01T00:00:00Z", {{h200, "full", 7'000'000}}, model::RateCard::MigPricing::kMemory);
  const model::RateCard listed = Card("e", "2026-01-01T00:00:00Z", {{h200, "full", 7'000'000}, {h200, "1g.18gb", 1'234'567}},
                                      model::RateCard::MigPricing::kExplicit);
  // H200: 7 compute and 8 memory slices; 3g.71gb holds 3 and 4, 1g.18gb 1 and 1, 1g.35gb 1 and 2.
  EXPECT_EQ(UnitPrice(compute, h200, "3g.71gb"), 3'000'000);
  EXPECT_EQ(UnitPrice(memory, h200, "3g.71gb"), 3'500'000);
  EXPECT_EQ(UnitPrice(compute, h200, "1g.18gb"), 1'000'000);
  EXPECT_EQ(UnitPrice(memory, h200, "1g.18gb"), 875'000);
  EXPECT_EQ(UnitPrice(memory, h200, "1g.35gb"), 1'750'000);
  EXPECT_EQ(UnitPrice(compute, h200, "7g.141gb"), 7'000'000);
  EXPECT_EQ(UnitPrice(listed, h200, "1g.18gb"), 1'234'567);
  EXPECT_EQ(UnitPrice(listed, h200, "3g.71gb"), std::nullopt);  // explicit: only what is listed
  EXPECT_EQ(UnitPrice(compute, "H100-SXM5-80GB", "full"), std::nullopt);  // another model
  // A price that does not divide evenly is rounded to a whole micro-unit per device-hour.
  const model::RateCard odd = Card("o", "2026-01-01T00:00:00Z", {{h200, "full", 1'000'000}});
  EXPECT_EQ(UnitPrice(odd, h200, "2g.35gb"), 285'714);  // 2/7 of 1 = 0.2857142...

  // An item the card does not price is on the invoice, unpriced and said so.
  const std::vector<model::UsageRecord> records = {
      Record("mig", {{h200, "3g.71gb", 4}, {h200, "1g.18gb", 2}}, "2026-11-01T00:00:00Z", "2026-11-01T01:00:00Z")};
  const Invoice inv = Rate("vision", records, PriceBook({listed}), MonthOf(T("2026-11-01T00:00:00Z")), T("2026-12-01T00:00:00Z"));
  ASSERT_EQ(inv.lines.size(), 2u);
  EXPECT_EQ(inv.lines[0].item(), "H200-SXM-141GB/1g.18gb");
  EXPECT_EQ(inv.lines[0].amount_micros, 2 * 1'234'567);
  EXPECT_EQ(inv.lines[1].item(), "H200-SXM-141GB/3g.71gb");
  EXPECT_EQ(inv.lines[1].amount_micros, 0);
  EXPECT_EQ(inv.lines[1].description, "rate card e does not price H200-SXM-141GB/3g.71gb");
  EXPECT_NEAR(inv.lines[1].allocated_gpu_hours, 4 * 3.0 / 7, 1e-12);
  // Before any card is in force nothing is priced either.
  const Invoice early = Rate("vision", records, PriceBook({}), MonthOf(T("2026-11-01T00:00:00Z")), T("2026-12-01T00:00:00Z"));
  EXPECT_EQ(early.total_micros, 0);
  EXPECT_EQ(early.lines[0].description, "no rate card in force");
}

TEST(Billing, AHardwareFaultIsCreditedUntilTheDeviceIsReplaced) {
  const PriceBook prices(kCards);
  model::UsageRecord r =
      Record("train", {{std::string(kH200), "full", 2}}, "2026-11-03T00:00:00Z", "2026-11-03T10:00:00Z");
  r.spec.credits.push_back({"GPU-1", std::string(kH200), "full", "Xid79", T("2026-11-03T02:00:00Z"), T("2026-11-03T02:30:00Z")});
  // Still out of service at release: credited until the release.
  r.spec.credits.push_back({"GPU-2", std::string(kH200), "full", "MemoryErrors", T("2026-11-03T09:00:00Z"), std::nullopt});
  const Invoice inv = Rate("vision", {r}, prices, MonthOf(T("2026-11-03T00:00:00Z")), T("2026-12-01T00:00:00Z"));
  ASSERT_EQ(inv.lines.size(), 3u);
  EXPECT_EQ(inv.lines[0].category, "Usage");
  EXPECT_EQ(inv.lines[0].amount_micros, 2 * 10 * 3'600'000);
  EXPECT_EQ(inv.lines[1].category, "Credit");
  EXPECT_EQ(inv.lines[1].seconds, 1800);
  EXPECT_EQ(inv.lines[1].amount_micros, -1'800'000);
  EXPECT_NE(inv.lines[1].description.find("Xid79"), std::string::npos);
  EXPECT_EQ(inv.lines[2].seconds, 3600);
  EXPECT_EQ(inv.lines[2].amount_micros, -3'600'000);
  EXPECT_EQ(inv.total_micros, 72'000'000 - 5'400'000);
  EXPECT_EQ(CostOver({r}, prices, T("2026-11-01T00:00:00Z"), T("2026-12-01T00:00:00Z")).amount_micros, inv.total_micros);
}

TEST(Billing, ACreditNoteIsALineOfTheMonthItIsIssuedIn) {
  model::CreditNote n;
  n.metadata.ns = "vision";
  n.metadata.name = "2026-10-1";
  n.spec = {"2026-10", 2'500'000, "a slow week", T("2026-11-05T09:00:00Z"), "ops"};
  const std::vector<model::UsageRecord> records = {
      Record("train", {{std::string(kH200), "full", 1}}, "2026-11-01T00:00:00Z", "2026-11-01T10:00:00Z")};
  Invoice nov = Rate("vision", records, PriceBook(kCards), MonthOf(T("2026-11-01T00:00:00Z")), T("2026-12-01T00:00:00Z"));
  AddCreditNotes(nov, {n});
  ASSERT_EQ(nov.lines.size(), 2u);
  EXPECT_EQ(nov.lines[1].amount_micros, -2'500'000);
  EXPECT_EQ(nov.lines[1].corrects, "2026-10");
  EXPECT_EQ(nov.total_micros, 36'000'000 - 2'500'000);
  const std::string csv = FocusCsv({nov});
  EXPECT_NE(csv.find("-2.500000,gpuaas,gpuaas,USD,2026-12-01T00:00:00Z,2026-11-01T00:00:00Z,Credit,Correction,"),
            std::string::npos)
      << csv;
  // Not on another month's invoice.
  Invoice dec = Rate("vision", records, PriceBook(kCards), MonthOf(T("2026-12-01T00:00:00Z")), T("2026-12-02T00:00:00Z"));
  AddCreditNotes(dec, {n});
  EXPECT_TRUE(dec.lines.empty());
}

TEST(Billing, ABudgetRefusesAPoolThatWouldPassItAndRaisesAlerts) {
  const PriceBook prices(kCards);
  model::Project p;
  p.metadata.name = "vision";
  p.spec.budget = model::Project::Budget{100'000'000, 0, false};  // 100 USD a month
  // One full H200 (3.6 USD/h) since the 1st: by the 30th at 00:00 it will have cost 3.6 x 720 h.
  const Time now = T("2026-11-02T00:00:00Z");
  const std::vector<model::UsageRecord> none;
  const std::vector<model::PoolItem> one = {{std::string(kH200), "full", 1}};
  // A pool from the 2nd to the month's end: 29 days x 24 h x 3.6 = 2505.6 USD > 100.
  absl::Status refused = CheckBudget(p, none, one, prices, now);
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(refused.message()).find("budget for 2026-11 is 100.000000 USD"), std::string::npos) << refused;
  EXPECT_NE(std::string(refused.message()).find("would add 2505.600000 USD"), std::string::npos) << refused;
  // Allowed late in the month, when the rest of it costs less than the budget.
  const Time last_day = T("2026-11-30T00:00:00Z");
  EXPECT_TRUE(CheckBudget(p, none, one, prices, last_day).ok());  // 24 h: 86.4 USD
  // Pools already running count until the month's end.
  const std::vector<model::UsageRecord> running = {Record("a", one, "2026-11-30T00:00:00Z")};
  EXPECT_FALSE(CheckBudget(p, running, one, prices, last_day).ok());  // 86.4 + 86.4
  // An operator's overrun flag lets it through; no budget, no check.
  p.spec.budget->allow_overrun = true;
  EXPECT_TRUE(CheckBudget(p, running, one, prices, last_day).ok());
  model::Project unlimited;
  EXPECT_TRUE(CheckBudget(unlimited, running, one, prices, now).ok());
  // GPU-hours: a 3g.71gb instance counts 3/7 of a GPU.
  model::Project hours_only;
  hours_only.metadata.name = "h";
  hours_only.spec.budget = model::Project::Budget{0, 10, false};
  const std::vector<model::PoolItem> mig = {{std::string(kH200), "3g.71gb", 1}};
  EXPECT_TRUE(CheckBudget(hours_only, none, mig, prices, T("2026-11-30T01:00:00Z")).ok());  // 23 h x 3/7 = 9.9
  EXPECT_FALSE(CheckBudget(hours_only, none, mig, prices, T("2026-11-30T00:00:00Z")).ok());  // 24 h x 3/7 = 10.3

  // Alerts: 80% of 100 USD is reached after 22 h 13 m 20 s of one GPU, 100% after 27 h 46 m 40 s.
  p.spec.budget->allow_overrun = false;
  const std::vector<model::UsageRecord> spending = {Record("a", one, "2026-11-01T00:00:00Z")};
  EXPECT_TRUE(BudgetAlerts(p, spending, prices, T("2026-11-01T22:00:00Z")).empty());
  std::vector<BudgetAlert> at80 = BudgetAlerts(p, spending, prices, T("2026-11-01T23:00:00Z"));
  ASSERT_EQ(at80.size(), 1u);
  EXPECT_EQ(at80[0].percent, 80);
  EXPECT_EQ(at80[0].since, T("2026-11-01T22:13:20Z"));
  std::vector<BudgetAlert> at100 = BudgetAlerts(p, spending, prices, T("2026-11-02T12:00:00Z"));
  ASSERT_EQ(at100.size(), 1u);
  EXPECT_EQ(at100[0].percent, 100);
  EXPECT_EQ(at100[0].since, T("2026-11-02T03:46:40Z"));
  EXPECT_EQ(at100[0].what, "money");
}

// Loans count against money budgets: the borrower's charge is spending (the borrowing check,
// alerts, the pool check), the lender's credit takes from its spending, and another project's
// records are not the borrower's.
TEST(Billing, LoansCountAgainstTheBorrowersBudget) {
  const PriceBook prices(kCards);
  model::Loan l;
  l.spec.borrower = "vision";
  l.spec.workload = "sweep";
  l.spec.lender = "nlp";
  l.spec.pool = "train";
  l.spec.model = std::string(kH200);
  l.spec.profile = "full";
  l.spec.devices = {{"GPU-1", ""}};
  l.spec.start = T("2026-11-01T00:00:00Z");
  const std::vector<model::Loan> loans = {l};
  // 40% of 3.6 USD/h: 1.44 USD/h, 72 USD for 50 h; the lender is credited as much.
  const Time later = T("2026-11-03T02:00:00Z");
  EXPECT_EQ(LoansOver("vision", loans, prices, T("2026-11-01T00:00:00Z"), later), 72'000'000);
  EXPECT_EQ(LoansOver("nlp", loans, prices, T("2026-11-01T00:00:00Z"), later), -72'000'000);
  EXPECT_EQ(LoansOver("web", loans, prices, T("2026-11-01T00:00:00Z"), later), 0);

  model::Project p;
  p.metadata.name = "vision";
  p.spec.budget = model::Project::Budget{100'000'000, 0, false};
  EXPECT_TRUE(CheckBorrowing(p, {}, loans, prices, later).ok()) << "72 of 100 spent";
  // A pool since the 2nd: 26 h x 3.6 = 93.6 USD, and the loan's 72.
  const std::vector<model::UsageRecord> pool = {Record("a", {{std::string(kH200), "full", 1}}, "2026-11-02T00:00:00Z")};
  absl::Status refused = CheckBorrowing(p, pool, loans, prices, later);
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(refused.message()).find("has spent 165.600000 USD of its 100.000000 USD budget for 2026-11 "
                                                "(93.600000 USD on its pools, 72.000000 USD on loans)"),
            std::string::npos)
      << refused;
  std::vector<model::UsageRecord> theirs = pool;
  theirs[0].metadata.ns = "nlp";
  EXPECT_TRUE(CheckBorrowing(p, theirs, loans, prices, later).ok()) << "nlp's pool is not vision's spending";
  p.spec.budget->allow_overrun = true;
  EXPECT_TRUE(CheckBorrowing(p, pool, loans, prices, later).ok());
  p.spec.budget->allow_overrun = false;

  // The loan alone reaches 100 USD after 250,000 s at 400 micro-units a second.
  std::vector<BudgetAlert> alerts = BudgetAlerts(p, {}, prices, T("2026-11-04T00:00:00Z"), loans);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].percent, 100);
  EXPECT_EQ(alerts[0].since, T("2026-11-03T21:26:40Z"));
  EXPECT_TRUE(BudgetAlerts(p, {}, prices, T("2026-11-04T00:00:00Z")).empty()) << "without the loan, nothing spent";
  // A new pool on the last day (86.4 USD to the month's end) passes alone, not after 72 USD of loans.
  const std::vector<model::PoolItem> one = {{std::string(kH200), "full", 1}};
  const Time last_day = T("2026-11-30T00:00:00Z");
  l.spec.end = later;
  EXPECT_TRUE(CheckBudget(p, {}, one, prices, last_day).ok());
  EXPECT_FALSE(CheckBudget(p, {}, one, prices, last_day, {l}).ok());
}

// Random pool histories: every approved second of every item is billed exactly once, across
// months and rate-card changes, and the lines add up to the rated segments to the micro-unit.
TEST(Billing, EveryApprovedSecondIsBilledExactlyOnce) {
  std::mt19937_64 rng(20261203);
  const std::vector<std::string> profiles = {"full", "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"};
  const Time t0 = T("2026-01-01T00:00:00Z");
  for (int round = 0; round < 40; ++round) {
    std::vector<model::RateCard> cards;
    for (int c = 0; c < 1 + static_cast<int>(rng() % 5); ++c) {
      cards.push_back(Card("card-" + std::to_string(c), FormatTime(t0 + seconds(rng() % (200 * 86400))),
                           {{std::string(kH200), "full", static_cast<int64_t>(rng() % 10'000'000)},
                            {std::string(kH200), "1g.18gb", static_cast<int64_t>(rng() % 2'000'000)}},
                           static_cast<model::RateCard::MigPricing>(rng() % 3)));
    }
    const PriceBook prices(cards);
    std::vector<model::UsageRecord> records;
    const Time now = t0 + seconds(250 * 86400);
    for (int i = 0; i < 100; ++i) {
      model::UsageRecord r;
      r.metadata.ns = "p";
      r.spec.pool = "pool-" + std::to_string(i);
      const int n_items = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < n_items; ++k) {
        r.spec.items.push_back({std::string(kH200), profiles[(i + k) % profiles.size()], 1 + static_cast<int64_t>(rng() % 8)});
      }
      r.spec.start = t0 + seconds(rng() % (240 * 86400));
      if (rng() % 4 != 0) r.spec.end = r.spec.start + seconds(rng() % (60 * 86400));
      records.push_back(std::move(r));
    }
    // Billed device-seconds per pool item, over every month that any record touches.
    std::map<std::pair<std::string, std::string>, int64_t> billed;
    __int128 exact_sum = 0;  // Σ seconds x quantity x price over lines, x 3600
    Micros total = 0;
    size_t n_lines = 0;
    for (const Period& month : MonthsBetween(t0, now)) {
      const Invoice inv = Rate("p", records, prices, month, now);
      Micros sum = 0;
      for (const Line& l : inv.lines) {
        ASSERT_EQ(l.category, "Usage");
        billed[{l.pool, l.profile}] += l.seconds * l.quantity;
        EXPECT_EQ(l.amount_micros, RoundDiv(static_cast<__int128>(l.seconds) * l.quantity * l.unit_price_micros, 3600));
        EXPECT_GE(l.start, month.start);
        EXPECT_LE(l.end, month.end);
        exact_sum += static_cast<__int128>(l.seconds) * l.quantity * l.unit_price_micros;
        sum += l.amount_micros;
        ++n_lines;
      }
      EXPECT_EQ(inv.total_micros, sum);
      total += sum;
    }
    for (const model::UsageRecord& r : records) {
      const int64_t held =
          std::chrono::duration_cast<seconds>(std::min(r.spec.end.value_or(now), now) - r.spec.start).count();
      for (const model::PoolItem& item : r.spec.items) {
        EXPECT_EQ((billed[{r.spec.pool, item.profile}]), held * item.count) << r.spec.pool << " " << item.profile;
      }
    }
    // Rounded once per line: the total is within half a micro-unit per line of the exact sum,
    // and it equals the segments rated without rounding, to the same bound.
    const __int128 diff = static_cast<__int128>(total) * 3600 - exact_sum;
    EXPECT_LE(diff < 0 ? -diff : diff, static_cast<__int128>(n_lines) * 1800);
    const Cost cost = CostOver(records, prices, t0, now);
    EXPECT_LE(std::abs(cost.amount_micros - total), static_cast<Micros>(n_lines));
  }
}

TEST(Focus, TheExportCarriesTheInvoicesAmountsUnderFocusColumns) {
  // The column list kept with its source in the repository.
  const std::string path = "docs/billing/focus-1.2-columns.txt";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " (run from the repository root)";
  std::vector<std::string> listed;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') listed.push_back(line);
  }
  const std::span<const std::string_view> columns = FocusColumns();
  ASSERT_EQ(listed.size(), columns.size());
  for (size_t i = 0; i < listed.size(); ++i) EXPECT_EQ(listed[i], columns[i]);
  // Every column the FOCUS 1.2 cost export must carry here.
  for (std::string_view must : {"BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency",
                                "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
                                "ChargeCategory", "ChargeClass", "ChargeDescription", "ResourceId", "ResourceName",
                                "ResourceType", "ServiceName", "ServiceCategory", "ProviderName", "PublisherName",
                                "InvoiceIssuerName", "SubAccountId", "SubAccountName", "PricingQuantity",
                                "PricingUnit", "ConsumedQuantity", "ConsumedUnit", "SkuId", "SkuPriceId",
                                "ListUnitPrice", "RegionId", "Tags"}) {
    EXPECT_NE(std::find(columns.begin(), columns.end(), must), columns.end()) << must;
  }

  model::UsageRecord r =
      Record("train, \"big\"", {{std::string(kH200), "3g.71gb", 3}}, "2026-11-03T00:00:00Z", "2026-11-03T01:00:01Z");
  r.spec.credits.push_back({"GPU-1", std::string(kH200), "3g.71gb", "Xid79", T("2026-11-03T00:10:00Z"), T("2026-11-03T00:20:00Z")});
  const Invoice inv = Rate("vision", {r}, PriceBook(kCards), MonthOf(T("2026-11-03T00:00:00Z")), T("2026-12-01T00:00:00Z"));
  const std::string csv = FocusCsv({inv});
  std::istringstream lines(csv);
  std::string header;
  std::getline(lines, header);
  EXPECT_EQ(header.substr(0, 32), "BilledCost,BillingAccountId,Bill");
  // Rows: the usage and the credit, with the invoice's amounts as decimals; the pool's name,
  // which holds a comma and quotes, is quoted.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  ASSERT_EQ(inv.lines.size(), 2u);
  EXPECT_EQ(inv.lines[0].amount_micros, RoundDiv(3601LL * 3 * 1'542'857, 3600));
  EXPECT_EQ(csv.find("\n" + Decimal(inv.lines[0].amount_micros) + ",gpuaas,gpuaas,USD,2026-12-01T00:00:00Z,"
                     "2026-11-01T00:00:00Z,Usage,,"),
            header.size());
  EXPECT_NE(csv.find("\n" + Decimal(inv.lines[1].amount_micros) + ",gpuaas,gpuaas,USD"), std::string::npos);
  EXPECT_EQ(Decimal(inv.lines[1].amount_micros)[0], '-');
  EXPECT_NE(csv.find("\"vision/train, \"\"big\"\"\""), std::string::npos) << csv;
  EXPECT_EQ(Decimal(-1), "-0.000001");
  EXPECT_EQ(Decimal(12'345'678), "12.345678");
}

}  // namespace
}  // namespace gpuaas::billing
