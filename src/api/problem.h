// Errors over HTTP: the one mapping from Status codes to HTTP statuses, and problem+json bodies
// (RFC 9457) that carry a machine-readable `reason` as Kubernetes Status objects do.
#ifndef GPUAAS_API_PROBLEM_H_
#define GPUAAS_API_PROBLEM_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpuaas::api {

inline constexpr std::string_view kProblemContentType = "application/problem+json";

struct Problem {
  int status = 500;
  std::string reason;  // NotFound, Conflict, Invalid, ...
  std::string detail;  // for people
};

// The HTTP status and reason for a non-OK Status.
Problem ProblemFor(const absl::Status& status);

// {"type":"about:blank","title":"Not Found","status":404,"reason":"NotFound","detail":"..."}
std::string ProblemJson(const Problem& p);

std::string_view StatusText(int http_status);

}  // namespace gpuaas::api

#endif  // GPUAAS_API_PROBLEM_H_
