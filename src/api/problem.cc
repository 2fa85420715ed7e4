#include "api/problem.h"

#include <string>

namespace gpuaas::api {

HttpResponse ErrorResponse(const absl::Status& s, ErrorBody body) {
  const Problem p = ProblemFor(s);
  if (body == ErrorBody::kKubernetesStatus) return {p.status, "application/json", KubernetesStatusJson(p), {}};
  return {p.status, std::string(kProblemContentType), ProblemJson(p), {}};
}

}  // namespace gpuaas::api
