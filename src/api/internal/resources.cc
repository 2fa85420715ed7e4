#include "api/internal/resources.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/internal/tables.h"
#include "common/problem.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/billing.h"
#include "model/fleet.h"
#include "model/labels.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api {

const std::vector<ResourceType>& ResourceTypes() {
  using std::string;
  static const std::vector<ResourceType> kTypes = {
      {string(model::Cluster::kPlural), string(model::Cluster::kKind)},
      {string(model::NodeCapacity::kPlural), string(model::NodeCapacity::kKind)},
      {string(model::GpuCapacity::kPlural), string(model::GpuCapacity::kKind)},
      {string(model::SpecAndCount::kPlural), string(model::SpecAndCount::kKind)},
      {string(model::Project::kPlural), string(model::Project::kKind), false, true, false, false, true},
      {string(model::GpuPool::kPlural), string(model::GpuPool::kKind), true, true, true, false, true},
      {string(model::MigLayout::kPlural), string(model::MigLayout::kKind), false, false, false, true},
      {string(model::Defragmentation::kPlural), string(model::Defragmentation::kKind), false, false, false, true},
      {string(model::Workload::kPlural), string(model::Workload::kKind), true, true, true, false, true},
      {string(model::Profile::kPlural), string(model::Profile::kKind), true},
      {string(model::RateCard::kPlural), string(model::RateCard::kKind), false, true, false, false, true},
      {string(model::UsageRecord::kPlural), string(model::UsageRecord::kKind), true},
      {"invoices", string(model::kInvoiceKind), true},  // closed months' invoices, as kept
      {string(model::CreditNote::kPlural), string(model::CreditNote::kKind), true, false, false, false, true},
      {string(model::Loan::kPlural), string(model::Loan::kKind), false, false, false, true},
  };
  return kTypes;
}

namespace internal {
namespace {

constexpr std::string_view kJson = "application/json";

absl::Status Forbidden(const Principal& who) {
  return absl::PermissionDeniedError(
      fmt::format("user {} ({}) may not do this; operators only", who.user, ToString(who.role)));
}

// Node agents read the fleet inventory, nothing of a project (Grant::kFleet).
absl::Status FleetOnlyForAgents(const ResourceType& type, const Principal& who) {
  if (who.role != Role::kAgent || !(type.namespaced || type.kind == model::Project::kKind)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(fmt::format(
      "user {} is a node agent: it reads the fleet inventory only, not {}", who.user, type.plural));
}

nlohmann::json GroupJson() {
  const nlohmann::json version = {{"groupVersion", "gpuaas.io/v1"}, {"version", "v1"}};
  return {{"name", "gpuaas.io"}, {"versions", {version}}, {"preferredVersion", version}};
}

}  // namespace

const ResourceType* FindType(std::string_view plural) {
  for (const ResourceType& t : ResourceTypes()) {
    if (t.plural == plural) return &t;
  }
  return nullptr;
}

absl::Status UnknownResource(std::string_view plural) {
  return absl::NotFoundError(fmt::format("the server has no resource type \"{}\" in gpuaas.io/v1", plural));
}

std::optional<std::string_view> PluralOf(std::string_view path) {
  constexpr std::string_view kPrefix = "/apis/gpuaas.io/v1/";
  if (!path.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = path.substr(kPrefix.size());
  auto next = [&]() {
    const size_t slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    return seg;
  };
  std::string_view plural = next();
  if (plural == "namespaces") {
    if (rest.empty()) return std::nullopt;  // the namespaces themselves
    next();                                 // the namespace
    if (rest.empty()) return std::nullopt;  // a namespace itself
    plural = next();
  }
  if (plural.empty()) return std::nullopt;
  return plural;
}

absl::Status NotServed(std::string_view plural, std::string_view verb) {
  const ResourceType* t = FindType(plural);
  if (t == nullptr) return UnknownResource(plural);
  std::string verbs = "get, list, watch";
  if (t->creatable) verbs += ", create";
  if (t->deletable) verbs += ", delete";
  if (t->patchable) verbs += ", patch, update";
  return MethodNotAllowed(fmt::format("{} cannot be {} here; {} take: {}{}", plural, verb, plural, verbs,
                                      t->namespaced ? "" : fmt::format(" (they are not in a project: /apis/gpuaas.io/v1/{})", plural)));
}

namespace {
// A field selector as kubectl's `delete --wait` and `get --field-selector` send it: terms of
// metadata.name and metadata.namespace, with = or ==.
struct FieldSelector {
  std::optional<std::string> name;
  std::optional<std::string> ns;
};
absl::StatusOr<FieldSelector> ParseFieldSelector(std::string_view text) {
  FieldSelector out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view term = Trim(text.substr(start, end - start));
    start = end + 1;
    if (term.empty()) continue;
    const size_t eq = term.find('=');
    if (eq == std::string_view::npos || (eq > 0 && term[eq - 1] == '!')) {
      return absl::InvalidArgumentError(fmt::format(
          "fieldSelector: \"{}\" is not supported; use metadata.name=NAME or metadata.namespace=PROJECT", term));
    }
    const std::string_view key = Trim(term.substr(0, eq));
    std::string_view value = term.substr(eq + 1);
    if (value.starts_with("=")) value.remove_prefix(1);
    if (key == "metadata.name") {
      out.name = std::string(Trim(value));
    } else if (key == "metadata.namespace") {
      out.ns = std::string(Trim(value));
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "fieldSelector: field label \"{}\" is not supported; use metadata.name or metadata.namespace", key));
    }
  }
  return out;
}
}  // namespace

