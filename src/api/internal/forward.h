// Forwarding to the leader replica. Telemetry (live series, health verdicts, alerts) is kept in
// the memory of the replica that runs the controllers; another replica passes telemetry
// requests on to it (docs/architecture.md, "Replicas"). Only src/api may include this.
#ifndef GPUAAS_API_INTERNAL_FORWARD_H_
#define GPUAAS_API_INTERNAL_FORWARD_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "api/http.h"

namespace gpuaas::api::internal {

// Marks a forwarded request: it is served where it arrives, never forwarded again (two
// replicas that each believe the other leads, for a moment during a takeover, cannot loop).
inline constexpr std::string_view kForwardedHeader = "X-Gpuaas-Forwarded-By";

// Sends `req` (method, path, query, body, Authorization, Content-Type, Accept) to the replica at
// `leader_url` ("https://host:port") and returns its answer as it is. Unavailable when it cannot
// be reached within a few seconds. `self` names this replica in kForwardedHeader.
absl::StatusOr<HttpResponse> Forward(const HttpRequest& req, const std::string& leader_url, std::string_view self);

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_FORWARD_H_
