// The JSON bodies of the API's requests that are not model objects (those decode with
// model/codec.h), each as a small struct read by the one JSON reader (model/json_reader.h):
// a refused body is answered 400 with the path of the field that is wrong ("nodes[1]: expected
// a string", "approve: required"). Members the struct does not know are ignored, as for
// objects; a null is refused where a value is expected (except where a body says otherwise).
// Thread-safe; no I/O.
#ifndef GPUAAS_API_INTERNAL_BODIES_H_
#define GPUAAS_API_INTERNAL_BODIES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/auth.h"
#include "api/http.h"
#include "common/status.h"

namespace gpuaas::api::internal {

// PUT /apis/gpuaas.io/v1/projects/{name}/budget: {"amountMicros": N, "gpuHours": N,
// "allowOverrun": bool}. A count that is 0, absent or null sets no limit; both none remove the
// budget.
struct BudgetBody {
  int64_t amount_micros = 0;
  int64_t gpu_hours = 0;
  bool allow_overrun = false;
};

// POST /api/v1/projects/{project}/creditnotes: {"period": "YYYY-MM", "amountMicros": N,
// "reason": "..."}, all required (the pool service checks their values).
struct CreditNoteBody {
  std::string period;
  int64_t amount_micros = 0;
  std::string reason;
};

// PUT .../namespaces/{namespace}/gpupools/{name}/approval: {"approve": bool, "reason": "..."};
// a rejection needs a reason.
struct ApprovalBody {
  bool approve = false;
  std::string reason;
};

// POST /api/v1/defrag: {"gpus": ["GPU-...", ...]}; none (or an empty body) makes every move.
struct DefragBody {
  std::vector<std::string> gpus;
};

// POST /api/v1/clusters: {"name", "kubeconfig" (self-contained), "context", "displayName",
// "region"}; the last three optional.
struct ClusterBody {
  std::string name;
  std::string kubeconfig;
  std::string context;
  std::string display_name;
  std::string region;
};

// POST /api/v1/tokens: {"user", "role": "operator|member|agent", "project" (members),
// "cluster", "nodes": [...] (agents)}.
struct TokenBody {
  std::string user;
  Role role = Role::kMember;
  std::string project;
  std::string cluster;
  std::vector<std::string> nodes;
};

// The body in `json` read into T, or InvalidArgument naming the field: "body is not valid JSON",
// "(root): expected an object", "field.path: what".
template <typename T>
absl::StatusOr<T> DecodeBody(std::string_view json);
template <>
absl::StatusOr<BudgetBody> DecodeBody(std::string_view json);
template <>
absl::StatusOr<CreditNoteBody> DecodeBody(std::string_view json);
template <>
absl::StatusOr<ApprovalBody> DecodeBody(std::string_view json);
template <>
absl::StatusOr<DefragBody> DecodeBody(std::string_view json);
template <>
absl::StatusOr<ClusterBody> DecodeBody(std::string_view json);
template <>
absl::StatusOr<TokenBody> DecodeBody(std::string_view json);

// OK when the request carries JSON: Content-Type application/json (parameters allowed) or
// UnsupportedMediaType (415), and UTF-8 text or InvalidArgument.
absl::Status NeedJson(const HttpRequest& req);

// The request's body read into T: NeedJson, then DecodeBody.
template <typename T>
absl::StatusOr<T> ReadBody(const HttpRequest& req) {
  RETURN_IF_ERROR(NeedJson(req));
  return DecodeBody<T>(req.body);
}

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_BODIES_H_
