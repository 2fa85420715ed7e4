#include "cli/output.h"

#include <algorithm>
#include <regex>

#include "common/clock.h"
#include "fmt/format.h"
#include "model/columns.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace gpuaas::cli {
namespace {

bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex kSpecial(
      R"(^([-+]?[0-9][0-9_]*(\.[0-9]*)?([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+|\.inf|\.nan|)"
      R"(true|false|yes|no|on|off|null|y|n|~)$)",
      std::regex::icase);
  return std::regex_match(s, kSpecial) || s.front() == ' ' || s.back() == ' ';
}

void Emit(YAML::Emitter& e, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      e << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        e << YAML::Key << it.key() << YAML::Value;
        Emit(e, it.value());
      }
      e << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      e << YAML::BeginSeq;
      for (const auto& v : j) Emit(e, v);
      e << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const std::string s = j.get<std::string>();
      if (NeedsQuotes(s)) e << YAML::DoubleQuoted;
      e << s;
      break;
    }
    case nlohmann::json::value_t::boolean: e << (j.get<bool>() ? "true" : "false"); break;
    case nlohmann::json::value_t::null: e << YAML::Null; break;
    default: e << j.dump(); break;
  }
}

}  // namespace

absl::StatusOr<Format> ParseFormat(std::string_view name) {
  if (name == "table" || name == "wide" || name.empty()) return Format::kTable;
  if (name == "json") return Format::kJson;
  if (name == "yaml") return Format::kYaml;
  return absl::InvalidArgumentError(
      fmt::format("unknown output format \"{}\"; use table, json or yaml", name));
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 3, ' ');
    }
    out << line << "\n";
  };
  print(header_);
  for (const auto& r : rows_) print(r);
}

absl::StatusOr<std::string> PrettyJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("server sent invalid JSON");
  return j.dump(2) + "\n";
}

absl::StatusOr<std::string> JsonToYaml(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("server sent invalid JSON");
  YAML::Emitter e;
  Emit(e, j);
  return std::string(e.c_str()) + "\n";
}

std::string Age(std::string_view timestamp) { return model::Age(timestamp, RealClock::Get().Now()); }

}  // namespace gpuaas::cli
