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

absl::Status ObjectCache::Start(const std::vector<std::string>& kinds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& k : kinds) kinds_[k];
  }
  RETURN_IF_ERROR(Relist());
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    kinds_ = std::move(fresh);
    revision_ = rev;
  }
  applied_.notify_all();
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Change& c : *changes) {
        auto it = kinds_.find(c.record.key.kind);
        if (it == kinds_.end()) continue;
        auto key = std::make_pair(c.record.key.ns, c.record.key.name);
        if (c.type == ChangeType::kDeleted) {
          it->second.objects.erase(key);
        } else {
          it->second.objects[key] = ToCached(c.record);
        }
        it->second.snapshot = nullptr;
      }
      revision_ = changes->back().revision;
    }
    applied_.notify_all();
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

bool ObjectCache::WaitFor(int64_t rev, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return applied_.wait_for(lock, timeout, [&] { return revision_.load() >= rev; });
}

}  // namespace gpuaas::store
