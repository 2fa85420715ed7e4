// Output for client commands: kubectl-style aligned tables, pretty JSON, and YAML.
#ifndef GPUAAS_CLI_OUTPUT_H_
#define GPUAAS_CLI_OUTPUT_H_

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuaas::cli {

enum class Format { kTable, kJson, kYaml };

// Parses table|json|yaml (also "wide" as table). InvalidArgument otherwise.
absl::StatusOr<Format> ParseFormat(std::string_view name);

// Columns separated by three spaces, padded to the widest cell, header in capitals, as kubectl
// prints them. The last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Re-indents a JSON document (2 spaces). InvalidArgument if it is not JSON.
absl::StatusOr<std::string> PrettyJson(std::string_view json);
// The same document as YAML; strings that YAML would read as another type are quoted.
absl::StatusOr<std::string> JsonToYaml(std::string_view json);

// "5d", "3h", "12m", "40s" since an RFC 3339 timestamp; "<unknown>" when it does not parse.
std::string Age(std::string_view timestamp);

}  // namespace gpuaas::cli

#endif  // GPUAAS_CLI_OUTPUT_H_
