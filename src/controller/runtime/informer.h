// Informers: typed, indexed in-memory views of the store's objects, kept current from the
// ObjectCache's change events (client-go's shared informers and indexers). Each object is
// decoded once, when it changes, and shared as an immutable `std::shared_ptr<const T>`, so that
// controllers and the allocator read the fleet without decoding JSON or touching the database.
//
// Handlers registered with OnChange run after each applied batch, on the thread that applied
// it, with the object before and after the change (null when added / deleted); they should only
// map objects to keys and add them to work queues. Reads are thread-safe.
#ifndef GPUAAS_CONTROLLER_RUNTIME_INFORMER_H_
#define GPUAAS_CONTROLLER_RUNTIME_INFORMER_H_

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/log.h"
#include "common/status.h"  // formats absl::string_view
#include "model/codec.h"
#include "store/cache.h"

namespace gpuaas::controller::runtime {

// "namespace/name", or "name" for cluster-scoped objects: the keys of work queues.
std::string ObjectKey(std::string_view ns, std::string_view name);
// The inverse: {namespace, name}.
std::pair<std::string, std::string> SplitKey(std::string_view key);

class InformerBase {
 public:
  virtual ~InformerBase() = default;
  // Applies events of this informer's kind (with the lock held), returning the handler calls to
  // make once the whole batch is applied.
  virtual std::vector<std::function<void()>> Apply(const std::vector<const store::CacheEvent*>& events,
                                                   int64_t revision) = 0;
};

template <typename T>
class Informer final : public InformerBase {
 public:
  using Ptr = std::shared_ptr<const T>;
  using IndexFn = std::function<std::vector<std::string>(const T&)>;
  using Handler = std::function<void(const T* before, const T* after)>;

  // Both before the informer receives its first event (InformerSet::Start).
  void AddIndex(const std::string& name, IndexFn fn) { index_fns_[name] = std::move(fn); }
  void OnChange(Handler h) { handlers_.push_back(std::move(h)); }

  Ptr Get(std::string_view key) const {
    std::shared_lock lock(mu_);
    auto it = objects_.find(key);
    return it == objects_.end() ? nullptr : it->second;
  }
  Ptr Get(std::string_view ns, std::string_view name) const { return Get(ObjectKey(ns, name)); }
  // Every object, sorted by key.
  std::vector<Ptr> List() const {
    std::shared_lock lock(mu_);
    std::vector<Ptr> out;
    out.reserve(objects_.size());
    for (const auto& [k, v] : objects_) out.push_back(v);
    return out;
  }
  // The objects whose index `index` yields `value`, sorted by key.
  std::vector<Ptr> ByIndex(std::string_view index, std::string_view value) const {
    std::shared_lock lock(mu_);
    std::vector<Ptr> out;
    auto idx = indexes_.find(index);
    if (idx == indexes_.end()) return out;
    auto keys = idx->second.find(value);
    if (keys == idx->second.end()) return out;
    for (const std::string& k : keys->second) {
      if (auto it = objects_.find(k); it != objects_.end()) out.push_back(it->second);
    }
    return out;
  }
  // The values of `index` that have objects.
  std::vector<std::string> IndexValues(std::string_view index) const {
    std::shared_lock lock(mu_);
    std::vector<std::string> out;
    if (auto idx = indexes_.find(index); idx != indexes_.end()) {
      for (const auto& [v, keys] : idx->second) out.push_back(v);
    }
    return out;
  }
  size_t Size() const {
    std::shared_lock lock(mu_);
    return objects_.size();
  }
  // The store revision of the last change of this kind applied (0 before any).
  int64_t Revision() const {
    std::shared_lock lock(mu_);
    return revision_;
  }
  // The revision the cache had reached when this informer was last told of a batch: everything
  // up to it is reflected here.
  int64_t SyncedRevision() const {
    std::shared_lock lock(mu_);
    return synced_;
  }

