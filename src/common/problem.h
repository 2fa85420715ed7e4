// The error vocabulary of the API, for its server and its clients alike: one mapping from
// absl::Status to an HTTP status and a machine-readable reason (problem+json, RFC 9457, or a
// Kubernetes Status for kubectl), and its inverse for clients, so that a code keeps its retry
// meaning across the wire (common/status.h: Aborted retry the transaction, Unavailable retry the
// call, FailedPrecondition fix state first). Handlers return Status; nothing else writes an HTTP
// error status. Thread-safe (pure functions).
#ifndef GPUAAS_COMMON_PROBLEM_H_
#define GPUAAS_COMMON_PROBLEM_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpuaas {

inline constexpr std::string_view kProblemContentType = "application/problem+json";

struct Problem {
  int status = 500;
  std::string reason;  // NotFound, Conflict, Invalid, ...
  std::string detail;  // for people
};

// Outcomes whose HTTP status no Status code has of its own: a Status of the nearest code that
// carries the HTTP status and reason for ProblemFor.
absl::Status MethodNotAllowed(std::string_view detail);      // 405 MethodNotAllowed
absl::Status ContentTooLarge(std::string_view detail);       // 413 RequestEntityTooLarge
absl::Status UnsupportedMediaType(std::string_view detail);  // 415 UnsupportedMediaType
absl::Status TooManyRequests(std::string_view detail);       // 429 TooManyRequests
absl::Status HeaderFieldsTooLarge(std::string_view detail);  // 431 RequestHeaderFieldsTooLarge
absl::Status NotReady(std::string_view detail);              // 503 NotReady

// The HTTP status and reason for a non-OK Status.
Problem ProblemFor(const absl::Status& status);

// The inverse, for clients: the Status an answer of `http_status` with `reason` (as problem+json
// or a Kubernetes Status carry it) stands for, with `message`. ProblemFor of the result gives the
// same status and reason back.
absl::Status StatusFromProblem(int http_status, std::string_view reason, std::string_view message);

// {"type":"about:blank","title":"Not Found","status":404,"reason":"NotFound","detail":"..."}
std::string ProblemJson(const Problem& p);
// {"kind":"Status","apiVersion":"v1","status":"Failure","message":detail,"reason":...,"code":...}
std::string KubernetesStatusJson(const Problem& p);

std::string_view StatusText(int http_status);

}  // namespace gpuaas

#endif  // GPUAAS_COMMON_PROBLEM_H_
