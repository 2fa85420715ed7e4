// Errors as HTTP responses: the one place a handler's Status becomes a response, with the body
// the client asked for. The vocabulary itself (codes, reasons, bodies) is common/problem.h,
// shared with the clients.
#ifndef GPUAAS_API_PROBLEM_H_
#define GPUAAS_API_PROBLEM_H_

#include "absl/status/status.h"
#include "api/http.h"
#include "common/problem.h"

namespace gpuaas::api {

// How an error's body is written: problem+json, or a Kubernetes Status for kubectl (which
// prints a Status's message and reason, and nothing of other bodies).
enum class ErrorBody { kProblem, kKubernetesStatus };

// The one mapping of an error to a response: ProblemFor's status, with the body asked for.
// Handlers return Status; the server calls this.
HttpResponse ErrorResponse(const absl::Status& status, ErrorBody body = ErrorBody::kProblem);

}  // namespace gpuaas::api

#endif  // GPUAAS_API_PROBLEM_H_
