// Watch streams in Kubernetes' wire format: `GET <list route>?watch=1[&resourceVersion=N]
// [&allowWatchBookmarks=true][&labelSelector=...][&timeoutSeconds=S]` answers a chunked stream of
// newline-delimited JSON events `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK","object":{...}}`.
//   - Without a resourceVersion (or "0") the stream opens with every current object as ADDED;
//     with one, it replays the store's changes after it, then follows live. A resourceVersion
//     older than the change feed keeps is refused with 410 and a Status of reason Expired.
//   - Events are filtered by the caller's tenancy (a member sees its project's objects only) and
//     the label selector; an object that stops matching the selector arrives as DELETED, one that
//     starts matching as ADDED, as Kubernetes does.
//   - Bookmarks (when allowed) carry the revision reached, at the start and every bookmark
//     interval; a watch ends after its timeout, when the client leaves, or when the server stops.
// Watches cost no thread: one listener on the ObjectCache fans events out to every watch, and
// the HTTP server writes them as the connections allow. Thread-safe.
#ifndef GPUAAS_API_INTERNAL_WATCH_H_
#define GPUAAS_API_INTERNAL_WATCH_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "api/http.h"
#include "model/labels.h"
#include "store/cache.h"

namespace gpuaas::api::internal {

struct WatchRequest {
  std::string kind;
  std::string ns;               // only this namespace; empty: all
  std::string only_name;        // only the object of this name (a member's own Project); empty: all
  model::LabelSelector selector;
  std::optional<int64_t> resource_version;  // nullopt or 0: start with the current objects
  bool bookmarks = false;
  std::chrono::seconds timeout{1800};
  // When set, each event's object JSON is written as this returns it (a Table for kubectl);
  // called for one watch at a time, in event order.
  std::function<std::string(const std::string& object_json)> render;
};

class WatchHub {
 public:
  // Follows `cache` (and reads its store's change feed to replay). `bookmark_every`: how often a
  // watch that allows bookmarks gets one.
  WatchHub(store::ObjectCache& cache, std::chrono::milliseconds bookmark_every = std::chrono::seconds(60));
  ~WatchHub();

  // The response for a watch: a stream, or an error (410 with a Kubernetes Status when the
  // resourceVersion was compacted away).
  HttpResponse Open(WatchRequest req);

  // Ends every watch (the server stops) and stops following the cache.
  void CloseAll();

  size_t active() const;

 private:
  struct Watcher;
  class Stream;
  void OnBatch(const std::vector<store::CacheEvent>& events, int64_t revision);
  void Tick();
  // The event line for `w`, if it sees the change; empty when it does not.
  static std::string EventLine(const Watcher& w, const store::CachedObject* before, const store::CachedObject* after);
  static std::string Bookmark(const Watcher& w, int64_t revision);
  void Start(const std::shared_ptr<Watcher>& w, std::shared_ptr<StreamSink> sink);

  store::ObjectCache& cache_;
  const std::chrono::milliseconds bookmark_every_;
  mutable std::mutex mu_;  // held while a batch is fanned out and while a watch is replayed
  std::condition_variable cv_;
  std::list<std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;  // the last batch fanned out
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;  // bookmarks and timeouts, for every watch at once
  int listener_ = -1;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_WATCH_H_
