#include "cli/commands.h"

#include <optional>
#include <cstdint>
#include <string>

#include "cli/client.h"
#include "cli/output.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::Fetch;
using internal::PrintStructured;
using nlohmann::json;

int AuditCmd(const ClientOptions& o, int64_t after, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, fmt::format("/api/v1/audit?after={}", after));
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  const json j = json::parse(*body, nullptr, false);
  Table t({"REVISION", "TIME", "USER", "ACTION", "OBJECT", "DETAIL"});
  for (const json& e : j.value("items", json::array())) {
    t.Add({std::to_string(e.value("revision", int64_t{0})), e.value("time", ""), e.value("user", ""),
           e.value("action", ""), e.value("object", ""), e.value("detail", "")});
  }
  if (t.empty()) {
    err << "No audit events found.\n";
    return 0;
  }
  t.Print(out);
  return 0;
}

}  // namespace gpuaas::cli
