#include "model/object.h"

#include <cctype>

#include "common/strings.h"
#include "fmt/format.h"

namespace gpuaas::model {
namespace {

bool IsAlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Kubernetes "qualified name" part: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63.
bool IsQualifiedPart(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

}  // namespace

bool SetCondition(std::vector<Condition>& conds, Condition c) {
  for (Condition& old : conds) {
    if (old.type != c.type) continue;
    if (old.status == c.status) c.last_transition_time = old.last_transition_time;
    if (old == c) return false;
    old = std::move(c);
    return true;
  }
  conds.push_back(std::move(c));
  return true;
}

const Condition* FindCondition(const std::vector<Condition>& conds, std::string_view type) {
  for (const Condition& c : conds) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

absl::Status ValidateName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("metadata.name: required");
  if (name.size() > 253) {
    return absl::InvalidArgumentError("metadata.name: must be at most 253 characters");
  }
  for (char c : name) {
    if (!IsAlnumLower(c) && c != '-' && c != '.') {
      return absl::InvalidArgumentError(fmt::format(
          "metadata.name: \"{}\" must consist of lower-case letters, digits, '-' or '.'", name));
    }
  }
  if (!IsAlnumLower(name.front()) || !IsAlnumLower(name.back())) {
    return absl::InvalidArgumentError(fmt::format(
        "metadata.name: \"{}\" must start and end with a letter or digit", name));
  }
  return absl::OkStatus();
}

absl::Status ValidateAnnotations(const std::map<std::string, std::string>& annotations) {
  size_t total = 0;
  for (const auto& [key, value] : annotations) {
    std::map<std::string, std::string> as_label{{key, ""}};
    if (!ValidateLabels(as_label).ok()) {
      return absl::InvalidArgumentError(fmt::format("metadata.annotations: invalid key \"{}\"", key));
    }
    if (!IsValidUtf8(value)) {
      return absl::InvalidArgumentError(fmt::format("metadata.annotations: the value of \"{}\" is not UTF-8", key));
    }
    total += key.size() + value.size();
  }
  if (total > kMaxAnnotationBytes) {
    return absl::InvalidArgumentError(
        fmt::format("metadata.annotations: {} bytes in all exceed the limit of 256 KiB", total));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabels(const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : labels) {
    std::string_view k = key;
    size_t slash = k.find('/');
    std::string_view name = slash == std::string_view::npos ? k : k.substr(slash + 1);
    if (slash != std::string_view::npos) {
      std::string_view prefix = k.substr(0, slash);
      if (prefix.empty() || prefix.size() > 253 || !ValidateName(prefix).ok()) {
        return absl::InvalidArgumentError(
            fmt::format("metadata.labels: key \"{}\" has an invalid prefix", key));
      }
    }
    if (!IsQualifiedPart(name)) {
      return absl::InvalidArgumentError(fmt::format("metadata.labels: invalid key \"{}\"", key));
    }
    if (!value.empty() && !IsQualifiedPart(value)) {
      return absl::InvalidArgumentError(
          fmt::format("metadata.labels: invalid value \"{}\" for key \"{}\"", value, key));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpuaas::model
