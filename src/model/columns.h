// The columns of each kind as a table shows them: `gpuaas get` prints them, and the API answers
// them as a Kubernetes Table (meta.k8s.io/v1) when kubectl asks, so both show the same. Pure:
// cells are computed from an object's wire JSON and the time `now` (for AGE).
#ifndef GPUAAS_MODEL_COLUMNS_H_
#define GPUAAS_MODEL_COLUMNS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "nlohmann/json_fwd.hpp"

namespace gpuaas::model {

// Column names, upper case as kubectl prints them, NAME first. Plurals without columns of their
// own (invoices, creditnotes) get NAME and AGE.
std::vector<std::string> Columns(std::string_view plural);

// The cells of one object (its JSON, as the API serves it, already parsed) under
// Columns(plural). InvalidArgument when it is not a JSON object.
absl::StatusOr<std::vector<std::string>> Row(std::string_view plural, const nlohmann::json& object, Time now);

// "5d", "3h", "12m", "40s" from an RFC 3339 timestamp to `now`; "<unknown>" when it does not parse.
std::string Age(std::string_view timestamp, Time now);

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_COLUMNS_H_
