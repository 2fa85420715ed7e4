#include "api/internal/watch.h"

#include "api/problem.h"

#include "common/log.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {

struct WatchHub::Watcher {
  WatchRequest req;
  std::shared_ptr<StreamSink> sink;  // null until the head went out
  std::chrono::steady_clock::time_point deadline;
  std::chrono::steady_clock::time_point next_bookmark;
  bool done = false;
};

// The stream handed to the HTTP server: opens the watch once the head is out.
class WatchHub::Stream final : public ResponseStream {
 public:
  Stream(WatchHub& hub, std::shared_ptr<Watcher> w) : hub_(hub), w_(std::move(w)) {}
  void Open(std::shared_ptr<StreamSink> sink) override { hub_.Start(w_, std::move(sink)); }

 private:
  WatchHub& hub_;
  std::shared_ptr<Watcher> w_;
};

namespace {

bool Sees(const WatchRequest& r, const store::CachedObject& o) {
  return (r.ns.empty() || o.ns == r.ns) && (r.only_name.empty() || o.name == r.only_name) &&
         (r.selector.Empty() || r.selector.Matches(o.labels));
}

std::string Line(std::string_view type, const std::string& object_json) {
  std::string s;
  s.reserve(object_json.size() + 32);
  s.append(R"({"type":")").append(type).append(R"(","object":)").append(object_json).append("}\n");
  return s;
}

// An event of `r`'s watch: the object as the watch renders it (a Table for kubectl).
std::string Event(const WatchRequest& r, std::string_view type, const std::string& object_json) {
  return Line(type, r.render ? r.render(object_json) : object_json);
}

}  // namespace

WatchHub::WatchHub(store::ObjectCache& cache, std::chrono::milliseconds bookmark_every)
    : cache_(cache), bookmark_every_(bookmark_every) {
  listener_ = cache_.AddListener([this](const std::vector<store::CacheEvent>& events, int64_t revision) {
    OnBatch(events, revision);
  });
  ticker_ = std::thread([this] { Tick(); });
}

WatchHub::~WatchHub() {
  CloseAll();
  cache_.RemoveListener(listener_);
}

size_t WatchHub::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watchers_.size();
}

std::string WatchHub::EventLine(const Watcher& w, const store::CachedObject* before, const store::CachedObject* after) {
  const bool was = before != nullptr && Sees(w.req, *before);
  const bool is = after != nullptr && Sees(w.req, *after);
  if (is) return Event(w.req, was ? "MODIFIED" : "ADDED", after->json);
  if (!was) return "";
  // Gone, or no longer selected: DELETED, with the object as it is now if it still exists.
  return Event(w.req, "DELETED", after != nullptr ? after->json : before->json);
}

std::string WatchHub::Bookmark(const Watcher& w, int64_t revision) {
  return Line("BOOKMARK", fmt::format(R"({{"kind":"{}","apiVersion":"gpuaas.io/v1","metadata":{{"resourceVersion":"{}"}}}})",
                                      w.req.kind, revision));
}

HttpResponse WatchHub::Open(WatchRequest req) {
  if (req.resource_version && *req.resource_version > 0) {
    // Refused at once when the feed no longer reaches back so far, so that the client relists.
    absl::StatusOr<std::vector<store::Change>> probe = cache_.store().Changes(*req.resource_version, 1);
    if (absl::IsOutOfRange(probe.status())) {
      return ErrorResponse(absl::OutOfRangeError(fmt::format("too old resource version: {} ({})", *req.resource_version,
                                                             std::string(probe.status().message()))),
                           ErrorBody::kKubernetesStatus);
    }
    if (!probe.ok()) {
      return ErrorResponse(absl::UnavailableError(probe.status().message()), ErrorBody::kKubernetesStatus);
    }
  }
  auto w = std::make_shared<Watcher>();
  w->req = std::move(req);
  HttpResponse r;
  r.content_type = "application/json";
  r.stream = std::make_shared<Stream>(*this, std::move(w));
  return r;
}

