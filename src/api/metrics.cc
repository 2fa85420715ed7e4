#include "api/metrics.h"

#include "fmt/format.h"

namespace gpuaas::api {

void RequestMetrics::Observe(const std::string& method, const std::string& route, int code,
                             std::chrono::nanoseconds latency) {
  const double secs = std::chrono::duration<double>(latency).count();
  size_t b = 0;
  while (b < kBuckets.size() && secs > kBuckets[b]) ++b;
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{method, route, code}];
  Histogram& h = latency_[{method, route}];
  ++h.buckets[b];
  ++h.count;
  h.sum += secs;
}

void RequestMetrics::Render(std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP gpuaas_http_requests_total HTTP requests served, by method, route and code.\n";
  out += "# TYPE gpuaas_http_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    const auto& [method, route, code] = key;
    out += fmt::format("gpuaas_http_requests_total{{method=\"{}\",route=\"{}\",code=\"{}\"}} {}\n",
                       method, route, code, n);
  }
  out += "# HELP gpuaas_http_request_duration_seconds Time to serve a request, by method and route.\n";
  out += "# TYPE gpuaas_http_request_duration_seconds histogram\n";
  for (const auto& [key, h] : latency_) {
    const auto& [method, route] = key;
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= kBuckets.size(); ++i) {
      cumulative += h.buckets[i];
      const std::string le = i < kBuckets.size() ? fmt::format("{}", kBuckets[i]) : "+Inf";
      out += fmt::format(
          "gpuaas_http_request_duration_seconds_bucket{{method=\"{}\",route=\"{}\",le=\"{}\"}} {}\n",
          method, route, le, cumulative);
    }
    out += fmt::format(
        "gpuaas_http_request_duration_seconds_sum{{method=\"{}\",route=\"{}\"}} {}\n", method,
        route, h.sum);
    out += fmt::format(
        "gpuaas_http_request_duration_seconds_count{{method=\"{}\",route=\"{}\"}} {}\n", method,
        route, h.count);
  }
}

}  // namespace gpuaas::api
