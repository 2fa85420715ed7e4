// Request metrics of the API server and their Prometheus text exposition. Observe is lock-free
// (atomic counters per route, method and status code), so it costs little on the hot path.
// Thread-safe.
#ifndef GPUAAS_API_METRICS_H_
#define GPUAAS_API_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace gpuaas::api {

class RequestMetrics {
 public:
  // Upper bounds (seconds) of the latency histogram buckets; +Inf is implied.
  static constexpr std::array<double, 12> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                      0.005,  0.01,    0.025,  0.05,  0.1,
                                                      0.5,    1.0};
  static constexpr std::array<const char*, 7> kMethods = {"GET",    "HEAD",   "POST",  "PUT",
                                                          "PATCH",  "DELETE", "OTHER"};

  // `routes` are the route patterns ("/apis/gpuaas.io/v1/{plural}/{name}"), never raw paths, so
  // that label cardinality stays bounded.
  explicit RequestMetrics(std::vector<std::string> routes);

  static size_t MethodIndex(std::string_view method);

  // Records one request against routes[route] (out of range: counted as "unmatched").
  void Observe(size_t route, size_t method, int code, std::chrono::nanoseconds latency);

  // Appends the metrics in Prometheus text format 0.0.4 to `out`.
  void Render(std::string& out) const;

 private:
  struct Series {
    std::array<std::atomic<uint64_t>, 600> codes{};  // by HTTP status code
    std::array<std::atomic<uint64_t>, kBuckets.size() + 1> buckets{};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> sum_ns{0};
  };
  std::vector<std::string> routes_;               // plus "unmatched" at the end
  std::unique_ptr<Series[]> series_;              // routes_.size() x kMethods.size()
};

}  // namespace gpuaas::api

#endif  // GPUAAS_API_METRICS_H_