absl::StatusOr<HttpResponse> ResourceApi::List(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                               const Principal& who) {
  const ResourceType* type = FindType(plural);
  if (type == nullptr) return UnknownResource(plural);
  if (!ns.empty() && !type->namespaced) return UnknownResource(plural);
  if (type->operators_only && !who.operator_()) return Forbidden(who);
  RETURN_IF_ERROR(FleetOnlyForAgents(*type, who));
  if (!who.operator_()) {
    // Members list their own project's objects only; another project looks empty-handed.
    if (!ns.empty() && !who.Sees(ns)) {
      return absl::NotFoundError(fmt::format("projects \"{}\" not found", ns));
    }
    if (type->namespaced) ns = who.project;
  }
  const bool only_own_project = !who.operator_() && type->kind == model::Project::kKind;
  absl::StatusOr<std::optional<TableRequest>> table = WantsTable(req.Header("Accept"), req.Param("includeObject"));
  if (!table.ok()) return table.status();
  absl::StatusOr<model::LabelSelector> selector = model::LabelSelector::Parse(req.Param("labelSelector"));
  if (!selector.ok()) return selector.status();
  ASSIGN_OR_RETURN(const FieldSelector fields, ParseFieldSelector(req.Param("fieldSelector")));
  // No object or project is named this (names are DNS-1123): what a selector that contradicts the
  // path, or the caller's own project, selects.
  constexpr std::string_view kNone = "\x01";
  std::string field_ns;
  if (fields.ns && !fields.ns->empty()) {
    field_ns = ns.empty() || *fields.ns == ns ? *fields.ns : std::string(kNone);
    ns = field_ns;
  }
  // A member lists the one project it may see, whatever name it asks for.
  std::optional<std::string> only_name = fields.name;
  if (only_own_project) only_name = !fields.name || *fields.name == who.project ? who.project : std::string(kNone);
  if (const std::string w = req.Param("watch"); !w.empty() && w != "0" && w != "false") {
    if (w != "1" && w != "true") {
      return absl::InvalidArgumentError(fmt::format("watch: \"{}\" is not true, false, 1 or 0", w));
    }
    WatchRequest wr;
    wr.kind = type->kind;
    wr.ns = std::string(ns);
    if (only_name) wr.only_name = *only_name;
    wr.selector = *selector;
    if (req.HasParam("resourceVersion") && !req.Param("resourceVersion").empty()) {
      std::optional<int64_t> rv = ParseInt(req.Param("resourceVersion"));
      if (!rv || *rv < 0) {
        return absl::InvalidArgumentError(
            fmt::format("resourceVersion: \"{}\" is not a non-negative integer", req.Param("resourceVersion")));
      }
      wr.resource_version = *rv;
    }
    const std::string b = req.Param("allowWatchBookmarks");
    wr.bookmarks = b == "true" || b == "1";
    if (*table) {
      // Each event's object is a Table of one row; the first carries the column definitions.
      auto first = std::make_shared<bool>(true);
      wr.render = [this, plural = type->plural, t = **table, first](const std::string& object) {
        absl::StatusOr<std::string> one = ObjectAsTable(plural, object, t, clock_.Now(), *first);
        *first = false;
        return one.ok() ? *one : object;
      };
    }
    if (req.HasParam("timeoutSeconds")) {
      std::optional<int64_t> t = ParseInt(req.Param("timeoutSeconds"));
      if (!t || *t <= 0 || *t > 86400) {
        return absl::InvalidArgumentError(fmt::format(
            "timeoutSeconds: \"{}\" is not a number of seconds from 1 to 86400", req.Param("timeoutSeconds")));
      }
      wr.timeout = std::chrono::seconds(*t);
    }
    return watches_.Open(std::move(wr));
  }
  size_t limit = 0;
  if (req.HasParam("limit")) {
    std::optional<int64_t> l = ParseInt(req.Param("limit"));
    if (!l || *l < 0) {
      return absl::InvalidArgumentError(fmt::format("limit: \"{}\" is not a non-negative integer", req.Param("limit")));
    }
    limit = static_cast<size_t>(*l);
  }
  // Every page of one list reads the first page's snapshot.
  std::shared_ptr<const store::KindSnapshot> snap;
  std::optional<ContinueAt> at;
  if (req.HasParam("continue") && !req.Param("continue").empty()) {
    absl::StatusOr<ContinueAt> parsed = ParseContinue(type->plural, req.Param("continue"));
    if (!parsed.ok()) return parsed.status();
    at = *parsed;
    snap = pages_.Find(type->kind, at->revision, std::chrono::steady_clock::now());
    if (snap == nullptr) {
      return absl::OutOfRangeError(fmt::format(
          "continue: the list at resourceVersion {} is no longer held (pages are kept {} s after the last "
          "one was read); list again from the start",
          at->revision, kPageTtl.count()));
    }
  } else {
    snap = cache_.Snapshot(type->kind);
  }
  const auto& items = snap->items;
  size_t begin = 0;
  if (at) {
    begin = static_cast<size_t>(std::upper_bound(items.begin(), items.end(), at->after,
                                                 [](const std::pair<std::string, std::string>& key, const auto& obj) {
                                                   return key < std::make_pair(obj->ns, obj->name);
                                                 }) -
                                items.begin());
  }
  std::string body;
  body.reserve(256 + (limit ? std::min(limit, items.size()) : items.size()) *
                         (items.empty() ? 0 : items[0]->json.size() + 1));
  body += fmt::format(R"({{"apiVersion":"gpuaas.io/v1","kind":"{}List","items":[)", type->kind);
  size_t n = 0;
  size_t i = begin;
  auto selected = [&](size_t k) {
    return (ns.empty() || items[k]->ns == ns) && (!only_name || items[k]->name == *only_name) &&
           (selector->Empty() || selector->Matches(items[k]->labels));
  };
  for (; i < items.size(); ++i) {
    if (!selected(i)) continue;
    if (limit && n == limit) break;
    if (n++) body += ',';
    body += items[i]->json;
  }
  body += fmt::format(R"(],"metadata":{{"resourceVersion":"{}")", snap->revision);
  if (i < items.size()) {
    // More may follow: hand out a token naming the last item returned.
    size_t last = i;
    while (last > begin) {
      --last;
      if (selected(last)) break;
    }
    body += fmt::format(R"(,"continue":"{}")",
                        ContinueToken(type->plural, snap->revision, items[last]->ns, items[last]->name));
    pages_.Hold(type->kind, snap, std::chrono::steady_clock::now());
    if (selector->Empty() && ns.empty() && !only_name) {
      body += fmt::format(R"(,"remainingItemCount":{})", items.size() - i);
    }
  }
  body += "}}";
  if (*table) {
    absl::StatusOr<std::string> t = ListAsTable(type->plural, body, **table, clock_.Now());
    if (!t.ok()) return t.status();
    body = std::move(*t);
  }
  return HttpResponse{200, std::string(kJson), std::move(body), {}};
}

