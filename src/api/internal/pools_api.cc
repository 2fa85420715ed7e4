#include "api/internal/pools_api.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/internal/apply.h"
#include "api/internal/bodies.h"
#include "api/internal/resources.h"
#include "common/problem.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace gpuaas::api::internal {
namespace {

constexpr std::string_view kJson = "application/json";

using nlohmann::json;

// A YAML node as JSON: plain scalars typed as YAML 1.2's core schema types them (null, booleans,
// integers, floats), quoted ones strings.
json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(YamlToJson(e));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string v = n.Scalar();
      if (n.Tag() == "!") return v;  // quoted
      if (v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
      if (v == "true" || v == "True" || v == "TRUE") return true;
      if (v == "false" || v == "False" || v == "FALSE") return false;
      if (std::optional<int64_t> i = ParseInt(v)) return *i;
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (!v.empty() && end == v.c_str() + v.size() && (std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-' || v[0] == '.')) {
        return d;
      }
      return v;
    }
    default: return nullptr;
  }
}

// An apply's configuration: JSON (what kubectl sends), or YAML.
absl::StatusOr<json> ParseApplyBody(std::string_view body, std::vector<std::string>& duplicates) {
  absl::StatusOr<json> j = model::ParseJson(body, "body", &duplicates);
  if (j.ok() || model::NestsDeeperThan(body, model::kMaxJsonDepth)) return j;
  try {
    return YamlToJson(YAML::Load(std::string(body)));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("body is neither JSON nor YAML: {}", e.what()));
  }
}

// The kinds a PATCH or PUT writes, each with its service calls.
template <typename T>
struct Kind;
template <>
struct Kind<model::Project> {
  static auto Update(service::PoolService& s, const std::string&, const std::string& name,
                     service::PoolService::Edit<model::Project> e, const std::string& user) {
    return s.UpdateProject(name, e, user);
  }
  static absl::StatusOr<model::Project> Create(service::PoolService& s, model::Project p, const std::string& user) {
    return s.CreateProject(std::move(p), user);
  }
};
template <>
struct Kind<model::RateCard> {
  static auto Update(service::PoolService& s, const std::string&, const std::string& name,
                     service::PoolService::Edit<model::RateCard> e, const std::string& user) {
    return s.UpdateRateCard(name, e, user);
  }
  static absl::StatusOr<model::RateCard> Create(service::PoolService& s, model::RateCard c, const std::string& user) {
    return s.CreateRateCard(std::move(c), user);
  }
};
template <>
struct Kind<model::GpuPool> {
  static auto Update(service::PoolService& s, const std::string& ns, const std::string& name,
                     service::PoolService::Edit<model::GpuPool> e, const std::string& user) {
    return s.UpdatePool(ns, name, e, user);
  }
  static absl::StatusOr<model::GpuPool> Create(service::PoolService& s, model::GpuPool p, const std::string& user) {
    return s.CreatePool(std::move(p), user);
  }
};
template <>
struct Kind<model::Workload> {
  static auto Update(service::PoolService& s, const std::string& ns, const std::string& name,
                     service::PoolService::Edit<model::Workload> e, const std::string& user) {
    return s.UpdateWorkload(ns, name, e, user);
  }
  static absl::StatusOr<model::Workload> Create(service::PoolService& s, model::Workload w, const std::string& user) {
    return s.CreateWorkload(std::move(w), user);
  }
};
template <>
struct Kind<model::CreditNote> {
  static auto Update(service::PoolService& s, const std::string& ns, const std::string& name,
                     service::PoolService::Edit<model::CreditNote> e, const std::string& user) {
    return s.UpdateCreditNote(ns, name, e, user);
  }
  static absl::StatusOr<model::CreditNote> Create(service::PoolService&, const model::CreditNote&, const std::string&) {
    return MethodNotAllowed(
        "creditnotes are issued, not applied: POST /api/v1/projects/PROJECT/creditnotes (gpuaas bill credit)");
  }
};

// Sets `out`'s managedFields to those of `made` (the JSON it was decoded from), less the fields
// that `out` does not have: what the decoder dropped (an unknown field) is nobody's.
template <typename T>
void SetManagedFields(T& out, const json& made) {
  json entries = json::array();
  if (const auto m = made.find("metadata"); m != made.end() && m->is_object()) {
    entries = m->value("managedFields", json::array());
  }
  KeepOwnedFieldsOf(json::parse(model::Encode(out)), entries);
  absl::StatusOr<model::ObjectMeta> meta =
      model::DecodeMeta(json{{"metadata", {{"name", out.metadata.name}, {"managedFields", std::move(entries)}}}}.dump());
  out.metadata.managed_fields = meta.ok() ? std::move(meta->managed_fields) : std::vector<model::ManagedFields>{};
}

