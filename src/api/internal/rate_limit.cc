#include "api/internal/rate_limit.h"

#include <algorithm>

#include "api/problem.h"
#include "fmt/format.h"

namespace gpuaas::api::internal {

absl::Status RateLimiter::Take(const std::string& key, TimePoint now, double cost) {
  if (rate_ <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  if (buckets_.size() > 10000) {
    std::erase_if(buckets_, [&](const auto& kv) { return now - kv.second.last > std::chrono::minutes(1); });
  }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!fresh) {
    const double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst_, b.tokens + std::max(0.0, elapsed) * rate_);
    b.last = std::max(b.last, now);
  }
  if (b.tokens < cost) {
    return TooManyRequests(fmt::format("more than {} {} a second from {}; slow down and retry", rate_, what_, key));
  }
  b.tokens -= cost;
  return absl::OkStatus();
}

}  // namespace gpuaas::api::internal
