// ObjectCache: an in-memory, always-sorted copy of every record in the Store, kept current by
// following the change feed (an informer, in client-go's words). The read APIs and the allocator
// work from its immutable snapshots, so reads never touch the database. Thread-safe.
#ifndef GPUAAS_STORE_CACHE_H_
#define GPUAAS_STORE_CACHE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"

namespace gpuaas::store {

struct CachedObject {
  std::string ns;
  std::string name;
  int64_t resource_version = 0;
  std::map<std::string, std::string> labels;
  std::string json;
};

// One change the cache applied: `before` is null for an added object, `after` for a deleted one.
struct CacheEvent {
  std::string_view kind;
  std::shared_ptr<const CachedObject> before;
  std::shared_ptr<const CachedObject> after;
};
// Called with each batch of events the cache applied (whole transactions, in revision order),
// then with `revision`, the revision the cache has reached.
using CacheListener = std::function<void(const std::vector<CacheEvent>& events, int64_t revision)>;

// All objects of one kind at one revision, sorted by (namespace, name). Immutable.
struct KindSnapshot {
  int64_t revision = 0;
  std::vector<std::shared_ptr<const CachedObject>> items;
};

class ObjectCache {
 public:
  explicit ObjectCache(Store& store);
  ~ObjectCache();
  ObjectCache(const ObjectCache&) = delete;
  ObjectCache& operator=(const ObjectCache&) = delete;

  // Loads `kinds` from the store and starts following changes in a background thread.
  absl::Status Start(const std::vector<std::string>& kinds);
  // Loads `kinds` without the thread: changes are applied by SyncNow (deterministic tests).
  absl::Status Load(const std::vector<std::string>& kinds);
  void Stop();

  // Registers a listener (an informer): it is called at once with every cached object as an
  // added event, then with every batch applied later, on the thread that applies it (the
  // cache's, or SyncNow's caller), one batch at a time, before WaitFor's waiters wake. A relist
  // after the change feed was compacted reaches it as the difference it made. Listeners must
  // not call back into the cache's writers (SyncNow) and should be quick. Returns an id for
  // RemoveListener, which a listener that dies before the cache must call: once it returns, the
  // listener is not called again.
  int AddListener(CacheListener listener);
  void RemoveListener(int id);

  // The current snapshot of `kind` (empty for a kind not loaded). Cheap: shared, not copied.
  std::shared_ptr<const KindSnapshot> Snapshot(const std::string& kind);
  std::shared_ptr<const CachedObject> Get(std::string_view kind, std::string_view ns,
                                          std::string_view name);

  // Blocks until the cache has applied revision `rev` and its listeners have seen it
  // (read-your-writes), up to `timeout`.
  bool WaitFor(int64_t rev, std::chrono::milliseconds timeout);
  // The revision of the snapshots; Notified() is the one the listeners have seen too.
  int64_t Revision() const { return revision_.load(); }
  int64_t Notified() const { return notified_.load(); }
  // The store this cache follows.
  Store& store() { return store_; }

  // Applies pending changes now rather than waiting for the background thread (tests).
  absl::Status SyncNow();

 private:
  // Orders (namespace, name) keys and allows lookups by string_view pairs without copying.
  struct KeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const std::string_view af(a.first), as(a.second), bf(b.first), bs(b.second);
      return af != bf ? af < bf : as < bs;
    }
  };
  struct KindState {
    std::map<std::pair<std::string, std::string>, std::shared_ptr<const CachedObject>, KeyLess>
        objects;
    std::shared_ptr<const KindSnapshot> snapshot;  // null when stale
  };
  absl::Status Relist();
  absl::Status ApplyChanges();
  void Notify(const std::vector<CacheEvent>& events, int64_t revision);  // apply_mu_ held
  void Applied(int64_t revision);  // the listeners have seen `revision`: wake WaitFor
  void Loop();

  Store& store_;
  std::mutex mu_;        // guards kinds_ and the revision readers wait on
  std::mutex apply_mu_;  // serialises Relist and ApplyChanges (taken before mu_)
  std::condition_variable applied_;
  std::map<std::string, KindState, std::less<>> kinds_;
  std::map<int, CacheListener> listeners_;  // guarded by apply_mu_
  int next_listener_ = 0;                   // guarded by apply_mu_
  std::atomic<int64_t> revision_{0};
  std::atomic<int64_t> notified_{0};  // <= revision_; set once the listeners returned
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_CACHE_H_
