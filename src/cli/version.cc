#include "cli/commands.h"

#include <string>

#include "cli/client.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::Fetch;
using nlohmann::json;

int Version(const ClientOptions& o, const std::string& client_version, std::ostream& out,
            std::ostream& err) {
  out << "Client Version: " << client_version << "\n";
  absl::StatusOr<std::string> body = Fetch(o, "/version");
  // The client's version is printed, but a server that does not answer is an error (scripts check
  // the exit code), as kubectl version does.
  if (!body.ok()) return Fail(err, body.status());
  json v = json::parse(*body, nullptr, false);
  out << "Server Version: " << (v.is_object() ? v.value("gitVersion", "?") : "?") << "\n";
  return 0;
}

}  // namespace gpuaas::cli
