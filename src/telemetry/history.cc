#include "telemetry/history.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/status.h"  // formats absl::string_view
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::telemetry {
namespace {

using nlohmann::json;

// Prometheus answers at most 11,000 points a series per query_range; fewer go in one request.
constexpr int64_t kMaxPointsPerRequest = 10'000;

std::string QueryEscape(std::string_view s) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string LabelValue(std::string_view v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// Milliseconds as the API's seconds, exactly ("1800000059.999").
std::string Seconds(int64_t ms) { return fmt::format("{}.{:03d}", ms / 1000, static_cast<int>(ms % 1000)); }

}  // namespace

std::string PromHistory::Expr(std::string_view device, Field field, int64_t range_ms) {
  const size_t slash = device.find('/');
  const std::string selector =
      fmt::format("gpuaas_{}{{gpu=\"{}\",mig_instance=\"{}\"}}[{}ms]", Info(field).series,
                  LabelValue(device.substr(0, slash)),
                  slash == std::string_view::npos ? "" : LabelValue(device.substr(slash + 1)), range_ms);
  // One request, three answers told apart by an "agg" label; each summed (or maxed) across the
  // label sets the device's series had (its pools, its workloads) during the step.
  return fmt::format(
      "label_replace(sum(sum_over_time({0})), \"agg\", \"sum\", \"\", \"\") or "
      "label_replace(sum(count_over_time({0})), \"agg\", \"count\", \"\", \"\") or "
      "label_replace(max(max_over_time({0})), \"agg\", \"max\", \"\", \"\")",
      selector);
}

absl::StatusOr<bool> PromHistory::ClosedRanges() const {
  std::lock_guard<std::mutex> l(mu_);
  if (closed_ranges_) return *closed_ranges_;
  absl::StatusOr<std::string> body = get_("/api/v1/status/buildinfo");
  if (!body.ok()) {
    return absl::UnavailableError(
        fmt::format("telemetry history at {} is unavailable: {}", base_url_, body.status().message()));
  }
  const json j = json::parse(*body, nullptr, false);
  // Prometheus names its version here; VictoriaMetrics answers an empty object.
  std::string version;
  if (j.is_object() && j.contains("data") && j["data"].is_object() && j["data"].contains("version") &&
      j["data"]["version"].is_string()) {
    version = j["data"]["version"].get<std::string>();
  }
  closed_ranges_ = version.starts_with("2.") || version.starts_with("1.");
  return *closed_ranges_;
}

absl::StatusOr<std::vector<Bucket>> PromHistory::Buckets(std::string_view device, Field field, int64_t from,
                                                         int64_t to, int64_t step) const {
  std::vector<Bucket> out;
  if (step <= 0 || to <= from) return out;
  const size_t n = static_cast<size_t>((to - from + step - 1) / step);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i].t = from + static_cast<int64_t>(i) * step;
  std::vector<double> sums(n, 0);
  absl::StatusOr<bool> closed = ClosedRanges();
  if (!closed.ok()) return closed.status();
  // Bucket [t, t + step) is read at T = t + step - 1 ms: (T - step, T] where ranges leave out
  // their start, [T - (step - 1 ms), T] where they include it; either is [t, t + step).
  const int64_t step_ms = step * 1000;
  const std::string expr = QueryEscape(Expr(device, field, *closed ? step_ms - 1 : step_ms));
  for (size_t first = 0; first < n; first += kMaxPointsPerRequest) {
    const size_t last = std::min(n, first + kMaxPointsPerRequest) - 1;
    const int64_t start_ms = (out[first].t + step) * 1000 - 1, end_ms = (out[last].t + step) * 1000 - 1;
    const std::string path = fmt::format("/api/v1/query_range?query={}&start={}&end={}&step={}&nocache=1", expr,
                                         Seconds(start_ms), Seconds(end_ms), step);
    absl::StatusOr<std::string> body = get_(path);
    if (!body.ok()) {
      return absl::UnavailableError(
          fmt::format("telemetry history at {} is unavailable: {}", base_url_, body.status().message()));
    }
    const json j = json::parse(*body, nullptr, false);
    if (!j.is_object() || j.value("status", "") != "success" || !j.contains("data") || !j["data"].is_object() ||
        !j["data"].contains("result") || !j["data"]["result"].is_array()) {
      return absl::UnavailableError(fmt::format("telemetry history at {} answered what is not a query result: {}",
                                                base_url_, body->substr(0, 200)));
    }
    for (const json& series : j["data"]["result"]) {
      if (!series.is_object() || !series.contains("metric") || !series.contains("values") ||
          !series["values"].is_array()) {
        continue;
      }
      const std::string agg = series["metric"].is_object() ? series["metric"].value("agg", "") : "";
      for (const json& v : series["values"]) {
        if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_string()) continue;
        const auto at_ms = static_cast<int64_t>(std::llround(v[0].get<double>() * 1000));
        const int64_t k = (at_ms + 1 - (out[0].t + step) * 1000);
        if (k < 0 || k % step_ms != 0) continue;
        const auto i = static_cast<size_t>(k / step_ms);
        if (i >= n) continue;
        const double x = std::strtod(v[1].get<std::string>().c_str(), nullptr);
        if (agg == "sum") {
          sums[i] = x;
        } else if (agg == "count") {
          out[i].count = static_cast<int64_t>(std::llround(x));
        } else if (agg == "max") {
          out[i].max = x;
        }
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (out[i].count > 0) {
      out[i].mean = sums[i] / static_cast<double>(out[i].count);
    } else {
      out[i] = Bucket{out[i].t, 0, 0, 0};
    }
  }
  return out;
}

}  // namespace gpuaas::telemetry