absl::StatusOr<HttpResponse> ResourceApi::Get(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                              std::string_view name, const Principal& who) {
  const ResourceType* type = FindType(plural);
  if (type == nullptr) return UnknownResource(plural);
  if (!ns.empty() && !type->namespaced) return UnknownResource(plural);
  if (type->operators_only && !who.operator_()) return Forbidden(who);
  RETURN_IF_ERROR(FleetOnlyForAgents(*type, who));
  const bool hidden =
      (type->namespaced && !who.Sees(ns)) || (type->kind == model::Project::kKind && !who.Sees(name));
  if (hidden) {
    return absl::NotFoundError(fmt::format("{} \"{}\" not found", type->plural, name));
  }
  if (ns.empty() && type->namespaced) {
    return absl::NotFoundError(fmt::format("{} live in a project: GET /apis/gpuaas.io/v1/namespaces/PROJECT/{}/{}",
                                           type->plural, type->plural, name));
  }
  // GPUs (and their layouts) are named by the GPU UUID in lower case; a UUID as NVIDIA spells
  // it (GPU-..., as every command prints it) names the same GPU.
  const bool by_uuid = type->kind == model::GpuCapacity::kKind || type->kind == model::MigLayout::kKind;
  const std::string key = by_uuid ? ToLower(name) : std::string(name);
  std::shared_ptr<const store::CachedObject> obj = cache_.Get(type->kind, ns, key);
  if (!obj) {
    return absl::NotFoundError(fmt::format("{} \"{}\" not found{}", type->plural, name,
                                           ns.empty() ? "" : fmt::format(" in project {}", ns)));
  }
  absl::StatusOr<std::optional<TableRequest>> table = WantsTable(req.Header("Accept"), req.Param("includeObject"));
  if (!table.ok()) return table.status();
  if (*table) {
    absl::StatusOr<std::string> t = ObjectAsTable(type->plural, obj->json, **table, clock_.Now());
    if (!t.ok()) return t.status();
    return HttpResponse{200, std::string(kJson), std::move(*t), {}};
  }
  return HttpResponse{200, std::string(kJson), obj->json, {}};
}

