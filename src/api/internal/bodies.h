// The JSON bodies of the API's requests that are not model objects (those decode with
// model/codec.h), each as a small struct read by the one JSON reader (model/json_reader.h):
// a refused body is answered 400 with the path of the field that is wrong ("nodes[1]: expected
// a string", "approve: required"). Members the struct or kind does not know, and members given
// twice, are answered as kube-apiserver's field validation answers them (FieldValidation); a
// null is refused where a value is expected (except where a body says otherwise). Thread-safe;
// no I/O.
#ifndef GPUAAS_API_INTERNAL_BODIES_H_
#define GPUAAS_API_INTERNAL_BODIES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/auth.h"
#include "api/http.h"
#include "common/status.h"
#include "model/codec.h"
#include "model/json_reader.h"

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
// "(root): expected an object", "field.path: what". `fields`, when set, receives the unknown and
// duplicate members.
template <typename T>
absl::StatusOr<T> DecodeBody(std::string_view json, model::JsonFields* fields = nullptr);
template <>
absl::StatusOr<BudgetBody> DecodeBody(std::string_view json, model::JsonFields* fields);
template <>
absl::StatusOr<CreditNoteBody> DecodeBody(std::string_view json, model::JsonFields* fields);
template <>
absl::StatusOr<ApprovalBody> DecodeBody(std::string_view json, model::JsonFields* fields);
template <>
absl::StatusOr<DefragBody> DecodeBody(std::string_view json, model::JsonFields* fields);
template <>
absl::StatusOr<ClusterBody> DecodeBody(std::string_view json, model::JsonFields* fields);
template <>
absl::StatusOr<TokenBody> DecodeBody(std::string_view json, model::JsonFields* fields);

// What a write asks of its body's fields, as kube-apiserver's `fieldValidation` query parameter:
// Ignore them; Warn (the default), one Warning header per unknown or duplicate field, which
// kubectl and the CLI print; Strict, 400 naming every one, and nothing written.
enum class FieldValidation { kIgnore, kWarn, kStrict };
// The request's fieldValidation; InvalidArgument for a value that is not one of the three.
absl::StatusOr<FieldValidation> FieldValidationOf(const HttpRequest& req);
// The warnings `fields` call for under `mode` ("unknown field \"spec.quotta\""); under Strict,
// InvalidArgument "strict decoding error: ..." when there is any.
absl::StatusOr<std::vector<std::string>> CheckFields(FieldValidation mode, const model::JsonFields& fields);
// Adds each warning to `r` as kube-apiserver sends it: `Warning: 299 - "text"`.
void AddWarnings(HttpResponse& r, const std::vector<std::string>& warnings);

// Whether a write is a dry run, as kube-apiserver's `dryRun` query parameter says: "All" (every
// stage but storing) or absent; InvalidArgument for another value.
absl::StatusOr<bool> DryRunOf(const HttpRequest& req);

// A request body read, with the warnings its fields call for.
template <typename T>
struct Read {
  T value;
  std::vector<std::string> warnings;
};

// The request's media type: its Content-Type without parameters, in lower case.
std::string MediaTypeOf(const HttpRequest& req);

// OK when the request carries JSON: Content-Type application/json (parameters allowed) or
// UnsupportedMediaType (415), and UTF-8 text or InvalidArgument.
absl::Status NeedJson(const HttpRequest& req);

// The request's body read by `decode` (std::string_view, model::JsonFields* -> StatusOr<T>):
// NeedJson, the request's fieldValidation, the decode, then CheckFields.
template <typename T, typename Decode>
absl::StatusOr<Read<T>> ReadChecked(const HttpRequest& req, Decode decode) {
  RETURN_IF_ERROR(NeedJson(req));
  ASSIGN_OR_RETURN(const FieldValidation mode, FieldValidationOf(req));
  model::JsonFields fields;
  ASSIGN_OR_RETURN(T value, decode(req.body, mode == FieldValidation::kIgnore ? nullptr : &fields));
  ASSIGN_OR_RETURN(std::vector<std::string> warnings, CheckFields(mode, fields));
  return Read<T>{std::move(value), std::move(warnings)};
}

// The request's body read into one of the structs above.
template <typename T>
absl::StatusOr<Read<T>> ReadBody(const HttpRequest& req) {
  return ReadChecked<T>(req, [](std::string_view json, model::JsonFields* f) { return DecodeBody<T>(json, f); });
}

// The request's body read into an object of the model (model/codec.h).
template <typename T>
absl::StatusOr<Read<T>> ReadObject(const HttpRequest& req) {
  return ReadChecked<T>(req, [](std::string_view json, model::JsonFields* f) { return model::Decode<T>(json, f); });
}

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_BODIES_H_
