// A rate per caller (requests, or bytes of telemetry), as a token bucket per key (a token's
// user): `rate` a second with bursts of twice as much. Past it, Take answers 429
// TooManyRequests (the server adds Retry-After). Keys idle for a minute are forgotten once many are kept, so the map stays
// bounded. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_RATE_LIMIT_H_
#define GPUAAS_API_INTERNAL_RATE_LIMIT_H_

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace gpuaas::api::internal {

class RateLimiter {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // `what` names the unit in the refusal: "requests", "bytes of telemetry".
  // `min_burst`: the burst is at least this (a single request's cost must be able to pass).
  explicit RateLimiter(double rate, std::string what = "requests", double min_burst = 0)
      : rate_(rate), burst_(std::max(2 * rate, min_burst)), what_(std::move(what)) {}

  // OK and `cost` taken, or 429 TooManyRequests (nothing taken). A rate of 0 allows everything.
  absl::Status Take(const std::string& key, TimePoint now, double cost = 1);

 private:
  struct Bucket {
    double tokens = 0;
    TimePoint last;
  };
  const double rate_, burst_;
  const std::string what_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;  // guarded by mu_
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_RATE_LIMIT_H_