void WatchHub::Start(const std::shared_ptr<Watcher>& w, std::shared_ptr<StreamSink> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) {
    sink->End();
    return;
  }
  w->sink = std::move(sink);
  const auto now = std::chrono::steady_clock::now();
  w->deadline = now + w->req.timeout;
  w->next_bookmark = now + bookmark_every_;
  // Holding mu_, no batch is fanned out meanwhile: what follows continues exactly where the
  // replay ends.
  const int64_t upto = revision_;
  bool ok = true;
  if (!w->req.resource_version || *w->req.resource_version <= 0) {
    const std::shared_ptr<const store::KindSnapshot> snap = cache_.Snapshot(w->req.kind);
    // The snapshot may be newer than the last batch fanned out: those changes arrive again as
    // MODIFIED, which is harmless. It is never older.
    for (const auto& obj : snap->items) {
      if (ok && Sees(w->req, *obj)) ok = w->sink->Write(Event(w->req, "ADDED", obj->json));
    }
  } else {
    int64_t after = *w->req.resource_version;
    while (ok && after < upto) {
      absl::StatusOr<std::vector<store::Change>> changes = cache_.store().Changes(after, 1000);
      if (!changes.ok()) {
        // Compacted since Open: the client must relist, as Kubernetes says with an ERROR event.
        w->sink->Write(Line("ERROR", KubernetesStatusJson(ProblemFor(absl::OutOfRangeError(changes.status().message())))));
        w->sink->End();
        return;
      }
      if (changes->empty()) break;
      for (const store::Change& c : *changes) {
        if (c.revision > upto) break;
        after = c.revision;
        if (c.record.key.kind != w->req.kind) continue;
        // The feed has each record as written; what the watcher saw before is not needed: an
        // object outside the selector is simply not sent (a replay cannot tell "stopped matching").
        store::CachedObject o{c.record.key.ns, c.record.key.name, c.record.resource_version, {}, c.record.data};
        if (absl::StatusOr<model::ObjectMeta> meta = model::DecodeMeta(c.record.data); meta.ok()) o.labels = meta->labels;
        if (!Sees(w->req, o)) continue;
        const char* type = c.type == store::ChangeType::kAdded      ? "ADDED"
                           : c.type == store::ChangeType::kModified ? "MODIFIED"
                                                                    : "DELETED";
        ok = w->sink->Write(Event(w->req, type, c.record.data));
        if (!ok) break;
      }
      if (changes->back().revision > upto) break;
    }
  }
  if (ok && w->req.bookmarks) ok = w->sink->Write(Bookmark(*w, upto));
  if (ok) watchers_.push_back(w);
}

void WatchHub::OnBatch(const std::vector<store::CacheEvent>& events, int64_t revision) {
  std::lock_guard<std::mutex> lock(mu_);
  revision_ = revision;
  if (watchers_.empty()) return;
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    Watcher& w = **it;
    bool ok = true;
    for (const store::CacheEvent& e : events) {
      if (e.kind != w.req.kind) continue;
      std::string line = EventLine(w, e.before.get(), e.after.get());
      if (!line.empty() && !(ok = w.sink->Write(std::move(line)))) break;
    }
    it = ok ? std::next(it) : watchers_.erase(it);  // the client is gone
  }
}

void WatchHub::Tick() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!closed_) {
    cv_.wait_for(lock, std::min<std::chrono::milliseconds>(bookmark_every_, std::chrono::seconds(1)));
    const auto now = std::chrono::steady_clock::now();
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      Watcher& w = **it;
      bool keep = true;
      if (now >= w.deadline) {
        w.sink->End();
        keep = false;
      } else if (w.req.bookmarks && now >= w.next_bookmark) {
        keep = w.sink->Write(Bookmark(w, revision_));
        w.next_bookmark = now + bookmark_every_;
      }
      it = keep ? std::next(it) : watchers_.erase(it);
    }
  }
}

void WatchHub::CloseAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (const auto& w : watchers_) w->sink->End();
    watchers_.clear();
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

}  // namespace gpuaas::api::internal
