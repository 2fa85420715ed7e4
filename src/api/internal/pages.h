// Consistent paging of lists: every page of one list is read at the first page's revision, as
// Kubernetes does. The first page's snapshot of the kind is held here (snapshots share their
// objects with the cache, so one costs a vector of pointers and the objects changed since), the
// continue token (ContinueToken) names its revision and the last item returned, and a later page
// reads the same snapshot after that item. A snapshot not asked for within `ttl`, or pushed out
// by `max_held` newer ones, is let go: its tokens then get 410 Expired, and the client starts the
// list again. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_PAGES_H_
#define GPUAAS_API_INTERNAL_PAGES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "store/cache.h"

namespace gpuaas::api::internal {

// Where the next page of a list starts: after (namespace, name) of the list read at `revision`.
struct ContinueAt {
  int64_t revision = 0;
  std::pair<std::string, std::string> after;
};

// The metadata.continue of a page of `plural` read at `revision` whose last item is ns/name
// (base64url, opaque to clients).
std::string ContinueToken(std::string_view plural, int64_t revision, std::string_view ns, std::string_view name);

// Where the list of `plural` that a ContinueToken `token` came from goes on; InvalidArgument for
// anything else, OutOfRange (410) for a token of an earlier format, whose list cannot be
// continued consistently.
absl::StatusOr<ContinueAt> ParseContinue(std::string_view plural, std::string_view token);

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
