#include "api/metrics.h"

#include <limits>

#include "common/metrics_text.h"
#include "fmt/format.h"

namespace gpuaas::api {

RequestMetrics::RequestMetrics(std::vector<std::string> routes) : routes_(std::move(routes)) {
  routes_.push_back("unmatched");
  series_ = std::make_unique<Series[]>(routes_.size() * kMethods.size());
}

size_t RequestMetrics::MethodIndex(std::string_view method) {
  for (size_t i = 0; i + 1 < kMethods.size(); ++i) {
    if (method == kMethods[i]) return i;
  }
  return kMethods.size() - 1;
}

void RequestMetrics::Observe(size_t route, size_t method, int code,
                             std::chrono::nanoseconds latency) {
  if (route >= routes_.size()) route = routes_.size() - 1;
  if (method >= kMethods.size()) method = kMethods.size() - 1;
  Series& s = series_[route * kMethods.size() + method];
  const double secs = std::chrono::duration<double>(latency).count();
  size_t b = 0;
  while (b < kBuckets.size() && secs > kBuckets[b]) ++b;
  s.codes[code >= 100 && code < 600 ? code : 0].fetch_add(1, std::memory_order_relaxed);
  s.buckets[b].fetch_add(1, std::memory_order_relaxed);
  s.count.fetch_add(1, std::memory_order_relaxed);
  s.sum_ns.fetch_add(static_cast<uint64_t>(latency.count()), std::memory_order_relaxed);
}

void RequestMetrics::Render(std::string& out) const {
  MetricsText w(out);
  w.Family("gpuaas_http_requests_total", "counter",
           "HTTP requests served, by method, route and code.");
  for (size_t r = 0; r < routes_.size(); ++r) {
    for (size_t m = 0; m < kMethods.size(); ++m) {
      const Series& s = series_[r * kMethods.size() + m];
      for (int code = 100; code < 600; ++code) {
        const uint64_t n = s.codes[code].load(std::memory_order_relaxed);
        if (n == 0) continue;
        w.Sample(
            "gpuaas_http_requests_total",
            {{"method", kMethods[m]}, {"route", routes_[r]}, {"code", fmt::format("{}", code)}},
            static_cast<double>(n));
      }
    }
  }
  w.Family("gpuaas_http_request_duration_seconds", "histogram",
           "Time to serve a request, by method and route.");
  for (size_t r = 0; r < routes_.size(); ++r) {
    for (size_t m = 0; m < kMethods.size(); ++m) {
      const Series& s = series_[r * kMethods.size() + m];
      const uint64_t count = s.count.load(std::memory_order_relaxed);
      if (count == 0) continue;
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= kBuckets.size(); ++i) {
        cumulative += s.buckets[i].load(std::memory_order_relaxed);
        const double le =
            i < kBuckets.size() ? kBuckets[i] : std::numeric_limits<double>::infinity();
        w.Sample("gpuaas_http_request_duration_seconds_bucket",
                 {{"method", kMethods[m]}, {"route", routes_[r]}, {"le", FormatMetricValue(le)}},
                 static_cast<double>(cumulative));
      }
      w.Sample("gpuaas_http_request_duration_seconds_sum",
               {{"method", kMethods[m]}, {"route", routes_[r]}},
               static_cast<double>(s.sum_ns.load()) / 1e9);
      w.Sample("gpuaas_http_request_duration_seconds_count",
               {{"method", kMethods[m]}, {"route", routes_[r]}}, static_cast<double>(count));
    }
  }
}

}  // namespace gpuaas::api
