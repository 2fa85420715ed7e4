#include "api/internal/openapi.h"

#include <map>
#include <string>
#include <string_view>

#include "api/server.h"
#include "common/problem.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {
namespace {

using nlohmann::json;

constexpr std::string_view kGroupVersionPath = "apis/gpuaas.io/v1";

// Each kind's schema, from its decoder; what a kind is, for `kubectl explain KIND`.
struct KindDoc {
  std::string (*schema)();
  std::string_view description;
};

std::string InvoiceSchema() {
  // Invoices are kept as the billing controller wrote them; read only, described loosely.
  return json{{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}.dump();
}

const std::map<std::string_view, KindDoc>& Kinds() {
  static const auto* const kKinds = new std::map<std::string_view, KindDoc>{
      {model::Cluster::kKind, {&model::SchemaOf<model::Cluster>, "A cluster of the fleet: where its GPUs are, and whether its driver reaches it."}},
      {model::NodeCapacity::kKind, {&model::SchemaOf<model::NodeCapacity>, "A node's total GPU capacity, physical and as MIG instances."}},
      {model::GpuCapacity::kKind, {&model::SchemaOf<model::GpuCapacity>, "One GPU device: its model, MIG mode and instances, health and telemetry verdicts."}},
      {model::SpecAndCount::kKind, {&model::SchemaOf<model::SpecAndCount>, "The MIG or full-GPU resources of one kind provisioned in a cluster, with how many are allocated and free."}},
      {model::Project::kKind, {&model::SchemaOf<model::Project>, "A tenant: its namespace holds its pools and workloads; its quota and budget bound what it may ask for."}},
      {model::GpuPool::kKind, {&model::SchemaOf<model::GpuPool>, "A project's request for dedicated GPUs and MIG instances: approved or rejected by an operator, then allocated, provisioned and metered from its approval until it is released. Deleting an approved pool releases it."}},
      {model::MigLayout::kKind, {&model::SchemaOf<model::MigLayout>, "The MIG instances one GPU is to have (spec) and has (status)."}},
      {model::Defragmentation::kKind, {&model::SchemaOf<model::Defragmentation>, "An operator's request to move idle MIG instances so that larger profiles fit, and the moves made."}},
      {model::Workload::kKind, {&model::SchemaOf<model::Workload>, "A run on a pool's devices: admitted by priority when the pool has room, preempted for higher priorities."}},
      {model::Profile::kKind, {&model::SchemaOf<model::Profile>, "Which pod or workload ran on which device, and when: the record of usage for workload tracking."}},
      {model::RateCard::kKind, {&model::SchemaOf<model::RateCard>, "Prices per GPU model and MIG profile per hour, from a date on; a later card supersedes."}},
      {model::UsageRecord::kKind, {&model::SchemaOf<model::UsageRecord>, "A pool's meter: what it held, from its approval to its release, to the second."}},
      {model::kInvoiceKind, {&InvoiceSchema, "A closed month's invoice of a project, as kept."}},
      {model::CreditNote::kKind, {&model::SchemaOf<model::CreditNote>, "A correction of a closed month's invoice."}},
      {model::Loan::kKind, {&model::SchemaOf<model::Loan>, "The receipt of a loan: a preemptible workload's run on devices another project's pool lent, to the second; billed to the borrower and credited to the lender."}},
  };
  return *kKinds;
}

json Gvk(std::string_view kind) { return {{"group", model::kGroup}, {"kind", kind}, {"version", "v1"}}; }

std::string SchemaName(std::string_view kind) { return fmt::format("io.gpuaas.v1.{}", kind); }

// Swagger 2.0 and OpenAPI 3.0 differ in where a schema goes; everything else is shared.
struct Dialect {
  bool v3;
  std::string Ref(std::string_view kind) const {
    return fmt::format("#/{}/{}", v3 ? "components/schemas" : "definitions", SchemaName(kind));
  }
  json Param(std::string_view name, std::string_view in, std::string_view type, std::string_view description,
             bool required = false) const {
    json p = {{"name", name}, {"in", in}, {"description", description}};
    if (required) p["required"] = true;
    if (v3) {
      p["schema"] = {{"type", type}};
    } else {
      p["type"] = type;
    }
    return p;
  }
  json Response(std::string_view kind, std::string_view description) const {
    json r = {{"description", description}};
    if (v3) {
      r["content"] = {{"application/json", {{"schema", {{"$ref", Ref(kind)}}}}}};
    } else {
      r["schema"] = {{"$ref", Ref(kind)}};
    }
    return r;
  }
};

json WriteParams(const Dialect& d, bool patch) {
  json ps = json::array();
  ps.push_back(d.Param("dryRun", "query", "string", "All: answer as the write would, and store nothing"));
  ps.push_back(d.Param("fieldManager", "query", "string",
                       "who owns the fields this write sets (metadata.managedFields); required for an apply"));
  ps.push_back(d.Param("fieldValidation", "query", "string",
                       "Ignore, Warn (the default: a Warning header per unknown or duplicate field) or Strict (400)"));
  if (patch) ps.push_back(d.Param("force", "query", "boolean", "an apply takes the fields other managers own"));
  return ps;
}

json Operation(const Dialect& d, const ResourceType& t, std::string_view verb, std::string_view action,
               std::string_view what, bool namespaced_path) {
  const std::string scope = t.namespaced && namespaced_path ? "Namespaced" : "";
  const std::string kind = verb == "list" ? t.kind + "List" : t.kind;
  json op = {{"operationId", fmt::format("{}GpuaasIoV1{}{}", verb, scope, kind)},
             {"description", what},
             {"tags", {"gpuaasIo_v1"}},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind", Gvk(t.kind)}};
  json responses = {{"200", d.Response(kind, "OK")}, {"401", {{"description", "Unauthorized"}}}};
  json params = json::array();
  if (verb == "list") {
    params.push_back(d.Param("labelSelector", "query", "string", "only objects whose labels match"));
    params.push_back(d.Param("fieldSelector", "query", "string", "metadata.name=NAME or metadata.namespace=NS"));
    params.push_back(d.Param("limit", "query", "integer", "at most this many objects; continue from the token"));
    params.push_back(d.Param("continue", "query", "string", "the token of the previous page"));
    params.push_back(d.Param("watch", "query", "boolean", "a stream of changes instead of a list"));
    params.push_back(d.Param("resourceVersion", "query", "string", "watch from this revision"));
    params.push_back(d.Param("allowWatchBookmarks", "query", "boolean", "a watch receives BOOKMARK events"));
    params.push_back(d.Param("timeoutSeconds", "query", "integer", "the watch ends after this long"));
  } else if (verb == "create" || verb == "replace" || verb == "patch") {
    params = WriteParams(d, verb == "patch");
    if (verb == "create") responses["201"] = d.Response(kind, "Created");
    if (verb == "patch") responses["201"] = d.Response(kind, "Created (an apply of an object that did not exist)");
    const json schema = {{"$ref", d.Ref(t.kind)}};
    if (d.v3) {
      json content = json::object();
      if (verb == "patch") {
        // No strategic merge patch (custom resources have none): kubectl then sends merge patches.
        content["application/merge-patch+json"] = {{"schema", {{"type", "object"}}}};
        content["application/json-patch+json"] = {{"schema", {{"type", "array"}, {"items", {{"type", "object"}}}}}};
        content["application/apply-patch+yaml"] = {{"schema", schema}};
      } else {
        content["application/json"] = {{"schema", schema}};
      }
      op["requestBody"] = {{"content", std::move(content)}, {"required", true}};
    } else {
      params.push_back({{"name", "body"}, {"in", "body"}, {"required", true},
                        {"schema", verb == "patch" ? json{{"type", "object"}} : schema}});
    }
  } else if (verb == "delete") {
    responses["202"] = d.Response(kind, "Accepted: kept, with its deletionTimestamp, until its release is done");
  }
  if (!d.v3) {
    op["consumes"] = verb == "patch" ? json{"application/merge-patch+json", "application/json-patch+json",
                                            "application/apply-patch+yaml"}
                                     : json{"application/json"};
    op["produces"] = {"application/json"};
  }
  if (!params.empty()) op["parameters"] = std::move(params);
  op["responses"] = std::move(responses);
  return op;
}

json ListSchema(const Dialect& d, std::string_view kind) {
  return {{"type", "object"},
          {"description", fmt::format("A list of {} objects.", kind)},
          {"required", {"items"}},
          {"properties",
           {{"apiVersion", {{"type", "string"}}},
            {"kind", {{"type", "string"}}},
            {"metadata", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}},
            {"items", {{"type", "array"}, {"items", {{"$ref", d.Ref(kind)}}}}}}},
          {"x-kubernetes-group-version-kind", {Gvk(fmt::format("{}List", kind))}}};
}

json Document(const Dialect& d) {
  json schemas = json::object();
  json paths = json::object();
  const json name_param = d.Param("name", "path", "string", "the object's name", true);
  const json ns_param = d.Param("namespace", "path", "string", "the project", true);
  for (const ResourceType& t : ResourceTypes()) {
    const KindDoc& k = Kinds().at(t.kind);
    json schema = json::parse(k.schema());
    schema["description"] = k.description;
    schema["x-kubernetes-group-version-kind"] = {Gvk(t.kind)};
    schemas[SchemaName(t.kind)] = std::move(schema);
    schemas[SchemaName(t.kind + "List")] = ListSchema(d, t.kind);

    const std::string all = fmt::format("/apis/gpuaas.io/v1/{}", t.plural);
    paths[all]["get"] = Operation(d, t, "list", "list",
                                  t.namespaced ? fmt::format("list or watch {} of every project", t.plural)
                                               : fmt::format("list or watch {}", t.plural),
                                  false);
    const std::string coll = t.namespaced ? fmt::format("/apis/gpuaas.io/v1/namespaces/{{namespace}}/{}", t.plural) : all;
    const std::string one = coll + "/{name}";
    if (t.namespaced) {
      paths[coll]["parameters"] = {ns_param};
      paths[coll]["get"] = Operation(d, t, "list", "list", fmt::format("list or watch a project's {}", t.plural), true);
    }
    if (t.creatable) paths[coll]["post"] = Operation(d, t, "create", "post", fmt::format("create a {}", t.kind), true);
    paths[one]["parameters"] = t.namespaced ? json{name_param, ns_param} : json{name_param};
    paths[one]["get"] = Operation(d, t, "read", "get", fmt::format("read a {}", t.kind), true);
    if (t.patchable) {
      paths[one]["patch"] = Operation(d, t, "patch", "patch",
                                      fmt::format("change a {}: a merge patch, a JSON patch or a server-side apply", t.kind),
                                      true);
      paths[one]["put"] = Operation(d, t, "replace", "put", fmt::format("replace a {}", t.kind), true);
    }
    if (t.deletable) paths[one]["delete"] = Operation(d, t, "delete", "delete", fmt::format("delete a {}", t.kind), true);
  }
  json info = {{"title", "gpuaas"}, {"version", "v1"}};
  if (d.v3) {
    return {{"openapi", "3.0.0"}, {"info", info}, {"paths", paths}, {"components", {{"schemas", schemas}}}};
  }
  return {{"swagger", "2.0"}, {"info", info}, {"paths", paths}, {"definitions", schemas}};
}

// FNV-1a, 64 bits: the documents' version in their URL and ETag (it changes when they do).
std::string Hash(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016X}", h);
}

struct Built {
  std::string text;
  std::string hash;
};

Built Build(bool v3) {
  std::string text = Document(Dialect{v3}).dump();
  std::string hash = Hash(text);
  return Built{std::move(text), std::move(hash)};
}

const Built& V3() {
  static const Built* const kDoc = new Built(Build(true));
  return *kDoc;
}

const Built& V2() {
  static const Built* const kDoc = new Built(Build(false));
  return *kDoc;
}

HttpResponse Serve(const HttpRequest& req, const Built& doc) {
  const std::string etag = fmt::format("\"{}\"", doc.hash);
  HttpResponse r{200, "application/json", "", {{"ETag", etag}, {"Vary", "Accept"}}};
  if (req.Header("If-None-Match") == etag) {
    r.status = 304;
    return r;
  }
  r.body = doc.text;
  return r;
}

}  // namespace

HttpResponse OpenApiV3Index() {
  json j = {{"paths",
             {{kGroupVersionPath,
               {{"serverRelativeURL", fmt::format("/openapi/v3/{}?hash={}", kGroupVersionPath, V3().hash)}}}}}};
  return HttpResponse{200, "application/json", j.dump(), {}};
}

HttpResponse OpenApiV3GroupVersion(const HttpRequest& req) { return Serve(req, V3()); }

absl::StatusOr<HttpResponse> OpenApiV2(const HttpRequest& req) {
  const std::string accept = req.Header("Accept");
  if (!accept.empty() && accept.find("json") == std::string::npos && accept.find("*/*") == std::string::npos) {
    return StatusFromProblem(406, "NotAcceptable",
                             fmt::format("/openapi/v2 is served as application/json only, not {}", accept));
  }
  return Serve(req, V2());
}

}  // namespace gpuaas::api::internal
