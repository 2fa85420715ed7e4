#include "api/internal/admin_api.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/internal/bodies.h"
#include "api/internal/pools_api.h"
#include "catalog/catalog.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"
#include "service/clusters.h"
#include "service/defrag.h"

namespace gpuaas::api::internal {
namespace {

using nlohmann::json;

constexpr std::string_view kJson = "application/json";

HttpResponse Json(int status, const json& j) { return HttpResponse{status, std::string(kJson), j.dump(), {}}; }

absl::Status NoAuth() { return absl::UnimplementedError("this server runs without authentication"); }
// How long POST /api/v1/defrag waits for the pool controller to make the moves before it
// answers 202 with the request as it stands.
constexpr Duration kDefragWait = std::chrono::seconds(20);

absl::Status NoDefrag() { return absl::UnimplementedError("this server does not plan defragmentation"); }
absl::Status NoClusters() { return absl::UnimplementedError("this server does not register clusters at run time"); }

json TokenJson(const TokenInfo& t) {
  json j = {{"id", t.id},           {"user", t.user},          {"role", ToString(t.role)},
            {"project", t.project}, {"createdBy", t.created_by}, {"created", FormatTime(t.created)}};
  if (t.role == Role::kAgent) {
    j["cluster"] = t.cluster;
    j["nodes"] = t.nodes;
  }
  return j;
}

json ClusterEntryJson(const service::ClusterEntry& e) {
  json j = {{"name", e.name}, {"driver", e.driver}, {"source", e.source}, {"connected", e.connected}};
  if (!e.server.empty()) j["server"] = e.server;
  if (!e.context.empty()) j["context"] = e.context;
  if (!e.registered_by.empty()) j["registeredBy"] = e.registered_by;
  if (e.registered) j["registered"] = FormatTime(*e.registered);
  if (e.cluster) {
    j["nodes"] = e.cluster->status.nodes;
    j["gpus"] = e.cluster->status.gpus;
    if (!e.cluster->spec.display_name.empty()) j["displayName"] = e.cluster->spec.display_name;
    if (!e.cluster->spec.region.empty()) j["region"] = e.cluster->spec.region;
    const model::Condition* reachable = model::FindCondition(e.cluster->status.conditions, "Reachable");
    j["reachable"] = reachable == nullptr || reachable->status == model::ConditionStatus::kTrue;
    if (reachable != nullptr && reachable->status != model::ConditionStatus::kTrue) j["message"] = reachable->message;
  } else if (!e.unreached.empty()) {
    j["reachable"] = false;
    j["message"] = e.unreached;
  }
  return j;
}

}  // namespace

absl::StatusOr<HttpResponse> AdminApi::Audit(const HttpRequest& req) {
  if (!pools_) return NoPools();
  int64_t after = 0;
  if (req.HasParam("after")) {
    std::optional<int64_t> a = ParseInt(req.Param("after"));
    if (!a || *a < 0) return absl::InvalidArgumentError("after: expected a revision");
    after = *a;
  }
  auto events = pools_->Audit(after, 1000);
  if (!events.ok()) return events.status();
  json items = json::array();
  for (const auto& [rev, e] : *events) {
    items.push_back({{"revision", rev}, {"time", FormatTime(e.time)}, {"user", e.user},
                     {"action", e.action}, {"object", e.object}, {"detail", e.detail}});
  }
  return Json(200, {{"apiVersion", "gpuaas.io/v1"}, {"kind", "AuditEventList"}, {"items", items}});
}

absl::StatusOr<HttpResponse> AdminApi::Tokens() {
  if (!auth_) return NoAuth();
  auto tokens = auth_->List();
  if (!tokens.ok()) return tokens.status();
  json items = json::array();
  for (const TokenInfo& t : *tokens) items.push_back(TokenJson(t));
  return Json(200, {{"items", items}});
}

absl::StatusOr<HttpResponse> AdminApi::CreateToken(const HttpRequest& req, const Principal& who) {
  if (!auth_) return NoAuth();
  ASSIGN_OR_RETURN(const Read<TokenBody> read, ReadBody<TokenBody>(req));
  const TokenBody& body = read.value;
  auto created = auth_->Create(body.user, body.role, body.project, who.user, body.cluster, body.nodes);
  if (!created.ok()) return created.status();
  json out = TokenJson(created->second);
  out["token"] = created->first;
  HttpResponse r = Json(201, out);
  AddWarnings(r, read.warnings);
  return r;
}

absl::StatusOr<HttpResponse> AdminApi::RevokeToken(std::string_view id) {
  if (!auth_) return NoAuth();
  RETURN_IF_ERROR(auth_->Revoke(std::string(id)));
  return HttpResponse{200, std::string(kJson), R"({"revoked":true})", {}};
}

absl::StatusOr<HttpResponse> AdminApi::DefragPlan() {
  if (defrag_ == nullptr) return NoDefrag();
  ASSIGN_OR_RETURN(allocator::DefragPlan plan, defrag_->Plan());
  std::vector<model::Defragmentation::Move> moves;
  for (const allocator::DefragMove& mv : plan.moves) moves.push_back(allocator::Record(mv));
  json room = json::object();
  for (const auto& [model, profiles] : plan.before) {
    for (const auto& [profile, n] : profiles) {
      const int after = plan.after[model][profile];
      room[model][profile] = {{"now", n}, {"after", after}};
    }
  }
  return HttpResponse{200, std::string(kJson),
                      fmt::format(R"({{"moves":{},"room":{}}})", model::EncodeMoves(moves), room.dump()), {}};
}

absl::StatusOr<HttpResponse> AdminApi::DefragApply(const HttpRequest& req, const Principal& who) {
  if (defrag_ == nullptr) return NoDefrag();
  Read<DefragBody> body;  // an empty body: every move
  if (!req.body.empty()) {
    ASSIGN_OR_RETURN(body, ReadBody<DefragBody>(req));
  }
  ASSIGN_OR_RETURN(const model::Defragmentation asked, defrag_->Request(body.value.gpus, who.user));
  // The pool controller makes the moves; the answer waits for it, a while.
  ASSIGN_OR_RETURN(const model::Defragmentation d, defrag_->Await(asked.metadata.name, kDefragWait));
  if (d.status.phase == model::Defragmentation::Phase::kFailed) {
    return absl::FailedPreconditionError(d.status.message);
  }
  HttpResponse r{d.status.phase == model::Defragmentation::Phase::kApplied ? 200 : 202, std::string(kJson),
                 model::Encode(d), {}};
  r.headers.emplace_back("Location", "/apis/gpuaas.io/v1/defragmentations/" + d.metadata.name);
  AddWarnings(r, body.warnings);
  return r;
}

absl::StatusOr<HttpResponse> AdminApi::Clusters() {
  if (clusters_ == nullptr) return NoClusters();
  ASSIGN_OR_RETURN(std::vector<service::ClusterEntry> entries, clusters_->List());
  json items = json::array();
  for (const service::ClusterEntry& e : entries) items.push_back(ClusterEntryJson(e));
  return Json(200, {{"items", items}});
}

absl::StatusOr<HttpResponse> AdminApi::RegisterCluster(const HttpRequest& req, const Principal& who) {
  if (clusters_ == nullptr) return NoClusters();
  ASSIGN_OR_RETURN(Read<ClusterBody> read, ReadBody<ClusterBody>(req));
  ClusterBody& body = read.value;
  model::ClusterRegistration r;
  r.metadata.name = std::move(body.name);
  r.spec.kubeconfig = std::move(body.kubeconfig);
  r.spec.context = std::move(body.context);
  r.spec.display_name = std::move(body.display_name);
  r.spec.region = std::move(body.region);
  ASSIGN_OR_RETURN(model::ClusterRegistration made, clusters_->Register(std::move(r), who.user));
  json out = {{"name", made.metadata.name},
              {"driver", made.spec.driver},
              {"source", "registered"},
              {"registeredBy", made.spec.registered_by}};
  if (!made.spec.context.empty()) out["context"] = made.spec.context;
  HttpResponse reply = Json(201, out);
  AddWarnings(reply, read.warnings);
  return reply;
}

absl::StatusOr<HttpResponse> AdminApi::UnregisterCluster(std::string_view name, const Principal& who) {
  if (clusters_ == nullptr) return NoClusters();
  RETURN_IF_ERROR(clusters_->Unregister(std::string(name), who.user));
  return Json(200, {{"removed", name}});
}

}  // namespace gpuaas::api::internal
