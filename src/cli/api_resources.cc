#include "cli/commands.h"

#include <map>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/discovery.h"
#include "cli/output.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace gpuaas::cli {

using internal::Fail;
using internal::FleetAliases;
using internal::ServedType;
using internal::ServedTypes;

int ApiResourcesCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<ServedType>> types = ServedTypes(o);
  if (!types.ok()) return Fail(err, types.status());
  std::map<std::string, std::vector<std::string>> aliases;  // by plural
  for (const auto& [alias, plural] : FleetAliases()) aliases[plural].push_back(alias);
  Table t({"NAME", "SHORTNAMES", "ALSO", "NAMESPACED", "KIND", "VERBS"});
  for (const ServedType& r : *types) {
    t.Add({r.plural, r.short_names.empty() ? "-" : fmt::format("{}", fmt::join(r.short_names, ",")),
           aliases.contains(r.plural) ? fmt::format("{}", fmt::join(aliases[r.plural], ",")) : "-",
           r.namespaced ? "true" : "false", r.kind, fmt::format("{}", fmt::join(r.verbs, ","))});
  }
  t.Print(out);
  return 0;
}

}  // namespace gpuaas::cli
