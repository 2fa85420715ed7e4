#include "api/metrics.h"

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
  out += "# HELP gpuaas_http_requests_total HTTP requests served, by method, route and code.\n";
  out += "# TYPE gpuaas_http_requests_total counter\n";
  for (size_t r = 0; r < routes_.size(); ++r) {
    for (size_t m = 0; m < kMethods.size(); ++m) {
      const Series& s = series_[r * kMethods.size() + m];
      for (int code = 100; code < 600; ++code) {
        const uint64_t n = s.codes[code].load(std::memory_order_relaxed);
        if (n == 0) continue;
        out += fmt::format(
            "gpuaas_http_requests_total{{method=\"{}\",route=\"{}\",code=\"{}\"}} {}\n",
            kMethods[m], routes_[r], code, n);
      }
    }
  }
  out += "# HELP gpuaas_http_request_duration_seconds Time to serve a request, by method and route.\n";
  out += "# TYPE gpuaas_http_request_duration_seconds histogram\n";
  for (size_t r = 0; r < routes_.size(); ++r) {
    for (size_t m = 0; m < kMethods.size(); ++m) {
      const Series& s = series_[r * kMethods.size() + m];
      const uint64_t count = s.count.load(std::memory_order_relaxed);
      if (count == 0) continue;
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= kBuckets.size(); ++i) {
        cumulative += s.buckets[i].load(std::memory_order_relaxed);
        const std::string le = i < kBuckets.size() ? fmt::format("{}", kBuckets[i]) : "+Inf";
        out += fmt::format(
            "gpuaas_http_request_duration_seconds_bucket{{method=\"{}\",route=\"{}\",le=\"{}\"}} "
            "{}\n",
            kMethods[m], routes_[r], le, cumulative);
      }
      out += fmt::format(
          "gpuaas_http_request_duration_seconds_sum{{method=\"{}\",route=\"{}\"}} {}\n",
          kMethods[m], routes_[r], static_cast<double>(s.sum_ns.load()) / 1e9);
      out += fmt::format(
          "gpuaas_http_request_duration_seconds_count{{method=\"{}\",route=\"{}\"}} {}\n",
          kMethods[m], routes_[r], count);
    }
  }
}

}  // namespace gpuaas::api