// The object a write made (as JSON), decoded under the request's field validation: its warnings
// (unknown fields, and `duplicates` found in the request's text) into `warnings`, and its
// managedFields kept to the fields it has.
template <typename T>
absl::StatusOr<T> DecodeMade(const json& made, FieldValidation mode, std::vector<std::string> duplicates,
                             std::vector<std::string>& warnings) {
  model::JsonFields fields;
  ASSIGN_OR_RETURN(T out, model::Decode<T>(made.dump(), mode == FieldValidation::kIgnore ? nullptr : &fields));
  SetManagedFields(out, made);
  fields.duplicate = std::move(duplicates);
  ASSIGN_OR_RETURN(warnings, CheckFields(mode, fields));
  return out;
}

}  // namespace

template <typename T>
absl::StatusOr<Read<T>> PoolsApi::ReadCreated(const HttpRequest& req) {
  RETURN_IF_ERROR(NeedJson(req));
  ASSIGN_OR_RETURN(const FieldValidation mode, FieldValidationOf(req));
  ASSIGN_OR_RETURN(const std::string manager, FieldManagerOf(req, /*apply=*/false));
  std::vector<std::string> duplicates;
  ASSIGN_OR_RETURN(json body, model::ParseJson(req.body, "body", &duplicates));
  if (body.is_object() && body.contains("metadata") && body["metadata"].is_object()) {
    // What the server sets, whatever the body says.
    for (const char* k : {"deletionTimestamp", "finalizers", "managedFields"}) body["metadata"].erase(k);
  }
  if (body.is_object()) RecordUpdate(nullptr, body, manager, clock_.Now());
  Read<T> read;
  ASSIGN_OR_RETURN(read.value, DecodeMade<T>(body, mode, std::move(duplicates), read.warnings));
  return read;
}

