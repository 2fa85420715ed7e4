// Consistent paging of lists: every page of one list is read at the first page's revision, as
// Kubernetes does. The first page's snapshot of the kind is held here (snapshots share their
// objects with the cache, so one costs a vector of pointers and the objects changed since), the
// continue token names its revision, and a later page reads the same snapshot. A snapshot not
// asked for within `ttl`, or pushed out by `max_held` newer ones, is let go: its tokens then get
// 410 Expired, and the client starts the list again. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_PAGES_H_
#define GPUAAS_API_INTERNAL_PAGES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "store/cache.h"

namespace gpuaas::api::internal {

class PageSnapshots {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit PageSnapshots(size_t max_held = 64, std::chrono::seconds ttl = std::chrono::minutes(5))
      : max_held_(max_held), ttl_(ttl) {}

  // Holds `snap` of `kind` for the pages that follow (again: its time starts over).
  void Hold(const std::string& kind, std::shared_ptr<const store::KindSnapshot> snap, TimePoint now);
  // The snapshot of `kind` at `revision` that Hold kept, or null when it was let go.
  std::shared_ptr<const store::KindSnapshot> Find(const std::string& kind, int64_t revision, TimePoint now);
  size_t held() const;

 private:
  struct Held {
    std::shared_ptr<const store::KindSnapshot> snap;
    TimePoint used;
  };
  void ExpireLocked(TimePoint now);

  const size_t max_held_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int64_t>, Held> held_;  // guarded by mu_
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_PAGES_H_
