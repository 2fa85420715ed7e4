#include "cluster/kubernetes/reflector.h"

#include <algorithm>
#include <random>

#include "absl/strings/cord.h"
#include "cluster/kubernetes/nodes.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"

namespace gpuaas::cluster::kubernetes {
namespace {

// metadata.resourceVersion of an event's object, or "".
std::string ResourceVersionOf(const std::string& object) { return MetadataField(object, "resourceVersion"); }

std::chrono::milliseconds RetryAfter(const absl::Status& s) {
  const auto p = s.GetPayload(kRetryAfterPayload);
  if (!p) return std::chrono::milliseconds(0);
  std::optional<int64_t> secs = ParseInt(std::string(*p));
  if (!secs || *secs < 0) return std::chrono::milliseconds(0);
  return std::chrono::seconds(std::min<int64_t>(*secs, 300));
}

}  // namespace

Reflector::Reflector(Client& client, std::string path, std::function<void(const ListResult&)> replace,
                     std::function<void(const WatchEvent&)> apply, std::function<void()> on_state,
                     Backoff backoff)
    : client_(client), path_(std::move(path)), replace_(std::move(replace)), apply_(std::move(apply)),
      on_state_(std::move(on_state)), backoff_(backoff) {}

Reflector::~Reflector() { Stop(); }

void Reflector::Start() { thread_ = std::thread([this] { Run(); }); }

void Reflector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  client_.Stop();
  if (thread_.joinable()) thread_.join();
}

bool Reflector::WaitSynced(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return stats_.synced || stop_; }) && stats_.synced;
}

ReflectorStats Reflector::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool Reflector::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stop_; });
}

void Reflector::Run() {
  std::mt19937_64 rng(std::random_device{}());
  std::chrono::milliseconds delay = backoff_.initial;
  std::string rv;
  bool need_list = true;
  bool resumed_quietly = false;  // the last watch dropped and was resumed without a failure
  auto failed = [&](const absl::Status& s) {
    bool was_ok;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.errors;
      // Failing anew, or failing otherwise (a server that was down now answers 404): the
      // caller's view of this collection changed.
      was_ok = stats_.last_error.empty() || stats_.last_code != s.code();
      stats_.last_error = s.ToString();
      stats_.last_code = s.code();
    }
    if (was_ok && on_state_) on_state_();
    log::Warn("kubernetes {}: {}", path_, s.ToString());
    // Full jitter over the current step, but never sooner than the server asked.
    std::uniform_int_distribution<int64_t> jitter(delay.count() / 2, delay.count());
    const std::chrono::milliseconds wait = std::max(std::chrono::milliseconds(jitter(rng)), RetryAfter(s));
    delay = std::min(delay * 2, backoff_.max);
    return Sleep(wait);
  };
  // The server answers again (a list, or a watch's head): no longer failing. The backoff
  // step is kept until a watch proves steady, so a server that accepts and drops at once is
  // still backed off from.
  auto answered = [&] {
    bool recovered;
    {
      std::lock_guard<std::mutex> lock(mu_);
      recovered = !stats_.last_error.empty();
      stats_.last_error.clear();
      stats_.last_code = absl::StatusCode::kOk;
    }
    if (recovered && on_state_) on_state_();
  };
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    if (need_list) {
      absl::StatusOr<ListResult> list = client_.List(path_);
      if (!list.ok()) {
        if (absl::IsCancelled(list.status()) || !failed(list.status())) return;
        continue;
      }
      replace_(*list);
      rv = list->resource_version;
      need_list = false;
      delay = backoff_.initial;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.lists;
        stats_.synced = true;
        stats_.resource_version = rv;
        stats_.last_error.clear();
        stats_.last_code = absl::StatusCode::kOk;
      }
      cv_.notify_all();
      if (on_state_) on_state_();  // listed: what stats() says and what the caller holds changed
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.watches;
    }
    const auto opened = std::chrono::steady_clock::now();
    bool accepted = false, delivered = false;
    absl::Status w = client_.Watch(
        path_, rv,
        [&](const WatchEvent& e) {
          delivered = true;
          const std::string event_rv = ResourceVersionOf(e.object);
          if (e.type != "BOOKMARK") apply_(e);
          if (!event_rv.empty()) rv = event_rv;
          std::lock_guard<std::mutex> lock(mu_);
          if (e.type != "BOOKMARK") ++stats_.events;
          stats_.resource_version = rv;
          return !stop_;
        },
        [&] {
          accepted = true;
          answered();
        });
    const bool steady = delivered || std::chrono::steady_clock::now() - opened > std::chrono::seconds(1);
    if (steady) {
      delay = backoff_.initial;
      resumed_quietly = false;
    }
    if (w.ok()) {
      // The server ended the watch: again from rv, at once unless it keeps ending them at once.
      if (!steady) {
        if (!Sleep(delay)) return;
        delay = std::min(delay * 2, backoff_.max);
      }
      continue;
    }
    // A watch the server had accepted and that then dropped (a restart, a load balancer's idle
    // cut) is resumed at once, without counting as a failure; a second drop in a row does count.
    if (accepted && absl::IsUnavailable(w) && !resumed_quietly) {
      resumed_quietly = true;
      log::Debug("kubernetes {}: watch dropped, resuming from {}: {}", path_, rv, w.ToString());
      continue;
    }
    if (absl::IsCancelled(w)) return;
    if (absl::IsOutOfRange(w)) {
      log::Info("kubernetes {}: resourceVersion {} is too old, listing again", path_, rv);
      need_list = true;
      continue;
    }
    if (!failed(w)) return;
  }
}

}  // namespace gpuaas::cluster::kubernetes
