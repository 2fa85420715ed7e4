// The one writer of the Prometheus text exposition format (version 0.0.4) in gpuaas: the API
// server's /metrics (requests, fleet, telemetry, controllers, leader election) and the agent's
// dcgm-exporter text all go through it, so that HELP and TYPE lines, label-value escapes and
// numbers are written one way. Layer 1 of docs/architecture.md (common), so that every library,
// the controller runtime included, may use it; the strict parser of the same format is
// telemetry/prom_text.h, and what this writes passes it.
//
//   std::string out;
//   MetricsText w(out);
//   w.Family("gpuaas_alerts_active", "gauge", "Active GPU health alerts by severity.");
//   w.Sample("gpuaas_alerts_active", {{"severity", "critical"}}, 2);
//   // # HELP gpuaas_alerts_active Active GPU health alerts by severity.
//   // # TYPE gpuaas_alerts_active gauge
//   // gpuaas_alerts_active{severity="critical"} 2
#ifndef GPUAAS_COMMON_METRICS_TEXT_H_
#define GPUAAS_COMMON_METRICS_TEXT_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuaas {

// Appends metric families and samples to a string it is given. Names and types are written as
// given (callers pass constant, valid metric names); label values and HELP text are escaped.
// Not thread-safe; one writer per text being built.
class MetricsText {
 public:
  // `out` must outlive the writer; what is there already stays.
  explicit MetricsText(std::string& out) : out_(out) {}

  // Writes "# HELP name help" and "# TYPE name type" (type: "gauge", "counter", "histogram",
  // "summary" or "untyped"), the help with backslash and line feed escaped. Once per family: a
  // second call for a name this writer has written is a no-op, so a caller may call it before
  // each sample of a family that may have none.
  void Family(std::string_view name, std::string_view type, std::string_view help);

  // Writes one sample line, `name{k="v",...} value[ timestamp_ms]`, labels in the given order
  // (no braces when there are none), values escaped (backslash, double quote, line feed) and the
  // value as FormatMetricValue writes it.
  void Sample(std::string_view name, std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
              double value, std::optional<int64_t> timestamp_ms = std::nullopt);
  // The same, for labels built at run time.
  void Sample(std::string_view name, const std::vector<std::pair<std::string, std::string>>& labels, double value,
              std::optional<int64_t> timestamp_ms = std::nullopt);

 private:
  template <typename Labels>  // pairs of names and values, string_view or string
  void Line(std::string_view name, const Labels& labels, double value, std::optional<int64_t> timestamp_ms);
  void Label(bool first, std::string_view name, std::string_view value);
  void End(double value, std::optional<int64_t> timestamp_ms);

  std::string& out_;
  std::set<std::string, std::less<>> families_;  // written by Family
};

// A sample value as the format writes it: "NaN", "+Inf", "-Inf"; an integral value that fits an
// int64 without a decimal point ("3", "1200000000"); any other the shortest text that reads back
// as the same double ("0.25", "1e-05"). Also the text of a histogram's "le" label.
std::string FormatMetricValue(double v);

// Escapes a label value for the text format: backslash, double quote and line feed.
std::string EscapeLabelValue(std::string_view v);

}  // namespace gpuaas

#endif  // GPUAAS_COMMON_METRICS_TEXT_H_
