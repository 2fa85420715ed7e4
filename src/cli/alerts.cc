#include "cli/commands.h"

#include <optional>
#include <string>

#include "cli/client.h"
#include "cli/output.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::Fetch;
using internal::PrintStructured;
using nlohmann::json;

int AlertsCmd(const ClientOptions& o, bool all, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, all ? "/api/v1/alerts" : "/api/v1/alerts?active=true");
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  json j = json::parse(*body, nullptr, false);
  Table t({"AGE", "SEVERITY", "NODE", "GPU", "SOURCE", "CONDITION", "STATE", "MESSAGE", "ACTION"});
  for (const json& a : j.value("items", json::array())) {
    std::string gpu = a.value("gpu", "");
    if (a.contains("gpuInstance")) gpu += "/" + a["gpuInstance"].dump();
    if (gpu.empty() && a.contains("project")) gpu = "project/" + a.value("project", "");  // a budget alert
    t.Add({Age(a.value("time", "")), a.value("severity", ""), a.value("node", "").empty() ? "-" : a.value("node", ""),
           gpu, a.value("source", ""), a.value("condition", "").empty() ? "-" : a.value("condition", ""),
           a.value("active", false) ? "active" : "resolved", a.value("message", ""), a.value("action", "")});
  }
  if (j.value("items", json::array()).empty()) {
    err << (all ? "No alerts found.\n" : "No active alerts found (--all shows resolved ones too).\n");
    return 0;
  }
  t.Print(out);
  return 0;
}

}  // namespace gpuaas::cli
