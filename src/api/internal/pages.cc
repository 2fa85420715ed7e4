#include "api/internal/pages.h"

#include <algorithm>

namespace gpuaas::api::internal {

void PageSnapshots::ExpireLocked(TimePoint now) {
  std::erase_if(held_, [&](const auto& kv) { return now - kv.second.used > ttl_; });
  while (held_.size() > max_held_) {
    auto oldest = std::min_element(held_.begin(), held_.end(),
                                   [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    held_.erase(oldest);
  }
}

void PageSnapshots::Hold(const std::string& kind, std::shared_ptr<const store::KindSnapshot> snap, TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t rev = snap->revision;
  held_[{kind, rev}] = Held{std::move(snap), now};
  ExpireLocked(now);
}

std::shared_ptr<const store::KindSnapshot> PageSnapshots::Find(const std::string& kind, int64_t revision,
                                                               TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now);
  auto it = held_.find({kind, revision});
  if (it == held_.end()) return nullptr;
  it->second.used = now;
  return it->second.snap;
}

size_t PageSnapshots::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

}  // namespace gpuaas::api::internal
