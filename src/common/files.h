// Whole files read at the edges (the CLI, the server's wiring): what a flag names.
#ifndef GPUAAS_COMMON_FILES_H_
#define GPUAAS_COMMON_FILES_H_

#include <string>

#include "absl/status/statusor.h"

namespace gpuaas {

// The bytes of `path`; NotFound naming it when it cannot be opened.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace gpuaas

#endif  // GPUAAS_COMMON_FILES_H_
