#include "common/files.h"

#include <fstream>
#include <sstream>

#include "fmt/format.h"

namespace gpuaas {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot read {}", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace gpuaas
