// Invoices as JSON: the API's answer and the document kept for a closed period (kind Invoice,
// namespace the project, name the period). Decode reads back what Encode wrote.
#ifndef GPUAAS_BILLING_CODEC_H_
#define GPUAAS_BILLING_CODEC_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "billing/billing.h"

namespace gpuaas::billing {

std::string EncodeInvoice(const Invoice& invoice);
absl::StatusOr<Invoice> DecodeInvoice(std::string_view json);

}  // namespace gpuaas::billing

#endif  // GPUAAS_BILLING_CODEC_H_
