#include "api/auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <fstream>

#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/object.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", p[i]);
  return out;
}

bool SameHash(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string_view ToString(Role r) {
  switch (r) {
    case Role::kOperator: return "operator";
    case Role::kMember: return "member";
    case Role::kAgent: return "agent";
  }
  return "member";
}

std::optional<Role> ParseRole(std::string_view s) {
  if (s == "operator") return Role::kOperator;
  if (s == "member") return Role::kMember;
  if (s == "agent") return Role::kAgent;
  return std::nullopt;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return Hex(md, sizeof md);
}

absl::Status ValidateUser(std::string_view user) {
  if (user.empty()) return absl::InvalidArgumentError("user: required");
  if (user.size() > 253 || !IsValidUtf8(user)) {
    return absl::InvalidArgumentError("user: at most 253 bytes of UTF-8");
  }
  return absl::OkStatus();
}

absl::Status Authenticator::AddStaticToken(const std::string& token, Principal who) {
  if (token.size() < 16) return absl::InvalidArgumentError("tokens must have at least 16 characters");
  RETURN_IF_ERROR(ValidateUser(who.user));
  if (who.role == Role::kAgent && (who.cluster.empty() || who.nodes.empty())) {
    return absl::InvalidArgumentError("an agent token names its cluster and nodes (CLUSTER/NODE[+NODE...])");
  }
  if (who.role == Role::kMember && who.project.empty()) {
    return absl::InvalidArgumentError("a member token needs a project");
  }
  static_[Sha256Hex(token)] = std::move(who);
  return absl::OkStatus();
}

absl::Status Authenticator::LoadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot read token file {}", path));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string_view l = Trim(line);
    if (l.empty() || l.front() == '#') continue;
    std::vector<std::string_view> f = Split(l, ',');
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(fmt::format(
          "{}:{}: {} (want token,user,role[,project] or token,user,agent,CLUSTER/NODE[+NODE...])", path, n, why));
    };
    if (f.size() < 3 || f.size() > 4) return bad("wrong number of fields");
    std::optional<Role> role = ParseRole(Trim(f[2]));
    if (!role) return bad("role must be operator, member or agent");
    Principal p{std::string(Trim(f[1])), *role, "", "", {}};
    const std::string_view scope = f.size() == 4 ? Trim(f[3]) : std::string_view();
    if (*role == Role::kAgent) {
      const size_t slash = scope.find('/');
      if (slash == std::string_view::npos) return bad("an agent is bound to CLUSTER/NODE[+NODE...]");
      p.cluster = std::string(scope.substr(0, slash));
      for (std::string_view node : Split(scope.substr(slash + 1), '+')) {
        if (!node.empty()) p.nodes.emplace_back(node);
      }
    } else if (*role == Role::kMember) {
      p.project = std::string(scope);
    } else if (!scope.empty()) {
      return bad("an operator belongs to no project");
    }
    if (absl::Status s = AddStaticToken(std::string(Trim(f[0])), p); !s.ok()) {
      return bad(std::string(s.message()));
    }
  }
  return absl::OkStatus();
}

std::optional<Principal> Authenticator::Authenticate(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  const std::string hash = Sha256Hex(token);
  if (auto it = static_.find(hash); it != static_.end()) return it->second;
  // API tokens are "ID.SECRET"; the record named ID holds the hash of the whole token.
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  std::shared_ptr<const store::CachedObject> rec = cache_.Get(kTokenKind, "", token.substr(0, dot));
  if (!rec) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(rec->json, nullptr, false);
  if (!j.is_object() || !SameHash(j["spec"].value("sha256", ""), hash)) return std::nullopt;
  std::optional<Role> role = ParseRole(j["spec"].value("role", ""));
  if (!role) return std::nullopt;
  Principal p{j["spec"].value("user", ""), *role, j["spec"].value("project", ""), j["spec"].value("cluster", ""), {}};
  if (auto n = j["spec"].find("nodes"); n != j["spec"].end() && n->is_array()) {
    for (const auto& node : *n) {
      if (node.is_string()) p.nodes.push_back(node.get<std::string>());
    }
  }
  return p;
}

