// Status and StatusOr (Abseil) plus the two macros every fallible function uses.
// Codes carry retry meaning (see STYLE): Unavailable retry the call, Aborted retry the transaction
// (a resourceVersion conflict), FailedPrecondition fix state first, InvalidArgument bad input.
#ifndef GPUAAS_COMMON_STATUS_H_
#define GPUAAS_COMMON_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "fmt/core.h"

// Debian's Abseil is built in C++14 mode, so absl::string_view (Status::message()) is its own
// type; these let fmt format it and a Status directly.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  auto format(absl::string_view s, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};
template <>
struct fmt::formatter<absl::Status> : fmt::formatter<std::string_view> {
  auto format(const absl::Status& s, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(s.ToString(), ctx);
  }
};

#define GPUAAS_CONCAT_INNER_(a, b) a##b
#define GPUAAS_CONCAT_(a, b) GPUAAS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr) RETURN_IF_ERROR_IMPL_(GPUAAS_CONCAT_(gpuaas_status_, __COUNTER__), expr)
#define RETURN_IF_ERROR_IMPL_(tmp, expr) \
  do {                                   \
    ::absl::Status tmp = (expr);         \
    if (!tmp.ok()) return tmp;           \
  } while (0)

// `lhs = value of expr`, or returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(GPUAAS_CONCAT_(gpuaas_statusor_, __COUNTER__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(*tmp)

namespace gpuaas {

// A machine-readable reason for clients ("BudgetExceeded"), carried with a status as a payload:
// the API answers with it as problem+json's `reason` (the HTTP status still follows the code).
inline constexpr std::string_view kReasonPayload = "gpuaas.io/reason";
inline absl::Status WithReason(absl::Status s, std::string_view reason) {
  s.SetPayload(absl::string_view(kReasonPayload.data(), kReasonPayload.size()),
               absl::Cord(absl::string_view(reason.data(), reason.size())));
  return s;
}

}  // namespace gpuaas

#endif  // GPUAAS_COMMON_STATUS_H_
