#include "api/internal/bodies.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>

#include "common/problem.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/json_reader.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {
namespace {

using model::FailAt;
using model::JsonIn;

// Request bodies refuse nulls: {"reason": null} is not a reason.
model::JsonDocument Body(model::JsonFields* fields) {
  return {.path = "", .nulls = model::JsonNulls::kRefused, .fields = fields};
}

}  // namespace

template <>
absl::StatusOr<BudgetBody> DecodeBody(std::string_view json, model::JsonFields* fields) {
  return model::ReadJson(json, Body(fields), [](const JsonIn& in) {
    // A null count sets no limit, as an absent one does.
    auto count = [&](std::string_view key) -> int64_t { return in.IsNull(key) ? 0 : in.Int(key, false, 0); };
    BudgetBody b;
    b.amount_micros = count("amountMicros");
    b.gpu_hours = count("gpuHours");
    b.allow_overrun = in.Bool("allowOverrun", false);
    return b;
  });
}

template <>
absl::StatusOr<CreditNoteBody> DecodeBody(std::string_view json, model::JsonFields* fields) {
  return model::ReadJson(json, Body(fields), [](const JsonIn& in) {
    CreditNoteBody n;
    n.period = in.Str("period", /*required=*/true);
    n.amount_micros = in.Int("amountMicros", /*required=*/true, std::numeric_limits<int64_t>::min());
    n.reason = in.Str("reason", /*required=*/true);
    return n;
  });
}

template <>
absl::StatusOr<ApprovalBody> DecodeBody(std::string_view json, model::JsonFields* fields) {
  return model::ReadJson(json, Body(fields), [](const JsonIn& in) {
    ApprovalBody a;
    a.approve = in.Bool("approve");
    a.reason = in.Str("reason");
    if (!a.approve && a.reason.empty()) {
      FailAt(in.Path("reason"), "required when approve is false (a rejection needs a reason)");
    }
    return a;
  });
}

template <>
absl::StatusOr<DefragBody> DecodeBody(std::string_view json, model::JsonFields* fields) {
  return model::ReadJson(json, Body(fields), [](const JsonIn& in) { return DefragBody{in.StrList("gpus")}; });
}

template <>
absl::StatusOr<ClusterBody> DecodeBody(std::string_view json, model::JsonFields* fields) {
  return model::ReadJson(json, Body(fields), [](const JsonIn& in) {
    ClusterBody c;
    c.name = in.Str("name", /*required=*/true);
    c.kubeconfig = in.Str("kubeconfig", /*required=*/true);
    c.context = in.Str("context");
    c.display_name = in.Str("displayName");
    c.region = in.Str("region");
    return c;
  });
}

template <>
absl::StatusOr<TokenBody> DecodeBody(std::string_view json, model::JsonFields* fields) {
  return model::ReadJson(json, Body(fields), [](const JsonIn& in) {
    TokenBody t;
    t.user = in.Str("user", /*required=*/true);
    // ParseRole holds the roles' spellings (the static token file reads them too).
    const std::string role = in.Str("role", /*required=*/true);
    const std::optional<Role> parsed = ParseRole(role);
    if (!parsed) FailAt(in.Path("role"), fmt::format("\"{}\" is not operator, member or agent", role));
    t.role = *parsed;
    t.project = in.Str("project");
    t.cluster = in.Str("cluster");
    t.nodes = in.StrList("nodes");
    return t;
  });
}

absl::StatusOr<FieldValidation> FieldValidationOf(const HttpRequest& req) {
  const std::string v = req.Param("fieldValidation");
  if (v.empty() || v == "Warn") return FieldValidation::kWarn;
  if (v == "Ignore") return FieldValidation::kIgnore;
  if (v == "Strict") return FieldValidation::kStrict;
  return absl::InvalidArgumentError(
      fmt::format("fieldValidation: \"{}\" is not one of Ignore, Warn, Strict", v));
}

absl::StatusOr<bool> DryRunOf(const HttpRequest& req) {
  if (req.method == "DELETE" && !Trim(req.body).empty()) {
    // DeleteOptions, as kubectl sends them: {"propagationPolicy":"Background","dryRun":["All"]}.
    ASSIGN_OR_RETURN(const nlohmann::json j, model::ParseJson(req.body, "body"));
    if (!j.is_object()) return absl::InvalidArgumentError("body: DeleteOptions must be a JSON object");
    if (auto d = j.find("dryRun"); d != j.end() && !d->is_null()) {
      if (*d != nlohmann::json::array({"All"})) {
        return absl::InvalidArgumentError(fmt::format("dryRun: {} is not [\"All\"]", d->dump()));
      }
      return true;
    }
  }
  if (!req.HasParam("dryRun")) return false;
  const std::string v = req.Param("dryRun");
  if (v == "All") return true;
  return absl::InvalidArgumentError(fmt::format("dryRun: \"{}\" is not All (the only stage a dry run skips is storing)", v));
}

absl::StatusOr<std::vector<std::string>> CheckFields(FieldValidation mode, const model::JsonFields& fields) {
  std::vector<std::string> found;
  if (mode == FieldValidation::kIgnore) return found;
  for (const std::string& f : fields.unknown) found.push_back(fmt::format("unknown field \"{}\"", f));
  for (const std::string& f : fields.duplicate) found.push_back(fmt::format("duplicate field \"{}\"", f));
  if (mode == FieldValidation::kStrict && !found.empty()) {
    return absl::InvalidArgumentError(fmt::format("strict decoding error: {}", fmt::join(found, ", ")));
  }
  return found;
}

void AddWarnings(HttpResponse& r, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) {
    std::string quoted;
    for (char c : w) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    r.headers.emplace_back("Warning", fmt::format("299 - \"{}\"", quoted));
  }
}

std::string MediaTypeOf(const HttpRequest& req) {
  const std::string ct = req.Header("Content-Type");
  std::string type(Trim(std::string_view(ct).substr(0, ct.find(';'))));
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return type;
}

absl::Status NeedJson(const HttpRequest& req) {
  // "application/json", optionally with parameters ("; charset=utf-8"); not "application/jsonx".
  if (MediaTypeOf(req) != "application/json") {
    return UnsupportedMediaType(
        fmt::format("Content-Type must be application/json, not \"{}\"", req.Header("Content-Type")));
  }
  if (!IsValidUtf8(req.body)) return absl::InvalidArgumentError("the body is not valid UTF-8 (JSON text is UTF-8)");
  return absl::OkStatus();
}

}  // namespace gpuaas::api::internal