absl::StatusOr<std::pair<std::string, TokenInfo>> Authenticator::Create(const std::string& user, Role role,
                                                                        const std::string& project,
                                                                        const std::string& created_by,
                                                                        const std::string& cluster,
                                                                        const std::vector<std::string>& nodes) {
  RETURN_IF_ERROR(ValidateUser(user));
  if (role == Role::kMember && project.empty()) return absl::InvalidArgumentError("project: a member token needs one");
  if (role != Role::kMember && !project.empty()) {
    return absl::InvalidArgumentError("project: only member tokens belong to a project");
  }
  if (!project.empty()) {
    RETURN_IF_ERROR(model::ValidateName(project));
    // A token for a project created later would gain it: the project must exist first.
    if (!cache_.Get("Project", "", project)) {
      return absl::NotFoundError(fmt::format("project \"{}\" not found; create it before its members' tokens", project));
    }
  }
  std::string bound_cluster = cluster;
  std::vector<std::string> bound_nodes;
  if (role == Role::kAgent) {
    // A node as gpuaas prints it ("CLUSTER.NODE", which names the cluster too) or as its
    // cluster names it (with the cluster given).
    for (const std::string& n : nodes) {
      const size_t dot = n.find('.');
      if (bound_cluster.empty() && dot != std::string::npos) bound_cluster = n.substr(0, dot);
      const std::string prefix = bound_cluster + ".";
      bound_nodes.push_back(n.starts_with(prefix) && cache_.Get("NodeCapacity", "", n) ? n.substr(prefix.size()) : n);
    }
    if (bound_cluster.empty() || bound_nodes.empty()) {
      return absl::InvalidArgumentError(
          "an agent token names its nodes, as gpuaas get nodes prints them (CLUSTER.NODE, e.g. alpha.h200-01), or "
          "its cluster and the nodes' names there (--cluster alpha --node h200-01); it may push telemetry only for "
          "the GPUs there");
    }
    for (const std::string& n : bound_nodes) {
      if (!cache_.Get("NodeCapacity", "", bound_cluster + "." + n)) {
        return absl::NotFoundError(fmt::format(
            "node \"{}\" of cluster \"{}\" not found; name a node as gpuaas get nodes prints it (CLUSTER.NODE, "
            "e.g. {}.h200-01) or by its name in the cluster", n, bound_cluster, bound_cluster));
      }
    }
  } else if (!cluster.empty() || !nodes.empty()) {
    return absl::InvalidArgumentError("cluster, nodes: only agent tokens are bound to nodes");
  }
  unsigned char id_bytes[8], secret[24];
  if (RAND_bytes(id_bytes, sizeof id_bytes) != 1 || RAND_bytes(secret, sizeof secret) != 1) {
    return absl::UnavailableError("no randomness available for a token");
  }
  TokenInfo info{Hex(id_bytes, sizeof id_bytes), user, role, project, bound_cluster, bound_nodes, created_by,
                 clock_.Now()};
  const std::string token = info.id + "." + Hex(secret, sizeof secret);
  nlohmann::json j = {{"apiVersion", "gpuaas.io/v1"},
                      {"kind", kTokenKind},
                      {"metadata", {{"name", info.id}, {"creationTimestamp", FormatTime(info.created)}}},
                      {"spec", {{"user", info.user}, {"role", ToString(role)}, {"project", info.project},
                                {"createdBy", created_by}, {"sha256", Sha256Hex(token)}}}};
  if (role == Role::kAgent) {
    j["spec"]["cluster"] = bound_cluster;
    j["spec"]["nodes"] = bound_nodes;
  }
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) {
    return tx.Put({std::string(kTokenKind), "", info.id}, "", j.dump(), store::kMustNotExist);
  }));
  cache_.WaitFor(store_.Revision(), std::chrono::seconds(5));
  return std::make_pair(token, info);
}

absl::StatusOr<std::vector<TokenInfo>> Authenticator::List() const {
  std::vector<TokenInfo> out;
  const std::shared_ptr<const store::KindSnapshot> tokens = cache_.Snapshot(std::string(kTokenKind));
  for (const auto& rec : tokens->items) {
    nlohmann::json j = nlohmann::json::parse(rec->json, nullptr, false);
    if (!j.is_object()) continue;
    TokenInfo t;
    t.id = rec->name;
    t.user = j["spec"].value("user", "");
    t.role = ParseRole(j["spec"].value("role", "")).value_or(Role::kMember);
    t.project = j["spec"].value("project", "");
    t.cluster = j["spec"].value("cluster", "");
    if (auto n = j["spec"].find("nodes"); n != j["spec"].end() && n->is_array()) {
      for (const auto& node : *n) {
        if (node.is_string()) t.nodes.push_back(node.get<std::string>());
      }
    }
    t.created_by = j["spec"].value("createdBy", "");
    t.created = ParseTime(j["metadata"].value("creationTimestamp", "")).value_or(Time{});
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status Authenticator::Revoke(const std::string& id) {
  absl::Status s = store_.Transact([&](store::Txn& tx) {
    return tx.Delete({std::string(kTokenKind), "", id}, store::kAnyVersion);
  });
  if (absl::IsNotFound(s)) return absl::NotFoundError(fmt::format("token \"{}\" not found", id));
  RETURN_IF_ERROR(s);
  cache_.WaitFor(store_.Revision(), std::chrono::seconds(5));
  return absl::OkStatus();
}

std::optional<Principal> FrontProxyPrincipal(std::string_view user, const std::vector<std::string>& groups) {
  if (user.empty()) return std::nullopt;
  Principal p{std::string(user), Role::kMember, "", "", {}};
  for (const std::string& g : groups) {
    if (g == kOperatorGroup || g == "system:masters") return Principal{std::string(user), Role::kOperator, "", "", {}};
  }
  for (const std::string& g : groups) {
    if (g.starts_with(kProjectGroupPrefix) && g.size() > kProjectGroupPrefix.size()) {
      p.project = g.substr(kProjectGroupPrefix.size());
      break;
    }
  }
  return p;
}

}  // namespace gpuaas::api
