// The controller manager: runs reconcilers over work queues, as controller-runtime's manager
// does for Kubernetes (docs/architecture.md, layer 6).
//
// A controller implements Reconcile(key): it reads the desired and observed state afresh (from
// informers, and inside its store transaction where it writes), acts, and returns
//   - OK with no requeue: done; the key's backoff is forgotten;
//   - OK with `requeue_after`: look again then (something is in progress, or a periodic task);
//   - an error: retried with the key's exponential backoff (a conflict, Aborted, is the usual one).
// Keys reach the queues from informer handlers (what changed) and from the controllers
// themselves; nothing lists the fleet on a timer.
//
// In a server, Start runs each controller's workers on threads and Stop drains them: no new key is
// taken and in-flight reconciles finish. Tests call RunUntilIdle instead, which applies the
// cache's pending changes and reconciles every ready key on the calling thread until nothing is
// left, with time moved by a FakeClock: deterministic, no sleeps.
#ifndef GPUAAS_CONTROLLER_RUNTIME_MANAGER_H_
#define GPUAAS_CONTROLLER_RUNTIME_MANAGER_H_

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "controller/runtime/informer.h"
#include "controller/runtime/workqueue.h"
#include "store/cache.h"

namespace gpuaas::controller::runtime {

struct Result {
  std::optional<Duration> requeue_after;  // nullopt: nothing more to do for this key
  static Result Done() { return {}; }
  static Result After(Duration d) { return {d}; }
};

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  virtual absl::StatusOr<Result> Reconcile(const std::string& key) = 0;
  // A controller whose reconciles are many small writes (one per GPU) may take up to
  // MaxBatch() ready keys at once and write them in one transaction: the outcome then applies to
  // every key of the batch. The default takes one key at a time.
  virtual size_t MaxBatch() const { return 1; }
  virtual absl::StatusOr<Result> ReconcileBatch(const std::vector<std::string>& keys) { return Reconcile(keys.front()); }
};

// Per-controller figures, exposed on /metrics under controller-runtime's names.
struct ControllerMetrics {
  // Upper bounds (seconds) of the reconcile time histogram; +Inf implied.
  static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1,    2.5};
  std::atomic<uint64_t> success{0}, error{0}, requeue_after{0};
  std::atomic<uint64_t> duration_buckets[kBuckets.size() + 1] = {};
  std::atomic<uint64_t> duration_count{0}, duration_sum_ns{0};
  std::atomic<int64_t> active_workers{0};
  void Observe(std::chrono::nanoseconds took);
};

class Manager {
 public:
  // `cache` feeds the informers; the caller starts it (Start for a server, Load for tests).
  Manager(const Clock& clock, store::ObjectCache& cache);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  InformerSet& informers() { return informers_; }
  const Clock& clock() const { return clock_; }

  // Registers a controller (before Start); `r` is not owned. The returned queue is where its
  // event handlers put keys. `workers` > 1 reconciles different keys in parallel.
  WorkQueue& Add(std::string name, Reconciler& r, int workers = 1, BackoffPolicy backoff = {});

  // Starts the informers (handlers see every object once, as added): call once, after every
  // controller registered its handlers. Both Start and RunUntilIdle call it if needed.
  void StartInformers();
  // Starts the workers' threads.
  void Start();
  // Stops taking keys, lets in-flight reconciles finish and joins the workers. Idempotent.
  void Stop();

  // Read-your-writes for a controller that just committed revision `rev`: returns once the
  // informers reflect it (a worker waits for the cache's thread, up to 10 s; without workers the
  // cache applies it at once).
  void AwaitRevision(int64_t rev);

  // Deterministic single-threaded run for tests (no Start): applies the cache's pending changes,
  // reconciles every ready key, and repeats until nothing is ready and the store has nothing
  // new. Keys scheduled for later wait for the clock. Returns the reconciles made; stops after
  // `max_reconciles` (a controller that never settles).
  int RunUntilIdle(int max_reconciles = 100000);

  // Appends the controllers' and queues' metrics in Prometheus text format.
  void AppendMetrics(std::string& out) const;

 private:
  struct Entry {
    std::string name;
    Reconciler* reconciler;
    int workers;
    std::unique_ptr<WorkQueue> queue;
    std::unique_ptr<ControllerMetrics> metrics;
  };
  // Reconciles keys taken from `e.queue` (one, or a batch) and files the outcome for each.
  void Process(Entry& e, std::vector<std::string> keys);
  // The first key, then as many more ready ones as the reconciler batches.
  std::vector<std::string> Batch(Entry& e, std::string first);
  void Worker(Entry& e);

  const Clock& clock_;
  store::ObjectCache& cache_;
  InformerSet informers_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::thread> threads_;
  std::once_flag informers_started_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
};

// A task run every `period` as a controller of its own (one key, "tick"), such as the telemetry
// sources inside the server: it gets the manager's metrics, graceful stop and deterministic
// tests. An error is logged and retried with backoff.
class Periodic final : public Reconciler {
 public:
  // Registers itself with `manager`; the first run is due at once.
  Periodic(Manager& manager, std::string name, Duration period, std::function<absl::Status()> fn);
  absl::StatusOr<Result> Reconcile(const std::string& key) override;

 private:
  Duration period_;
  std::function<absl::Status()> fn_;
};

}  // namespace gpuaas::controller::runtime

#endif  // GPUAAS_CONTROLLER_RUNTIME_MANAGER_H_
