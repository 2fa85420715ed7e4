#include "billing/focus.h"

#include <array>

#include "fmt/format.h"

namespace gpuaas::billing {
namespace {

// Alphabetical, as FOCUS lists them; FocusCsv writes its fields in this order.
constexpr std::array<std::string_view, 35> kAll = {
    "BilledCost",        "BillingAccountId",  "BillingAccountName", "BillingCurrency",   "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory",   "ChargeClass",        "ChargeDescription", "ChargeFrequency",
    "ChargePeriodEnd",   "ChargePeriodStart", "ConsumedQuantity",   "ConsumedUnit",      "ContractedCost",
    "ContractedUnitPrice", "EffectiveCost",   "InvoiceIssuerName",  "ListCost",          "ListUnitPrice",
    "PricingQuantity",   "PricingUnit",       "ProviderName",       "PublisherName",     "RegionId",
    "ResourceId",        "ResourceName",      "ResourceType",       "ServiceCategory",   "ServiceName",
    "SkuId",             "SkuPriceId",        "SubAccountId",       "SubAccountName",    "Tags",
};

// RFC 4180: quoted when it holds a comma, a quote or a line break; quotes doubled.
std::string Csv(std::string_view v) {
  if (v.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(v);
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Row(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += Csv(fields[i]);
  }
  return out + "\n";
}

// A quantity with up to nine decimals, trailing zeros dropped.
std::string Quantity(double v) {
  std::string s = fmt::format("{:.9f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

// JSON string contents (the Tags column is a JSON object).
std::string JsonText(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::span<const std::string_view> FocusColumns() { return kAll; }

std::string FocusCsv(const std::vector<Invoice>& invoices, const FocusOptions& options) {
  std::vector<std::string> header(kAll.begin(), kAll.end());
  std::string out = Row(header);
  for (const Invoice& inv : invoices) {
    for (const Line& l : inv.lines) {
      const double device_hours = static_cast<double>(l.quantity) * static_cast<double>(l.seconds) / 3600.0;
      const std::string amount = Decimal(l.amount_micros);
      const std::string unit = Decimal(l.unit_price_micros);
      const bool note = !l.corrects.empty();
      const std::string description =
          note ? l.description
          : l.category == "Credit"
              ? fmt::format("Credit: {} of pool {} ({}), {} s at {} {} per device-hour", l.item(), l.pool, l.description,
                            l.seconds, unit, inv.currency)
              : fmt::format("{} x {} for pool {}, {} s at {} {} per device-hour{}", l.quantity, l.item(), l.pool,
                            l.seconds, unit, inv.currency, l.description.empty() ? "" : " (" + l.description + ")");
      std::vector<std::string> f = {
          amount,                                  // BilledCost
          options.provider,                        // BillingAccountId
          options.provider,                        // BillingAccountName
          inv.currency,                            // BillingCurrency
          FormatTime(inv.period.end),              // BillingPeriodEnd
          FormatTime(inv.period.start),            // BillingPeriodStart
          l.category,                              // ChargeCategory: Usage or Credit
          note ? "Correction" : "",                // ChargeClass: a credit note corrects a closed month
          description,                             // ChargeDescription
          "Usage-Based",                           // ChargeFrequency
          FormatTime(l.end),                       // ChargePeriodEnd
          FormatTime(l.start),                     // ChargePeriodStart
          Quantity(l.allocated_gpu_hours),         // ConsumedQuantity
          "GPU-Hours",                             // ConsumedUnit
          amount,                                  // ContractedCost
          unit,                                    // ContractedUnitPrice
          amount,                                  // EffectiveCost
          options.provider,                        // InvoiceIssuerName
          amount,                                  // ListCost
          unit,                                    // ListUnitPrice
          Quantity(note ? 0 : l.category == "Credit" ? -device_hours : device_hours),  // PricingQuantity
          "Device-Hours",                          // PricingUnit
          options.provider,                        // ProviderName
          options.provider,                        // PublisherName
          "",                                      // RegionId
          inv.project + "/" + (note ? l.profile : l.pool),  // ResourceId
          note ? l.profile : l.pool,               // ResourceName
          note ? "CreditNote" : "GpuPool",         // ResourceType
          "AI and Machine Learning",               // ServiceCategory
          "GPU pools",                             // ServiceName
          note ? "" : l.item(),                    // SkuId
          l.rate_card.empty() ? "" : l.rate_card + "/" + l.item(),  // SkuPriceId
          inv.project,                             // SubAccountId
          inv.project,                             // SubAccountName
          fmt::format("{{\"gpuaas.io/project\":\"{}\",\"gpuaas.io/pool\":\"{}\",\"gpuaas.io/profile\":\"{}\"}}",
                      JsonText(inv.project), JsonText(l.pool), JsonText(l.profile)),  // Tags
      };
      out += Row(f);
    }
  }
  return out;
}

std::string LinesCsv(const Invoice& inv) {
  std::string out = Row({"project", "period", "state", "currency", "pool", "item", "category", "quantity", "seconds",
                         "unitPriceMicros", "amountMicros", "allocatedGpuHours", "usedGpuHours", "rateCard",
                         "description"});
  for (const Line& l : inv.lines) {
    out += Row({inv.project, inv.period.Name(), std::string(ToString(inv.state)), inv.currency, l.pool, l.item(),
                l.category, std::to_string(l.quantity), std::to_string(l.seconds), std::to_string(l.unit_price_micros),
                std::to_string(l.amount_micros), Quantity(l.allocated_gpu_hours),
                l.used_gpu_hours ? Quantity(*l.used_gpu_hours) : "", l.rate_card, l.description});
  }
  return out;
}

}  // namespace gpuaas::billing
