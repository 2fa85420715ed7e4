#include "cli/commands.h"

#include <optional>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/output.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Escape;
using internal::Fail;
using internal::Fetch;
using internal::PrintStructured;
using internal::Send;
using nlohmann::json;

int TokenCreateCmd(const ClientOptions& o, const std::string& user, const std::string& role,
                   const std::string& project, const std::string& cluster, const std::vector<std::string>& nodes,
                   std::ostream& out, std::ostream& err) {
  json j = {{"user", user}, {"role", role}};
  if (!project.empty()) j["project"] = project;
  if (!cluster.empty()) j["cluster"] = cluster;
  if (!nodes.empty()) j["nodes"] = nodes;
  absl::StatusOr<std::string> body = Send(o, "POST", "/api/v1/tokens", j.dump());
  if (!body.ok()) return Fail(err, body.status());
  json t = json::parse(*body, nullptr, false);
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  // The message first, on stderr; the token alone on its own line of stdout, for scripts.
  std::string scope;
  if (!t.value("project", "").empty()) scope = ", project " + t.value("project", "");
  if (t.contains("nodes") && t["nodes"].is_array()) {
    std::vector<std::string> ns;
    for (const json& n : t["nodes"]) ns.push_back(n.get<std::string>());
    scope = fmt::format(", cluster {}, nodes {}", t.value("cluster", ""), fmt::join(ns, ","));
  }
  err << "token " << t.value("id", "") << " for " << t.value("user", "") << " (" << t.value("role", "") << scope
      << "); it is shown only now:\n"
      << std::flush;
  out << t.value("token", "") << "\n" << std::flush;
  return 0;
}

int TokenListCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/tokens");
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  json j = json::parse(*body, nullptr, false);
  Table t({"ID", "USER", "ROLE", "PROJECT", "CREATED BY", "AGE"});
  for (const json& x : j.value("items", json::array())) {
    t.Add({x.value("id", ""), x.value("user", ""), x.value("role", ""),
           x.value("project", "").empty() ? "-" : x.value("project", ""), x.value("createdBy", ""),
           Age(x.value("created", ""))});
  }
  t.Print(out);
  return 0;
}

int TokenRevokeCmd(const ClientOptions& o, const std::string& id, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Send(o, "DELETE", "/api/v1/tokens/" + Escape(id), "");
  if (!body.ok()) return Fail(err, body.status());
  out << "token " << id << " revoked\n";
  return 0;
}

}  // namespace gpuaas::cli
