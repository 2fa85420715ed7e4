#include "cli/commands.h"

#include <optional>
#include <string>

#include "cli/client.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Escape;
using internal::Fail;
using internal::PrintWritten;
using internal::Send;
using nlohmann::json;

int WorkloadRunCmd(const ClientOptions& o, const WorkloadRun& r, std::ostream& out, std::ostream& err) {
  const size_t eq = r.resource.rfind('=');
  std::optional<int64_t> n = eq == std::string::npos ? std::optional<int64_t>(1) : ParseInt(r.resource.substr(eq + 1));
  if (!n) {
    return Fail(err, absl::InvalidArgumentError(fmt::format(
                         "--resource \"{}\": expected RESOURCE[=COUNT], e.g. nvidia.com/mig-3g.71gb=1", r.resource)));
  }
  json j = {{"apiVersion", "gpuaas.io/v1"},
            {"kind", "Workload"},
            {"metadata", {{"name", r.name}, {"namespace", r.project}}},
            {"spec", {{"pool", r.pool},
                      {"resources", {{r.resource.substr(0, eq), *n}}},
                      {"priorityClassName", r.priority}}}};
  if (!r.model.empty()) j["spec"]["model"] = r.model;
  if (r.no_requeue) j["spec"]["requeueOnReclaim"] = false;
  return PrintWritten(o, Send(o, "POST", fmt::format("/apis/gpuaas.io/v1/namespaces/{}/workloads", Escape(r.project)), j.dump()),
                      "created", out, err);
}

int WorkloadDeleteCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                      std::ostream& out, std::ostream& err) {
  return PrintWritten(o, Send(o, "DELETE", fmt::format("/apis/gpuaas.io/v1/namespaces/{}/workloads/{}", Escape(project), Escape(name)), ""),
                      "deleted", out, err);
}

}  // namespace gpuaas::cli