  std::vector<std::function<void()>> Apply(const std::vector<const store::CacheEvent*>& events,
                                           int64_t revision) override {
    std::vector<std::function<void()>> calls;
    std::unique_lock lock(mu_);
    synced_ = revision;
    for (const store::CacheEvent* e : events) {
      const store::CachedObject& any = e->after ? *e->after : *e->before;
      const std::string key = ObjectKey(any.ns, any.name);
      Ptr before;
      if (auto it = objects_.find(key); it != objects_.end()) before = it->second;
      Ptr after;
      if (e->after) {
        absl::StatusOr<T> obj = model::Decode<T>(e->after->json);
        if (!obj.ok()) {
          log::Error("informer: stored {} {} does not decode: {}", T::kKind, key, obj.status().message());
          continue;
        }
        after = std::make_shared<const T>(std::move(*obj));
        revision_ = std::max(revision_, e->after->resource_version);
      } else {
        revision_ = std::max(revision_, revision);
      }
      Reindex(key, before.get(), after.get());
      if (after) {
        objects_[key] = after;
      } else {
        objects_.erase(key);
      }
      for (const Handler& h : handlers_) {
        calls.push_back([h, before, after] { h(before.get(), after.get()); });
      }
    }
    return calls;
  }

 private:
  // Moves `key` in each index from the values `before` has to those `after` has (either may be
  // null). Values both have stay as they are: an update that keeps them (a GPU's health, a pool's
  // conditions) costs no work on sets that may hold every object of the kind.
  void Reindex(const std::string& key, const T* before, const T* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [name, fn] : index_fns_) {
      const std::vector<std::string> was = before ? fn(*before) : std::vector<std::string>{};
      std::vector<std::string> is = after ? fn(*after) : std::vector<std::string>{};
      if (was == is) continue;
      auto& idx = indexes_[name];
      for (const std::string& v : was) {
        if (std::find(is.begin(), is.end(), v) != is.end()) continue;
        auto it = idx.find(v);
        if (it == idx.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) idx.erase(it);
      }
      for (std::string& v : is) {
        if (std::find(was.begin(), was.end(), v) == was.end()) idx[std::move(v)].insert(key);
      }
    }
  }

  mutable std::shared_mutex mu_;
  std::map<std::string, Ptr, std::less<>> objects_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, std::set<std::string>, std::less<>>, std::less<>> indexes_
      ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t synced_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, IndexFn> index_fns_;  // set before start, read-only after
  std::vector<Handler> handlers_;             // likewise
};

// The informers of one process, fed by one ObjectCache. Register every informer (For<T>) and
// its indexes and handlers, then Start: the informers fill from the cache and follow it.
class InformerSet {
 public:
  explicit InformerSet(store::ObjectCache& cache) : cache_(cache) {}
  ~InformerSet();
  InformerSet(const InformerSet&) = delete;
  InformerSet& operator=(const InformerSet&) = delete;

  template <typename T>
  Informer<T>& For() {
    const std::string kind(T::kKind);
    auto it = informers_.find(kind);
    if (it == informers_.end()) it = informers_.emplace(kind, std::make_unique<Informer<T>>()).first;
    return static_cast<Informer<T>&>(*it->second);
  }

  // Subscribes to the cache (which must have loaded every kind registered); the handlers see
  // every existing object as added. Call once.
  void Start();
  // Unsubscribes: once this returns no handler runs again (the controllers that registered them
  // may go). Idempotent; the destructor calls it.
  void Stop();

  store::ObjectCache& cache() { return cache_; }

 private:
  void OnBatch(const std::vector<store::CacheEvent>& events, int64_t revision);

  store::ObjectCache& cache_;
  std::map<std::string, std::unique_ptr<InformerBase>, std::less<>> informers_;
  std::optional<int> listener_;
};

}  // namespace gpuaas::controller::runtime

#endif  // GPUAAS_CONTROLLER_RUNTIME_INFORMER_H_
