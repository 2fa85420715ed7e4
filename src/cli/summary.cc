#include "cli/commands.h"

#include <string>

#include "cli/client.h"
#include "cli/output.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::Fetch;
using internal::PrintDoc;
using nlohmann::json;

int Summary(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Format> format = ParseFormat(o.output);
  if (!format.ok()) return Fail(err, format.status());
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/summary");
  if (!body.ok()) return Fail(err, body.status());
  if (*format != Format::kTable) {
    absl::Status s = PrintDoc(*body, *format, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  json s = json::parse(*body, nullptr, false);
  if (!s.is_object()) return Fail(err, absl::InternalError("server sent invalid JSON"));
  const json& p = s["physical"];
  out << fmt::format("Clusters: {}   Nodes: {}   GPUs: {} ({} MIG, {} full, {} unhealthy)\n\n",
                     s.value("clusters", 0), s.value("nodes", 0), p.value("gpus", 0),
                     p.value("migEnabled", 0), p.value("full", 0), p.value("unhealthy", 0));
  Table models({"MODEL", "GPUS", "MIG", "FULL", "UNHEALTHY"});
  for (const json& m : p["byModel"]) {
    models.Add({m.value("model", ""), std::to_string(m.value("gpus", 0)),
                std::to_string(m.value("migEnabled", 0)), std::to_string(m.value("full", 0)),
                std::to_string(m.value("unhealthy", 0))});
  }
  models.Print(out);
  out << "\n";
  Table devices({"MODEL", "PROFILE", "DEVICES", "ALLOCATED", "FREE"});
  for (const json& d : s["logical"]["byProfile"]) {
    devices.Add({d.value("model", ""), d.value("profile", ""), std::to_string(d.value("count", 0)),
                 std::to_string(d.value("allocated", 0)), std::to_string(d.value("free", 0))});
  }
  const json& l = s["logical"];
  devices.Add({"TOTAL", "", std::to_string(l.value("count", 0)),
               std::to_string(l.value("allocated", 0)), std::to_string(l.value("free", 0))});
  devices.Print(out);
  return 0;
}

}  // namespace gpuaas::cli
