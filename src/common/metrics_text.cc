#include "common/metrics_text.h"

#include <cmath>
#include <iterator>

#include "fmt/format.h"

namespace gpuaas {
namespace {

void AppendEscapedLabelValue(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
}

// HELP text escapes only backslash and line feed; a double quote stays as it is.
void AppendEscapedHelp(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
}

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (std::trunc(v) == v && v > -9.2e18 && v < 9.2e18) {
    // Exact as an int64: no exponent and no decimal point, as counters are read.
    fmt::format_to(std::back_inserter(out), "{}", static_cast<int64_t>(v));
  } else {
    fmt::format_to(std::back_inserter(out), "{}", v);  // shortest text that reads back the same
  }
}

}  // namespace

void MetricsText::Family(std::string_view name, std::string_view type, std::string_view help) {
  if (families_.find(name) != families_.end()) return;
  families_.emplace(name);
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  AppendEscapedHelp(out_, help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void MetricsText::Sample(std::string_view name,
                         std::initializer_list<std::pair<std::string_view, std::string_view>> labels, double value,
                         std::optional<int64_t> timestamp_ms) {
  Line(name, labels, value, timestamp_ms);
}

void MetricsText::Sample(std::string_view name, const std::vector<std::pair<std::string, std::string>>& labels,
                         double value, std::optional<int64_t> timestamp_ms) {
  Line(name, labels, value, timestamp_ms);
}

template <typename Labels>
void MetricsText::Line(std::string_view name, const Labels& labels, double value,
                       std::optional<int64_t> timestamp_ms) {
  out_ += name;
  bool first = true;
  for (const auto& [k, v] : labels) {
    Label(first, k, v);
    first = false;
  }
  if (!first) out_ += '}';
  End(value, timestamp_ms);
}

void MetricsText::Label(bool first, std::string_view name, std::string_view value) {
  out_ += first ? '{' : ',';
  out_ += name;
  out_ += "=\"";
  AppendEscapedLabelValue(out_, value);
  out_ += '"';
}

void MetricsText::End(double value, std::optional<int64_t> timestamp_ms) {
  out_ += ' ';
  AppendValue(out_, value);
  if (timestamp_ms) fmt::format_to(std::back_inserter(out_), " {}", *timestamp_ms);
  out_ += '\n';
}

std::string FormatMetricValue(double v) {
  std::string out;
  AppendValue(out, v);
  return out;
}

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  AppendEscapedLabelValue(out, v);
  return out;
}

}  // namespace gpuaas
