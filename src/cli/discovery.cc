#include "cli/discovery.h"

#include <map>
#include <string>
#include <vector>

#include "cli/client.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli::internal {

using nlohmann::json;

absl::StatusOr<std::vector<ServedType>> ServedTypes(const ClientOptions& o) {
  ASSIGN_OR_RETURN(const std::string body, Fetch(o, "/apis/gpuaas.io/v1"));
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("resources") || !j["resources"].is_array()) {
    return absl::InternalError("the server's discovery document (/apis/gpuaas.io/v1) lists no resources");
  }
  std::vector<ServedType> out;
  for (const json& r : j["resources"]) {
    if (!r.is_object()) continue;
    ServedType t{r.value("name", ""), r.value("singularName", ""), r.value("kind", ""), r.value("namespaced", false),
                 {}, {}};
    for (const json& n : r.value("shortNames", json::array())) {
      if (n.is_string()) t.short_names.push_back(n.get<std::string>());
    }
    for (const json& v : r.value("verbs", json::array())) {
      if (v.is_string()) t.verbs.push_back(v.get<std::string>());
    }
    if (!t.plural.empty()) out.push_back(std::move(t));
  }
  return out;
}

const std::map<std::string, std::string>& FleetAliases() {
  static const std::map<std::string, std::string> kAliases = {
      {"nodes", "nodecapacities"}, {"node", "nodecapacities"}, {"gpus", "gpucapacities"},
      {"specs", "specandcounts"},  {"spec", "specandcounts"},  {"pools", "gpupools"}};
  return kAliases;
}

}  // namespace gpuaas::cli::internal
