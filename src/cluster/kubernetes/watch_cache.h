// One in-memory copy of a watched Kubernetes collection, as client-go's Store and Indexer keep
// one for every kind: the decoded objects of the last list, kept current by the watch events
// that follow it. A Reflector (reflector.h) delivers the list and the events; the driver decodes
// each object once (a Pod into PodGpus, a Node into what it reports) and hands it here, so that
// lookups never parse JSON. Pure: no I/O, no clock, no logging; the driver's caches are
// instances of this one type.
//
// Objects are keyed "namespace/name", or "name" for cluster-scoped kinds, by the key function
// given at construction, and shared as immutable `std::shared_ptr<const T>`: a caller may keep
// one as long as it likes, and a later change replaces the pointer, never the object.
//
// A cache may keep only some of the objects it is shown (a `keep` predicate: pods that hold
// something, ResourceSlices of one driver); an object it does not keep is treated as deleted, so
// that an object that stops mattering leaves the cache. Secondary indexes (pods by node), named
// at construction, map each object to zero or more values and are kept in step with the objects.
//
// Thread-safety: every member function is thread-safe; one mutex per cache guards the objects,
// the indexes and the resource version. The key, keep and index functions may be called with
// that mutex held: they must be pure functions of the object and never call into the cache.
#ifndef GPUAAS_CLUSTER_KUBERNETES_WATCH_CACHE_H_
#define GPUAAS_CLUSTER_KUBERNETES_WATCH_CACHE_H_

#include <concepts>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace gpuaas::cluster::kubernetes {

// The watch event type that removes an object (client.h's WatchEvent::type).
inline constexpr std::string_view kWatchDeleted = "DELETED";

template <typename T>
class WatchCache {
 public:
  using Ptr = std::shared_ptr<const T>;
  // An object's key: "namespace/name", or "name" for a cluster-scoped kind.
  using KeyFn = std::function<std::string(const T&)>;
  // Whether the cache holds an object at all.
  using KeepFn = std::function<bool(const T&)>;
  // The values under which an index files an object (none: not in that index).
  using IndexFn = std::function<std::vector<std::string>(const T&)>;
  using Indexes = std::map<std::string, IndexFn, std::less<>>;

  // What one Apply or Delete did to the object under its key: what was held before and what is
  // held after, each null when there was none (added: `before` null; removed: `after` null).
  struct Change {
    Ptr before;
    Ptr after;
    // True when the object was added or removed, or is now held with a different value
    // (T's operator==).
    bool changed() const requires std::equality_comparable<T> {
      if ((before == nullptr) != (after == nullptr)) return true;
      return before != nullptr && !(*before == *after);
    }
  };

  // `key` names each object; `keep`, when given, says which objects the cache holds (null: all);
  // `indexes` are the secondary indexes by name, fixed for the cache's life.
  explicit WatchCache(KeyFn key, KeepFn keep = nullptr, Indexes indexes = {})
      : key_(std::move(key)), keep_(std::move(keep)), index_fns_(std::move(indexes)) {}
  WatchCache(const WatchCache&) = delete;
  WatchCache& operator=(const WatchCache&) = delete;

  // A relist: the cache becomes exactly `items` (those it keeps), dropping every object that is
  // not among them, and `resource_version` is the list's. Of items with the same key the last
  // counts. After the first Replace, synced() is true.
  void Replace(std::vector<T> items, std::string resource_version) {
    std::map<std::string, Ptr, std::less<>> objects;
    for (T& item : items) {
      if (keep_ && !keep_(item)) continue;
      std::string key = key_(item);
      objects.insert_or_assign(std::move(key), std::make_shared<const T>(std::move(item)));
    }
    std::unique_lock lock(mu_);
    objects_ = std::move(objects);
    indexes_.clear();
    for (const auto& [key, object] : objects_) Index(key, *object);
    resource_version_ = std::move(resource_version);
    synced_ = true;
  }

  // A watch event of type `type` ("ADDED", "MODIFIED", "DELETED") for `object`: DELETED
  // removes the object held under its key, any other type adds or replaces it (or removes it
  // when the cache does not keep it). `resource_version`, when not empty, becomes the cache's.
  // Returns what was held under the key before and after.
  Change Apply(std::string_view type, T object, std::string resource_version = {}) {
    const std::string key = key_(object);
    const bool remove = type == kWatchDeleted || (keep_ && !keep_(object));
    Ptr after = remove ? nullptr : std::make_shared<const T>(std::move(object));
    std::unique_lock lock(mu_);
    if (!resource_version.empty()) resource_version_ = std::move(resource_version);
    return Put(key, std::move(after));
  }