HttpResponse ApiVersions() {
  // No core ("v1") group is served: kubectl then discovers the named groups only.
  const nlohmann::json j = {{"kind", "APIVersions"},
                            {"versions", nlohmann::json::array()},
                            {"serverAddressByClientCIDRs", nlohmann::json::array()}};
  return HttpResponse{200, std::string(kJson), j.dump(), {}};
}

HttpResponse ApiGroupList() {
  const nlohmann::json j = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", {GroupJson()}}};
  return HttpResponse{200, std::string(kJson), j.dump(), {}};
}

HttpResponse ApiGroup() {
  nlohmann::json j = GroupJson();
  j["kind"] = "APIGroup";
  j["apiVersion"] = "v1";
  return HttpResponse{200, std::string(kJson), j.dump(), {}};
}

HttpResponse ApiResourceList() {
  nlohmann::json j = {{"kind", "APIResourceList"},
                      {"apiVersion", "v1"},
                      {"groupVersion", "gpuaas.io/v1"},
                      {"resources", nlohmann::json::array()}};
  static const std::map<std::string, std::vector<std::string>> kShortNames = {
      {"clusters", {"gcl"}},      {"nodecapacities", {"nc", "nodecap"}}, {"gpucapacities", {"gc", "gpu"}},
      {"specandcounts", {"sac"}}, {"projects", {"proj"}},                {"gpupools", {"gp", "pool"}},
      {"miglayouts", {"ml"}},     {"workloads", {"wl"}},                 {"profiles", {"prof"}},
      {"ratecards", {"rc"}},      {"usagerecords", {"ur"}},              {"invoices", {"inv"}},
      {"creditnotes", {"cn"}}};
  for (const ResourceType& t : ResourceTypes()) {
    nlohmann::json verbs = {"get", "list", "watch"};
    if (t.creatable) verbs.push_back("create");
    if (t.deletable) verbs.push_back("delete");
    if (t.patchable) {
      verbs.push_back("patch");
      verbs.push_back("update");
    }
    auto sn = kShortNames.find(t.plural);
    j["resources"].push_back({{"name", t.plural},
                              {"singularName", ToLower(t.kind)},
                              {"kind", t.kind},
                              {"namespaced", t.namespaced},
                              {"verbs", verbs},
                              {"shortNames", sn == kShortNames.end() ? nlohmann::json::array() : nlohmann::json(sn->second)},
                              {"categories", {"gpuaas"}}});
  }
  return HttpResponse{200, std::string(kJson), j.dump(), {}};
}

}  // namespace internal
}  // namespace gpuaas::api