template <typename T>
absl::StatusOr<HttpResponse> PoolsApi::Write(const HttpRequest& req, Change how, std::string_view ns,
                                             std::string_view name, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(const FieldValidation mode, FieldValidationOf(req));
  ASSIGN_OR_RETURN(const std::string manager, FieldManagerOf(req, how == Change::kApply));
  bool force = false;
  if (req.HasParam("force")) {
    const std::string f = req.Param("force");
    if (how != Change::kApply) return absl::InvalidArgumentError("force: only an apply takes it");
    if (f != "true" && f != "false") return absl::InvalidArgumentError(fmt::format("force: \"{}\" is not true or false", f));
    force = f == "true";
  }
  if (!IsValidUtf8(req.body)) return absl::InvalidArgumentError("body is not UTF-8 text");
  std::vector<std::string> duplicates;
  json body;
  if (how == Change::kApply) {
    ASSIGN_OR_RETURN(body, ParseApplyBody(req.body, duplicates));
  } else {
    ASSIGN_OR_RETURN(body, model::ParseJson(req.body, "body", &duplicates));
  }
  if (how == Change::kJsonPatch ? !body.is_array() : !body.is_object()) {
    return absl::InvalidArgumentError(how == Change::kJsonPatch
                                          ? "body: a JSON patch is an array of operations (RFC 6902)"
                                          : "body: expected an object");
  }
  const Time now = clock_.Now();
  const std::string ns_s(ns), name_s(name);
  std::vector<std::string> warnings;
  // The object as this write makes it from `live` (null: absent, for an apply that creates it).
  auto make = [&](const json* live) -> absl::StatusOr<T> {
    json next;
    switch (how) {
      case Change::kMergePatch:
        next = *live;
        next.merge_patch(body);
        RecordUpdate(live, next, manager, now);
        break;
      case Change::kJsonPatch:
        try {
          next = live->patch(body);
        } catch (const json::exception& e) {
          return absl::InvalidArgumentError(fmt::format("the JSON patch does not apply: {}", e.what()));
        }
        RecordUpdate(live, next, manager, now);
        break;
      case Change::kReplace:
        next = body;
        if (next.contains("metadata") && next["metadata"].is_object()) next["metadata"].erase("managedFields");
        if (const auto m = live->find("metadata"); m != live->end() && m->contains("managedFields")) {
          next["metadata"]["managedFields"] = (*m)["managedFields"];
        }
        RecordUpdate(live, next, manager, now);
        break;
      case Change::kApply: {
        ASSIGN_OR_RETURN(next, ServerSideApply(live, body, manager, force, now));
        break;
      }
    }
    if (!next.is_object()) return absl::InvalidArgumentError("the patched object is not an object");
    if (auto md = next.find("metadata"); md != next.end() && md->is_object() && !ns_s.empty()) {
      if (auto at = md->find("namespace"); at != md->end() && *at != ns_s) {
        return absl::InvalidArgumentError(fmt::format(
            "metadata.namespace: {} does not match the project in the path ({})", at->dump(), ns_s));
      }
      (*md)["namespace"] = ns_s;
    }
    return DecodeMade<T>(next, mode, duplicates, warnings);
  };
  bool found = false;
  absl::StatusOr<T> written = Kind<T>::Update(*to.service, ns_s, name_s, [&](const T& stored) -> absl::StatusOr<T> {
    found = true;
    const json live = json::parse(model::Encode(stored));
    return make(&live);
  }, who.user);
  if (how == Change::kApply && !found && absl::IsNotFound(written.status())) {
    // An apply creates what does not exist, as kube-apiserver's does.
    ASSIGN_OR_RETURN(T created, make(nullptr));
    if (created.metadata.name != name_s) {
      return absl::InvalidArgumentError(
          fmt::format("metadata.name: \"{}\" does not match the name in the path \"{}\"", created.metadata.name, name_s));
    }
    return Written(Kind<T>::Create(*to.service, std::move(created), who.user), 201, to, warnings);
  }
  return Written(std::move(written), 200, to, warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::Dispatch(const HttpRequest& req, Change how, std::string_view plural,
                                                std::string_view ns, std::string_view name, const Principal& who) {
  if (!ns.empty() && !who.Sees(ns)) return absl::NotFoundError(fmt::format("{} \"{}\" not found", plural, name));
  const bool cluster_scoped = ns.empty();
  if (cluster_scoped && plural == model::Project::kPlural) return Write<model::Project>(req, how, ns, name, who);
  if (cluster_scoped && plural == model::RateCard::kPlural) return Write<model::RateCard>(req, how, ns, name, who);
  if (!cluster_scoped && plural == model::GpuPool::kPlural) return Write<model::GpuPool>(req, how, ns, name, who);
  if (!cluster_scoped && plural == model::Workload::kPlural) return Write<model::Workload>(req, how, ns, name, who);
  if (!cluster_scoped && plural == model::CreditNote::kPlural) {
    if (!who.operator_()) {
      return absl::PermissionDeniedError(fmt::format("user {} ({}) may not change creditnotes; operators only",
                                                     who.user, ToString(who.role)));
    }
    return Write<model::CreditNote>(req, how, ns, name, who);
  }
  if (const ResourceType* t = FindType(plural); t != nullptr && t->namespaced == cluster_scoped && t->patchable) {
    return absl::NotFoundError(
        t->namespaced ? fmt::format("{} live in a project: /apis/gpuaas.io/v1/namespaces/PROJECT/{}/{}", plural, plural, name)
                      : fmt::format("{} are not in a project: /apis/gpuaas.io/v1/{}/{}", plural, plural, name));
  }
  return NotServed(plural, how == Change::kReplace ? "replaced" : "patched");
}

absl::StatusOr<HttpResponse> PoolsApi::Patch(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                             std::string_view name, const Principal& who) {
  const std::string type = MediaTypeOf(req);
  Change how;
  if (type == "application/merge-patch+json") {
    how = Change::kMergePatch;
  } else if (type == "application/json-patch+json") {
    how = Change::kJsonPatch;
  } else if (type == "application/apply-patch+yaml" || type == "application/apply-patch+json") {
    how = Change::kApply;
  } else if (type == "application/strategic-merge-patch+json") {
    return UnsupportedMediaType(
        "a strategic merge patch is not supported for gpuaas.io kinds (as for any custom resource): use a merge "
        "patch (kubectl patch --type merge), a JSON patch (--type json) or server-side apply");
  } else {
    return UnsupportedMediaType(fmt::format(
        "Content-Type \"{}\": a PATCH takes application/merge-patch+json, application/json-patch+json or "
        "application/apply-patch+yaml",
        req.Header("Content-Type")));
  }
  if (!pools_) return NoPools();
  return Dispatch(req, how, plural, ns, name, who);
}

absl::StatusOr<HttpResponse> PoolsApi::Replace(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                               std::string_view name, const Principal& who) {
  RETURN_IF_ERROR(NeedJson(req));
  if (!pools_) return NoPools();
  return Dispatch(req, Change::kReplace, plural, ns, name, who);
}

absl::Status NoPools() { return absl::UnimplementedError("this server runs without pools"); }

absl::StatusOr<PoolsApi::Target> PoolsApi::TargetOf(const HttpRequest& req) {
  if (!pools_) return NoPools();
  ASSIGN_OR_RETURN(const bool dry_run, DryRunOf(req));
  return Target{dry_run ? &pools_->DryRun() : pools_, dry_run};
}

// Waits until the cache shows the write, so that the client's next GET reads its own write. When
// the cache lags longer, the write stands (it is committed) and the reply says so in a Warning
// header, as kube-apiserver warns: a read may not show it yet.
template <typename T>
absl::StatusOr<HttpResponse> PoolsApi::Written(absl::StatusOr<T> obj, int status, const Target& to,
                                               const std::vector<std::string>& warnings) {
  if (!obj.ok()) return obj.status();
  const int64_t written = obj->metadata.resource_version;
  if (to.dry_run) obj->metadata.resource_version = 0;
  HttpResponse r{status, std::string(kJson), model::Encode(*obj), {}};
  AddWarnings(r, warnings);
  if (!to.dry_run && !cache_.WaitFor(written, read_your_write_timeout_)) {
    r.headers.emplace_back(
        "Warning", fmt::format("299 - \"the write is committed at resourceVersion {}, but this server's read cache "
                               "does not show it yet: a read may return the earlier state for a while\"",
                               written));
  }
  return r;
}

absl::StatusOr<HttpResponse> PoolsApi::CreateProject(const HttpRequest& req, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(Read<model::Project> p, ReadCreated<model::Project>(req));
  return Written(to.service->CreateProject(std::move(p.value), who.user), 201, to, p.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreateRateCard(const HttpRequest& req, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(Read<model::RateCard> c, ReadCreated<model::RateCard>(req));
  return Written(to.service->CreateRateCard(std::move(c.value), who.user), 201, to, c.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::SetBudget(const HttpRequest& req, std::string_view project,
                                                 const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(const Read<BudgetBody> read, ReadBody<BudgetBody>(req));
  const BudgetBody& body = read.value;
  std::optional<model::Project::Budget> budget;
  if (body.amount_micros > 0 || body.gpu_hours > 0) {
    budget = model::Project::Budget{body.amount_micros, body.gpu_hours, body.allow_overrun};
  }
  absl::StatusOr<model::Project> set = to.service->SetBudget(std::string(project), budget, who.user);
  ASSIGN_OR_RETURN(HttpResponse reply, Written(set, 200, to, read.warnings));
  // Accepted (it is the operator's call), but not without a word when it is already passed.
  if (const std::string w = billing_.BudgetWarning(*set); !w.empty()) {
    reply.headers.emplace_back("Warning", fmt::format("299 - \"{}\"", w));
  }
  return reply;
}

absl::StatusOr<HttpResponse> PoolsApi::IssueCreditNote(const HttpRequest& req, std::string_view project,
                                                       const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(const Read<CreditNoteBody> read, ReadBody<CreditNoteBody>(req));
  const CreditNoteBody& body = read.value;
  return Written(
      to.service->IssueCreditNote(std::string(project), body.period, body.amount_micros, body.reason, who.user), 201,
      to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreatePool(const HttpRequest& req, std::string_view ns, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("projects \"{}\" not found", ns));
  ASSIGN_OR_RETURN(Read<model::GpuPool> read, ReadCreated<model::GpuPool>(req));
  model::GpuPool& p = read.value;
  if (!p.metadata.ns.empty() && p.metadata.ns != ns) {
    return absl::InvalidArgumentError(
        fmt::format("metadata.namespace \"{}\" does not match the project in the path ({})", p.metadata.ns, ns));
  }
  p.metadata.ns = std::string(ns);
  return Written(to.service->CreatePool(std::move(p), who.user), 201, to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreateWorkload(const HttpRequest& req, std::string_view ns,
                                                      const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("projects \"{}\" not found", ns));
  ASSIGN_OR_RETURN(Read<model::Workload> read, ReadCreated<model::Workload>(req));
  model::Workload& w = read.value;
  if (!w.metadata.ns.empty() && w.metadata.ns != ns) {
    return absl::InvalidArgumentError("metadata.namespace does not match the project in the path");
  }
  w.metadata.ns = std::string(ns);
  return Written(to.service->CreateWorkload(std::move(w), who.user), 201, to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::DeleteWorkload(const HttpRequest& req, std::string_view ns,
                                                      std::string_view name, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("workloads \"{}\" not found", name));
  return Written(to.service->DeleteWorkload(std::string(ns), std::string(name), who.user), 200, to);
}

absl::StatusOr<HttpResponse> PoolsApi::DeletePool(const HttpRequest& req, std::string_view ns, std::string_view name,
                                                  const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  return Written(to.service->DeletePool(std::string(ns), std::string(name), who.user), 200, to);
}

absl::StatusOr<HttpResponse> PoolsApi::Approve(const HttpRequest& req, std::string_view ns, std::string_view name,
                                               const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  ASSIGN_OR_RETURN(const Read<ApprovalBody> read, ReadBody<ApprovalBody>(req));
  return Written(
      to.service->Approve(std::string(ns), std::string(name), read.value.approve, read.value.reason, who.user), 200,
      to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::Release(const HttpRequest& req, std::string_view ns, std::string_view name,
                                               const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  return Written(to.service->Release(std::string(ns), std::string(name), who.user), 200, to);
}

}  // namespace gpuaas::api::internal
