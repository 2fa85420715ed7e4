// Request metrics of the API server and their Prometheus text exposition. Thread-safe.
#ifndef GPUAAS_API_METRICS_H_
#define GPUAAS_API_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace gpuaas::api {

class RequestMetrics {
 public:
  // Upper bounds (seconds) of the latency histogram buckets; +Inf is implied.
  static constexpr std::array<double, 12> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                      0.005,  0.01,    0.025,  0.05,  0.1,
                                                      0.5,    1.0};

  // Records one request. `route` is the route pattern ("/apis/gpuaas.io/v1/{plural}/{name}"),
  // never the raw path, so that label cardinality stays bounded.
  void Observe(const std::string& method, const std::string& route, int code,
               std::chrono::nanoseconds latency);

  // Appends the metrics in Prometheus text format 0.0.4 to `out`.
  void Render(std::string& out) const;

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size() + 1> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;  // guarded by mu_
  std::map<std::pair<std::string, std::string>, Histogram> latency_;        // guarded by mu_
};

}  // namespace gpuaas::api

#endif  // GPUAAS_API_METRICS_H_
