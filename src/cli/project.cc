#include "cli/commands.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::PrintWritten;
using internal::Send;
using nlohmann::json;

namespace {

// "MODEL=N" pairs into a JSON object of counts.
absl::StatusOr<json> Counts(const std::vector<std::string>& pairs, std::string_view flag) {
  json j = json::object();
  for (const std::string& kv : pairs) {
    const size_t eq = kv.find('=');
    std::optional<int64_t> n = eq == std::string::npos ? std::nullopt : ParseInt(kv.substr(eq + 1));
    if (!n || *n < 0) {
      return absl::InvalidArgumentError(fmt::format("{} \"{}\": expected MODEL=COUNT", flag, kv));
    }
    j[kv.substr(0, eq)] = *n;
  }
  return j;
}

}  // namespace

int ProjectCreateCmd(const ClientOptions& o, const ProjectCreate& p, std::ostream& out, std::ostream& err) {
  json j = {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Project"}, {"metadata", {{"name", p.name}}},
            {"spec", json::object()}};
  if (!p.display_name.empty()) j["spec"]["displayName"] = p.display_name;
  if (!p.quota_full.empty() || !p.quota_mig_slices.empty()) {
    absl::StatusOr<json> full = Counts(p.quota_full, "--quota-full");
    if (!full.ok()) return Fail(err, full.status());
    absl::StatusOr<json> slices = Counts(p.quota_mig_slices, "--quota-mig-slices");
    if (!slices.ok()) return Fail(err, slices.status());
    j["spec"]["quota"] = {{"fullGpus", *full}, {"migComputeSlices", *slices}};
  }
  return PrintWritten(o, Send(o, "POST", "/apis/gpuaas.io/v1/projects", j.dump()), "created", out, err);
}

}  // namespace gpuaas::cli
