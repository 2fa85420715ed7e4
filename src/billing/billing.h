// Billing: rating the meter (UsageRecords) with rate cards into invoices, budgets and their
// projections. Domain code: it takes objects and a time and returns data; no I/O, no clock.
//
// Money is integer micro-units (millionths) of the rate card's currency, never floating point.
// Rounding is stated once and applied once per invoice line:
//
//   amountMicros = seconds x quantity x unitPriceMicros / 3600, rounded half away from zero
//
// computed exactly in 128-bit integers. A MIG price the card does not list is derived from the
// model's full-GPU price (compute: x compute slices / the model's; memory: x memory slices / the
// model's) and rounded the same way to a whole micro-unit per device-hour: it is a price, and
// every line stays reproducible from the figures it shows.
//
// Periods are calendar months in UTC. Each device a pool holds is billed from the later of the
// pool's approval and the device's allocation to the pool, to the release request (or to now),
// to the second, at the card in force at each second (the latest effectiveFrom not after it): a
// pool waiting for capacity pays nothing for what it has not got. A rejected pool has no record
// and is never billed.
#ifndef GPUAAS_BILLING_BILLING_H_
#define GPUAAS_BILLING_BILLING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "model/billing.h"
#include "model/pool.h"

namespace gpuaas::billing {

using Micros = int64_t;

// num / den rounded half away from zero; den > 0. Saturates at the range of Micros.
Micros RoundDiv(__int128 num, __int128 den);
// a + b, saturating (amounts past 9.2 x 10^12 currency units are not real, but must not wrap).
Micros AddMicros(Micros a, Micros b);

// Micro-units as a decimal amount of the currency: 1234500000 -> "1234.500000".
std::string Decimal(Micros micros);
// What Decimal writes, back: "4.5" -> 4500000; not negative, at most six decimals and 12 digits
// before the point. InvalidArgument otherwise.
absl::StatusOr<Micros> ParseDecimal(std::string_view text);

// [start, end): a calendar month in UTC.
struct Period {
  Time start{};
  Time end{};
  std::string Name() const;  // "2026-11"
  friend bool operator==(const Period&, const Period&) = default;
};
Period MonthOf(Time t);
// "YYYY-MM" (years 1970..2199); InvalidArgument otherwise.
absl::StatusOr<Period> ParsePeriod(std::string_view text);
// The months that [from, to) touches, in order.
std::vector<Period> MonthsBetween(Time from, Time to);

// Rate cards in force over time: the card at t is the latest effectiveFrom not after t (ties:
// the later name).
class PriceBook {
 public:
  explicit PriceBook(std::vector<model::RateCard> cards);
  const model::RateCard* At(Time t) const;
  // The moments in (from, to) at which the card in force changes.
  std::vector<Time> ChangesWithin(Time from, Time to) const;
  const std::vector<model::RateCard>& cards() const { return cards_; }
  // The currency of the cards ("" when there are none; all cards share one).
  std::string currency() const { return cards_.empty() ? "" : cards_.back().spec.currency; }

