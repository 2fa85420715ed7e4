// Exports of invoice lines: CSV of an invoice's lines, and the FinOps Open Cost and Usage
// Specification (FOCUS) 1.2 cost-and-usage CSV, one row per line. Domain code: text in memory.
#ifndef GPUAAS_BILLING_FOCUS_H_
#define GPUAAS_BILLING_FOCUS_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "billing/billing.h"

namespace gpuaas::billing {

// The FOCUS 1.2 columns written, in order. Names as FOCUS 1.2 defines them
// (https://focus.finops.org/focus-specification/v1-2/); the list with its sources is kept in
// docs/billing/focus-1.2-columns.txt and a test holds the two together.
std::span<const std::string_view> FocusColumns();

struct FocusOptions {
  std::string provider = "gpuaas";  // ProviderName, PublisherName, InvoiceIssuerName
};

// FOCUS rows of every line of `invoices` (header first). Amounts are decimal currency units
// with six places; quantities in device-hours (pricing) and GPU-hours (consumed, MIG-aware).
std::string FocusCsv(const std::vector<Invoice>& invoices, const FocusOptions& options = {});

// An invoice's lines as CSV (header first), the same figures as its JSON.
std::string LinesCsv(const Invoice& invoice);

}  // namespace gpuaas::billing

#endif  // GPUAAS_BILLING_FOCUS_H_
