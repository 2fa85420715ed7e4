#include "store/cache.h"

#include "common/log.h"
#include "common/status.h"
#include "model/codec.h"

namespace gpuaas::store {
namespace {

std::shared_ptr<const CachedObject> ToCached(const Record& r) {
  auto obj = std::make_shared<CachedObject>();
  obj->ns = r.key.ns;
  obj->name = r.key.name;
  obj->resource_version = r.resource_version;
  if (absl::StatusOr<model::ObjectMeta> meta = model::DecodeMeta(r.data); meta.ok()) {
    obj->labels = std::move(meta->labels);
  }
  obj->json = r.data;
  return obj;
}

}  // namespace

ObjectCache::ObjectCache(Store& store) : store_(store) {}

ObjectCache::~ObjectCache() { Stop(); }

absl::Status ObjectCache::Load(const std::vector<std::string>& kinds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& k : kinds) kinds_[k];
  }
  return Relist();
}

absl::Status ObjectCache::Start(const std::vector<std::string>& kinds) {
  RETURN_IF_ERROR(Load(kinds));
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

int ObjectCache::AddListener(CacheListener listener) {
  std::lock_guard<std::mutex> apply(apply_mu_);
  std::vector<CacheEvent> all;
  int64_t rev = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rev = revision_.load();
    for (const auto& [kind, state] : kinds_) {
      for (const auto& [key, obj] : state.objects) all.push_back({kind, nullptr, obj});
    }
  }
  listener(all, rev);
  const int id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void ObjectCache::RemoveListener(int id) {
  std::lock_guard<std::mutex> apply(apply_mu_);
  listeners_.erase(id);
}

void ObjectCache::Notify(const std::vector<CacheEvent>& events, int64_t revision) {
  for (const auto& [id, l] : listeners_) l(events, revision);
}

void ObjectCache::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

absl::Status ObjectCache::Relist() {
  std::lock_guard<std::mutex> apply(apply_mu_);
  // Read the revision first: changes after it are applied next, so nothing is missed; changes
  // already included in the listing are applied again, which is harmless (same content).
  const int64_t rev = store_.Revision();
  std::map<std::string, KindState, std::less<>> fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [kind, state] : kinds_) fresh[kind];
  }
  for (auto& [kind, state] : fresh) {
    ASSIGN_OR_RETURN(std::vector<Record> records, store_.List(kind, ""));
    for (const Record& r : records) state.objects[{r.key.ns, r.key.name}] = ToCached(r);
  }
  std::vector<CacheEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // What the relist changed, for the listeners: an object whose version is unchanged is kept
    // as it was (the same pointer), so that listeners can tell.
    for (auto& [kind, state] : fresh) {
      const KindState& old = kinds_[kind];
      for (auto& [key, obj] : state.objects) {
        auto was = old.objects.find(key);
        if (was == old.objects.end()) {
          events.push_back({kind, nullptr, obj});
        } else if (was->second->resource_version != obj->resource_version) {
          events.push_back({kind, was->second, obj});
        } else {
          obj = was->second;
        }
      }
      for (const auto& [key, obj] : old.objects) {
        if (!state.objects.count(key)) events.push_back({kind, obj, nullptr});
      }
    }
    kinds_ = std::move(fresh);
    revision_ = rev;
  }
  // The events' kinds point to map keys, whose nodes moved into kinds_ and stay put.
  Notify(events, rev);
  Applied(rev);
  return absl::OkStatus();
}

absl::Status ObjectCache::ApplyChanges() {
  std::unique_lock<std::mutex> apply(apply_mu_);
  while (true) {
    absl::StatusOr<std::vector<Change>> changes = store_.Changes(revision_.load(), 5000);
    if (absl::IsOutOfRange(changes.status())) {
      apply.unlock();
      log::Warn("object cache fell behind the change feed ({}); relisting",
                changes.status().ToString());
      return Relist();
    }
    if (!changes.ok()) return changes.status();
    if (changes->empty()) return absl::OkStatus();
    // Decoded before taking the lock that readers wait on.
    std::vector<std::shared_ptr<const CachedObject>> decoded(changes->size());
    for (size_t i = 0; i < changes->size(); ++i) {
      if ((*changes)[i].type != ChangeType::kDeleted) decoded[i] = ToCached((*changes)[i].record);
    }
    std::vector<CacheEvent> events;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < changes->size(); ++i) {
        const Change& c = (*changes)[i];
        auto it = kinds_.find(c.record.key.kind);
        if (it == kinds_.end()) continue;
        auto key = std::make_pair(c.record.key.ns, c.record.key.name);
        auto& objects = it->second.objects;
        auto old = objects.find(key);
        std::shared_ptr<const CachedObject> before = old == objects.end() ? nullptr : old->second;
        if (c.type == ChangeType::kDeleted) {
          if (old != objects.end()) objects.erase(old);
          if (before) events.push_back({it->first, std::move(before), nullptr});
        } else {
          std::shared_ptr<const CachedObject> after = std::move(decoded[i]);
          objects[key] = after;
          events.push_back({it->first, std::move(before), std::move(after)});
        }
        it->second.snapshot = nullptr;
      }
      revision_ = changes->back().revision;
    }
    if (!listeners_.empty()) Notify(events, revision_.load());
    Applied(revision_.load());
  }
}

absl::Status ObjectCache::SyncNow() { return ApplyChanges(); }

void ObjectCache::Loop() {
  while (!stop_) {
    if (!store_.WaitForChange(revision_.load(), std::chrono::milliseconds(200))) continue;
    if (absl::Status s = ApplyChanges(); !s.ok()) {
      log::Error("object cache: {}", s.ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

std::shared_ptr<const KindSnapshot> ObjectCache::Snapshot(const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kinds_.find(kind);
  if (it == kinds_.end()) return std::make_shared<KindSnapshot>();
  KindState& st = it->second;
  if (!st.snapshot) {
    auto snap = std::make_shared<KindSnapshot>();
    snap->revision = revision_.load();
    snap->items.reserve(st.objects.size());
    for (const auto& [key, obj] : st.objects) snap->items.push_back(obj);
    st.snapshot = std::move(snap);
  }
  return st.snapshot;
}

std::shared_ptr<const CachedObject> ObjectCache::Get(std::string_view kind, std::string_view ns,
                                                     std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kinds_.find(kind);
  if (it == kinds_.end()) return nullptr;
  auto obj = it->second.objects.find(std::make_pair(ns, name));
  return obj == it->second.objects.end() ? nullptr : obj->second;
}

void ObjectCache::Applied(int64_t rev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = rev;
  }
  applied_.notify_all();
}

bool ObjectCache::WaitFor(int64_t rev, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return applied_.wait_for(lock, timeout, [&] { return notified_.load() >= rev; });
}

}  // namespace gpuaas::store
