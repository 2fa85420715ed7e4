// WorkQueue: the keys a controller still has to reconcile, as client-go's rate-limited delaying
// queue holds them. Part of the controller runtime (docs/architecture.md, layer 6).
//   - A key is held once however often it is added (deduplicated), and never handed to two
//     workers at once: a key added while it is being processed is handed out again after Done.
//   - AddAfter(key, d) makes the key ready at now + d (the earliest of several wins; a key that is
//     already ready stays ready).
//   - AddRateLimited(key) waits the key's own exponential backoff (base, 2 x base, ... up to the
//     cap), counted as a retry; Forget(key) resets it once the key succeeded.
// Time comes from a Clock, so that tests move it by hand (FakeClock) and take keys with TryGet.
// Thread-safe.
#ifndef GPUAAS_CONTROLLER_RUNTIME_WORKQUEUE_H_
#define GPUAAS_CONTROLLER_RUNTIME_WORKQUEUE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"

namespace gpuaas::controller::runtime {

struct BackoffPolicy {
  Duration base = std::chrono::milliseconds(5);
  Duration cap = std::chrono::seconds(300);
  // The wait before retry number `failures` (1 for the first): base x 2^(failures-1), capped.
  Duration After(int failures) const;
};

class WorkQueue {
 public:
  WorkQueue(std::string name, const Clock& clock, BackoffPolicy backoff = {});
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  const std::string& name() const { return name_; }

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  // Failures since the key last succeeded (Forget).
  int NumRequeues(const std::string& key) const;

  // The next ready key, blocking until one is ready (with a real clock: delayed keys become
  // ready as time passes); nullopt once ShutDown was called. Every key taken must be given back
  // with Done.
  std::optional<std::string> Get();
  // The next ready key now, if any; never blocks.
  std::optional<std::string> TryGet();
  void Done(const std::string& key);

  // Wakes every Get with nullopt; later adds are ignored. Keys being processed may still call
  // Done.
  void ShutDown();
  bool shutting_down() const;

  // Ready keys (the depth users see), and keys waiting for their time.
  size_t Len() const;
  size_t Waiting() const;
  // When the earliest waiting key becomes ready (nullopt: none waits).
  std::optional<Time> NextReady() const;

  // Counters for /metrics.
  uint64_t adds_total() const { return adds_.load(); }
  uint64_t retries_total() const { return retries_.load(); }

 private:
  void PromoteLocked(Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadyLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddAfterLocked(const std::string& key, Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<std::string> PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const Clock& clock_;
  const BackoffPolicy backoff_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> ready_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> queued_ ABSL_GUARDED_BY(mu_);      // the keys in ready_
  std::set<std::string> processing_ ABSL_GUARDED_BY(mu_);  // handed out, not Done yet
  std::set<std::string> dirty_ ABSL_GUARDED_BY(mu_);       // added while processing
  std::map<std::string, Time> waiting_ ABSL_GUARDED_BY(mu_);         // key -> ready at
  std::set<std::pair<Time, std::string>> by_time_ ABSL_GUARDED_BY(mu_);  // the same, ordered
  std::map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> adds_{0};
  std::atomic<uint64_t> retries_{0};
};

}  // namespace gpuaas::controller::runtime

#endif  // GPUAAS_CONTROLLER_RUNTIME_WORKQUEUE_H_
