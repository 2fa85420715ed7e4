// Errors over HTTP: handlers return absl::Status, and this is the one mapping from it to HTTP
// statuses and problem+json bodies (RFC 9457) that carry a machine-readable `reason` as
// Kubernetes Status objects do.
#ifndef GPUAAS_API_PROBLEM_H_
#define GPUAAS_API_PROBLEM_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "api/http.h"

namespace gpuaas::api {

inline constexpr std::string_view kProblemContentType = "application/problem+json";

struct Problem {
  int status = 500;
  std::string reason;  // NotFound, Conflict, Invalid, ...
  std::string detail;  // for people
};

// An outcome with no Status code of its own (405, 413, 414, 415, a reason such as NotReady): a
// Status of the nearest code that carries the HTTP status and reason for ProblemFor.
absl::Status HttpError(int http_status, std::string_view reason, std::string_view detail);

// The HTTP status and reason for a non-OK Status.
Problem ProblemFor(const absl::Status& status);

// How an error's body is written: problem+json, or a Kubernetes Status for kubectl (which
// prints a Status's message and reason, and nothing of other bodies).
enum class ErrorBody { kProblem, kKubernetesStatus };

// The one mapping of an error to a response: ProblemFor's status, with the body asked for.
// Handlers return Status; the server calls this.
HttpResponse ErrorResponse(const absl::Status& status, ErrorBody body = ErrorBody::kProblem);

// {"type":"about:blank","title":"Not Found","status":404,"reason":"NotFound","detail":"..."}
std::string ProblemJson(const Problem& p);
// {"kind":"Status","apiVersion":"v1","status":"Failure","message":detail,"reason":...,"code":...}
std::string KubernetesStatusJson(const Problem& p);

std::string_view StatusText(int http_status);

}  // namespace gpuaas::api

#endif  // GPUAAS_API_PROBLEM_H_
