// Authentication and roles. Callers present bearer tokens: static ones from a token file (as
// kube-apiserver's --token-auth-file: `token,user,role[,project]` a line) or ones created through
// the API, of which only a SHA-256 hash is stored (kind Token), so that a stolen database yields
// no usable token. Revoking deletes the record; the API waits for its cache to drop it before it
// answers, so a revoked token stops working at once. Thread-safe.
#ifndef GPUAAS_API_AUTH_H_
#define GPUAAS_API_AUTH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "store/cache.h"
#include "store/store.h"

namespace gpuaas::api {

// Agents are node agents: they may push telemetry and nothing else.
enum class Role { kOperator, kMember, kAgent };
std::string_view ToString(Role r);
std::optional<Role> ParseRole(std::string_view s);

struct Principal {
  std::string user;
  Role role = Role::kMember;
  std::string project;  // members only: the one project they belong to
  // Agents only: the cluster and nodes whose GPUs they may push telemetry for.
  std::string cluster;
  std::vector<std::string> nodes;
  bool operator_() const { return role == Role::kOperator; }
  // Members see only their own project; anything else looks absent, so names do not leak.
  bool Sees(std::string_view p) const { return operator_() || project == p; }
};

struct TokenInfo {
  std::string id;
  std::string user;
  Role role = Role::kMember;
  std::string project;
  std::string cluster;             // agents
  std::vector<std::string> nodes;  // agents
  std::string created_by;
  Time created{};
};

inline constexpr std::string_view kTokenKind = "Token";

// Groups of the aggregation layer's X-Remote-Group that carry gpuaas roles.
inline constexpr std::string_view kOperatorGroup = "gpuaas:operators";
inline constexpr std::string_view kProjectGroupPrefix = "gpuaas:project:";

// The caller the front proxy vouches for: `user` (nullopt when empty) as an operator when one of
// `groups` is kOperatorGroup or system:masters, else a member of the project of its first
// kProjectGroupPrefix group, else a member of no project (discovery and fleet reads; no
// project's objects).
std::optional<Principal> FrontProxyPrincipal(std::string_view user, const std::vector<std::string>& groups);

class Authenticator {
 public:
  Authenticator(store::Store& store, store::ObjectCache& cache, const Clock& clock)
      : store_(store), cache_(cache), clock_(clock) {}

  // Loads static tokens. InvalidArgument names the bad line.
  absl::Status LoadTokenFile(const std::string& path);
  absl::Status AddStaticToken(const std::string& token, Principal who);

  // The principal behind a bearer token, or nullopt.
  std::optional<Principal> Authenticate(std::string_view token) const;

  // Creates a token and returns it (the only time it is shown) with its record. A member token
  // names an existing project; an agent token a cluster and one or more of its nodes (NotFound
  // when they do not exist).
  absl::StatusOr<std::pair<std::string, TokenInfo>> Create(const std::string& user, Role role,
                                                           const std::string& project,
                                                           const std::string& created_by,
                                                           const std::string& cluster = "",
                                                           const std::vector<std::string>& nodes = {});
  absl::StatusOr<std::vector<TokenInfo>> List() const;
  // NotFound for an unknown id. Returns once the cache no longer knows the token.
  absl::Status Revoke(const std::string& id);

 private:
  store::Store& store_;
  store::ObjectCache& cache_;
  const Clock& clock_;
  std::map<std::string, Principal> static_;  // by SHA-256 of the token; written before serving
};

// A user name: 1 to 253 bytes of UTF-8.
absl::Status ValidateUser(std::string_view user);

// Lower-case hex SHA-256.
std::string Sha256Hex(std::string_view data);

}  // namespace gpuaas::api

#endif  // GPUAAS_API_AUTH_H_