 private:
  std::vector<model::RateCard> cards_;  // by effectiveFrom, then name
};

// What one device-hour of model/profile costs on `card`; nullopt when the card does not price it
// (explicit MIG pricing of an unlisted profile, or no full-GPU price to derive from).
std::optional<Micros> UnitPrice(const model::RateCard& card, std::string_view model, std::string_view profile);

struct Line {
  std::string pool;
  std::string model;
  std::string profile;
  std::string category = "Usage";  // "Usage", or "Credit" for a fault credit (negative)
  std::string description;         // the credit's reason; why a line is unpriced
  std::string rate_card;           // empty: no card priced it (amount 0)
  int64_t quantity = 0;            // devices
  int64_t seconds = 0;
  Micros unit_price_micros = 0;    // per device-hour
  Micros amount_micros = 0;
  Time start{};                    // the span the line covers: its first second
  Time end{};                      // and the end of its last
  double allocated_gpu_hours = 0;  // quantity x seconds x catalog::GpuShare / 3600 (negative for credits)
  std::string corrects;            // a credit note's line: the month it corrects ("2026-11")
  std::string loan;                // "borrowed" (the borrower's charge) or "lent" (the lender's credit)
  std::optional<double> used_gpu_hours;  // from monitoring, filled in by the caller
  std::string item() const { return model + "/" + profile; }
};

enum class InvoiceState { kDraft, kFinal };
std::string_view ToString(InvoiceState s);

struct Invoice {
  std::string project;
  Period period;
  InvoiceState state = InvoiceState::kDraft;
  std::string currency;
  std::vector<Line> lines;
  Micros total_micros = 0;
  double allocated_gpu_hours = 0;
};

// The invoice of `project` for `period` as of `now`: records still open run to `now`; a period
// that has ended by `now` is final. Lines are per pool, item and rate card, each rounded once;
// credits are negative lines of one device.
Invoice Rate(std::string_view project, const std::vector<model::UsageRecord>& records, const PriceBook& prices,
             const Period& period, Time now);

// Adds the credit notes issued within the invoice's month as credit lines (one each, negative,
// naming the month corrected) and updates the total.
void AddCreditNotes(Invoice& invoice, const std::vector<model::CreditNote>& notes);

// What the loans (model::Loan receipts) of the invoice's month come to for its project, as lines
// of their own: "borrowed" (category Usage) where it borrowed, "lent" (category Credit, negative)
// where its pools lent. A device-second is priced at the card in force then, at the card's
// preemptiblePricePercent of the device's price (rounded once to a whole micro-unit per
// device-hour, as a derived MIG price is); lines group the same way on both sides (lender pool,
// borrower, item, card, devices), so that the borrower's charge and the lender's credit are the
// same amount to the micro-unit. Open loans run to `now`. Updates the total.
void AddLoans(Invoice& invoice, const std::vector<model::Loan>& loans, const PriceBook& prices, Time now);

// What `project`'s loans come to over [from, to): its borrowed charges less its lent credits, as
// its invoice's loan lines say (AddLoans). Open loans run to `to`.
Micros LoansOver(std::string_view project, const std::vector<model::Loan>& loans, const PriceBook& prices, Time from,
                 Time to);

// Cost and allocated GPU-hours of `records` over [from, to), open records taken to run through
// `to` (a projection when `to` is ahead).
struct Cost {
  Micros amount_micros = 0;
  double gpu_hours = 0;
};
Cost CostOver(const std::vector<model::UsageRecord>& records, const PriceBook& prices, Time from, Time to);

// The budget check of a new pool (or an approval): what the project's pools will have cost by
// the month's end, with `items` added from `now` (and the devices approved pools still wait for
// taken as allocated now), against the budget. OK when under it, when
// overruns are allowed, or without a budget; else ResourceExhausted (reason BudgetExceeded) with
// the figures. `records` are the project's.
// What the project's loans came to this month so far (LoansOver) counts as committed too.
absl::Status CheckBudget(const model::Project& project, const std::vector<model::UsageRecord>& records,
                         const std::vector<model::PoolItem>& items, const PriceBook& prices, Time now,
                         const std::vector<model::Loan>& loans = {});

// Whether a borrower of `project` may start borrowing now: OK unless the project's money budget
// (without overruns) is spent this month, its pools and its loans so far together; then
// ResourceExhausted (reason BudgetExceeded) with the figures. `records` and `loans` may be
// anyone's: the project's are picked.
absl::Status CheckBorrowing(const model::Project& project, const std::vector<model::UsageRecord>& records,
                            const std::vector<model::Loan>& loans, const PriceBook& prices, Time now);

// A budget alert: spending this month has reached 80% or 100% of a budget.
struct BudgetAlert {
  std::string project;
  std::string what;      // "money" or "GPU-hours"
  int percent = 0;       // 80 or 100
  double spent = 0;      // micro-units or GPU-hours so far this month
  double budget = 0;
  Time since{};          // when spending crossed the threshold
};
// Money spent counts the project's loans (LoansOver): borrowed charges, less lent credits.
std::vector<BudgetAlert> BudgetAlerts(const model::Project& project, const std::vector<model::UsageRecord>& records,
                                      const PriceBook& prices, Time now, const std::vector<model::Loan>& loans = {});

}  // namespace gpuaas::billing

#endif  // GPUAAS_BILLING_BILLING_H_
