// The server's discovery document (/apis/gpuaas.io/v1) as the client reads it: the resource types
// `gpuaas get` and `gpuaas api-resources` know, and the fleet aliases operators use beside them.
// Internal to the cli module, below get.cc and api_resources.cc and above cli/client.h.
#ifndef GPUAAS_CLI_DISCOVERY_H_
#define GPUAAS_CLI_DISCOVERY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/commands.h"

namespace gpuaas::cli::internal {

// A resource type as the server's discovery document (/apis/gpuaas.io/v1) lists it: the one list
// of what `gpuaas get` takes, as kubectl reads it.
struct ServedType {
  std::string plural;
  std::string singular;
  std::string kind;
  bool namespaced = false;
  std::vector<std::string> short_names;
  std::vector<std::string> verbs;
};

// The types the server serves, in its order. Fetch's errors when the request fails;
// Internal when its discovery document lists no resources.
absl::StatusOr<std::vector<ServedType>> ServedTypes(const ClientOptions& o);

// The names operators use for the fleet's kinds, beside the API's: nodes are NodeCapacities,
// GPUs GpuCapacities, specs SpecAndCounts, pools GpuPools. (Not short names in discovery, where
// "nodes" would shadow Kubernetes' own Nodes behind the aggregation layer.)
// The map (alias -> plural) lives for the whole process; thread-safe.
const std::map<std::string, std::string>& FleetAliases();

}  // namespace gpuaas::cli::internal

#endif  // GPUAAS_CLI_DISCOVERY_H_