  // Removes the object held under `key`, for an event whose object does not decode. Returns
  // what was held before (`after` is null).
  Change Delete(std::string_view key) {
    std::unique_lock lock(mu_);
    return Put(std::string(key), nullptr);
  }

  // The object held under `key`; null when none.
  Ptr Get(std::string_view key) const {
    std::shared_lock lock(mu_);
    auto it = objects_.find(key);
    return it == objects_.end() ? nullptr : it->second;
  }

  // Every object held, sorted by key.
  std::vector<Ptr> List() const {
    std::shared_lock lock(mu_);
    std::vector<Ptr> out;
    out.reserve(objects_.size());
    for (const auto& [key, object] : objects_) out.push_back(object);
    return out;
  }

  // The objects that index `index` files under `value`, sorted by key; empty when none (or
  // when there is no such index).
  std::vector<Ptr> ByIndex(std::string_view index, std::string_view value) const {
    std::shared_lock lock(mu_);
    std::vector<Ptr> out;
    auto idx = indexes_.find(index);
    if (idx == indexes_.end()) return out;
    auto keys = idx->second.find(value);
    if (keys == idx->second.end()) return out;
    out.reserve(keys->second.size());
    for (const std::string& key : keys->second) {
      if (auto it = objects_.find(key); it != objects_.end()) out.push_back(it->second);
    }
    return out;
  }

  // The values of index `index` that file at least one object, sorted.
  std::vector<std::string> IndexValues(std::string_view index) const {
    std::shared_lock lock(mu_);
    std::vector<std::string> out;
    if (auto idx = indexes_.find(index); idx != indexes_.end()) {
      out.reserve(idx->second.size());
      for (const auto& [value, keys] : idx->second) out.push_back(value);
    }
    return out;
  }

  // How many objects are held.
  size_t size() const {
    std::shared_lock lock(mu_);
    return objects_.size();
  }

  // The resourceVersion of the last Replace, or of a later Apply that was given one; "" before.
  std::string resource_version() const {
    std::shared_lock lock(mu_);
    return resource_version_;
  }

  // True once a Replace (a list) has filled the cache.
  bool synced() const {
    std::shared_lock lock(mu_);
    return synced_;
  }

 private:
  using Keys = std::set<std::string, std::less<>>;

  // Holds `after` under `key` (removes what is there when null) and refiles the indexes.
  Change Put(const std::string& key, Ptr after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Change change;
    if (auto it = objects_.find(key); it != objects_.end()) {
      change.before = std::move(it->second);
      Unindex(key, *change.before);
      if (after) {
        it->second = after;
      } else {
        objects_.erase(it);
      }
    } else if (after) {
      objects_.emplace(key, after);
    }
    if (after) Index(key, *after);
    change.after = std::move(after);
    return change;
  }

  void Index(const std::string& key, const T& object) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [name, fn] : index_fns_) {
      for (std::string& value : fn(object)) indexes_[name][std::move(value)].insert(key);
    }
  }

  void Unindex(const std::string& key, const T& object) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [name, fn] : index_fns_) {
      auto idx = indexes_.find(name);
      if (idx == indexes_.end()) continue;
      for (const std::string& value : fn(object)) {
        auto keys = idx->second.find(value);
        if (keys == idx->second.end()) continue;
        keys->second.erase(key);
        if (keys->second.empty()) idx->second.erase(keys);
      }
    }
  }

  // Set at construction and never changed: read without the mutex.
  const KeyFn key_;
  const KeepFn keep_;
  const Indexes index_fns_;

  mutable std::shared_mutex mu_;
  std::map<std::string, Ptr, std::less<>> objects_ ABSL_GUARDED_BY(mu_);
  // index name -> value -> keys of the objects filed under it.
  std::map<std::string, std::map<std::string, Keys, std::less<>>, std::less<>> indexes_
      ABSL_GUARDED_BY(mu_);
  std::string resource_version_ ABSL_GUARDED_BY(mu_);
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_WATCH_CACHE_H_
