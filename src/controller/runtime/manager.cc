#include "controller/runtime/manager.h"

#include <limits>

#include "common/log.h"
#include "common/metrics_text.h"
#include "fmt/format.h"

namespace gpuaas::controller::runtime {

void ControllerMetrics::Observe(std::chrono::nanoseconds took) {
  const double s = std::chrono::duration<double>(took).count();
  size_t b = 0;
  while (b < kBuckets.size() && s > kBuckets[b]) ++b;
  ++duration_buckets[b];
  ++duration_count;
  duration_sum_ns += static_cast<uint64_t>(took.count());
}

Manager::Manager(const Clock& clock, store::ObjectCache& cache)
    : clock_(clock), cache_(cache), informers_(cache) {}

Manager::~Manager() { Stop(); }

WorkQueue& Manager::Add(std::string name, Reconciler& r, int workers, BackoffPolicy backoff) {
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->reconciler = &r;
  e->workers = std::max(1, workers);
  e->queue = std::make_unique<WorkQueue>(std::move(name), clock_, backoff);
  e->metrics = std::make_unique<ControllerMetrics>();
  entries_.push_back(std::move(e));
  return *entries_.back()->queue;
}

void Manager::StartInformers() {
  std::call_once(informers_started_, [this] { informers_.Start(); });
}

std::vector<std::string> Manager::Batch(Entry& e, std::string first) {
  std::vector<std::string> keys = {std::move(first)};
  const size_t max = std::max<size_t>(1, e.reconciler->MaxBatch());
  while (keys.size() < max) {
    std::optional<std::string> more = e.queue->TryGet();
    if (!more) break;
    keys.push_back(std::move(*more));
  }
  return keys;
}

void Manager::Process(Entry& e, std::vector<std::string> keys) {
  const auto start = std::chrono::steady_clock::now();
  ++e.metrics->active_workers;
  absl::StatusOr<Result> r =
      keys.size() == 1 ? e.reconciler->Reconcile(keys.front()) : e.reconciler->ReconcileBatch(keys);
  --e.metrics->active_workers;
  e.metrics->Observe(std::chrono::steady_clock::now() - start);
  for (const std::string& key : keys) {
    if (!r.ok()) {
      ++e.metrics->error;
      e.queue->AddRateLimited(key);
    } else {
      e.queue->Forget(key);
      if (r->requeue_after) {
        ++e.metrics->requeue_after;
        e.queue->AddAfter(key, *r->requeue_after);
      } else {
        ++e.metrics->success;
      }
    }
    e.queue->Done(key);
  }
  if (!r.ok()) {
    const std::string what = keys.size() == 1 ? keys.front() : fmt::format("{} keys", keys.size());
    if (absl::IsAborted(r.status())) {
      log::Debug("{}: {}: {} (retrying)", e.name, what, std::string(r.status().message()));
    } else {
      log::Warn("{}: {}: {} (retrying with backoff)", e.name, what, r.status().ToString());
    }
  }
}

void Manager::Worker(Entry& e) {
  while (std::optional<std::string> key = e.queue->Get()) Process(e, Batch(e, std::move(*key)));
}

void Manager::AwaitRevision(int64_t rev) {
  if (cache_.Notified() >= rev) return;
  if (started_) {
    if (!cache_.WaitFor(rev, std::chrono::seconds(10))) log::Warn("the object cache lags behind revision {}", rev);
  } else if (absl::Status s = cache_.SyncNow(); !s.ok()) {
    log::Error("cache: {}", s.ToString());
  }
}

void Manager::Start() {
  StartInformers();
  started_ = true;
  for (auto& e : entries_) {
    for (int i = 0; i < e->workers; ++i) threads_.emplace_back([this, p = e.get()] { Worker(*p); });
  }
}

void Manager::Stop() {
  if (stopped_.exchange(true)) return;
  for (auto& e : entries_) e->queue->ShutDown();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

int Manager::RunUntilIdle(int max_reconciles) {
  StartInformers();
  int done = 0;
  while (done < max_reconciles) {
    // What the last round wrote reaches the informers, whose handlers add keys.
    if (absl::Status s = cache_.SyncNow(); !s.ok()) log::Error("cache: {}", s.ToString());
    bool any = false;
    for (auto& e : entries_) {
      while (done < max_reconciles) {
        std::optional<std::string> key = e->queue->TryGet();
        if (!key) break;
        std::vector<std::string> keys = Batch(*e, std::move(*key));
        done += static_cast<int>(keys.size());
        Process(*e, std::move(keys));
        any = true;
      }
    }
    if (!any) break;
  }
  return done;
}

void Manager::AppendMetrics(std::string& out) const {
  MetricsText w(out);
  w.Family("workqueue_depth", "gauge", "Current depth of the work queue (keys ready to reconcile).");
  for (const auto& e : entries_) w.Sample("workqueue_depth", {{"name", e->name}}, e->queue->Len());
  w.Family("workqueue_waiting", "gauge", "Keys waiting for their requeue time or backoff.");
  for (const auto& e : entries_) w.Sample("workqueue_waiting", {{"name", e->name}}, e->queue->Waiting());
  w.Family("workqueue_adds_total", "counter", "Total number of adds handled by the work queue.");
  for (const auto& e : entries_) w.Sample("workqueue_adds_total", {{"name", e->name}}, e->queue->adds_total());
  w.Family("workqueue_retries_total", "counter",
           "Total number of retries (rate-limited adds) handled by the work queue.");
  for (const auto& e : entries_) w.Sample("workqueue_retries_total", {{"name", e->name}}, e->queue->retries_total());
  w.Family("controller_runtime_reconcile_total", "counter",
           "Total number of reconciliations per controller and result.");
  for (const auto& e : entries_) {
    const ControllerMetrics& m = *e->metrics;
    w.Sample("controller_runtime_reconcile_total", {{"controller", e->name}, {"result", "success"}}, m.success.load());
    w.Sample("controller_runtime_reconcile_total", {{"controller", e->name}, {"result", "error"}}, m.error.load());
    w.Sample("controller_runtime_reconcile_total", {{"controller", e->name}, {"result", "requeue_after"}},
             m.requeue_after.load());
  }
  w.Family("controller_runtime_reconcile_errors_total", "counter",
           "Total number of reconciliation errors per controller.");
  for (const auto& e : entries_) {
    w.Sample("controller_runtime_reconcile_errors_total", {{"controller", e->name}}, e->metrics->error.load());
  }
  w.Family("controller_runtime_active_workers", "gauge", "Number of workers reconciling right now per controller.");
  for (const auto& e : entries_) {
    w.Sample("controller_runtime_active_workers", {{"controller", e->name}}, e->metrics->active_workers.load());
  }
  w.Family("controller_runtime_max_concurrent_reconciles", "gauge",
           "Maximum number of concurrent reconciles per controller.");
  for (const auto& e : entries_) {
    w.Sample("controller_runtime_max_concurrent_reconciles", {{"controller", e->name}}, e->workers);
  }
  w.Family("controller_runtime_reconcile_time_seconds", "histogram",
           "Length of time per reconciliation per controller.");
  for (const auto& e : entries_) {
    const ControllerMetrics& m = *e->metrics;
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= ControllerMetrics::kBuckets.size(); ++b) {
      cumulative += m.duration_buckets[b].load();
      const double le = b < ControllerMetrics::kBuckets.size() ? ControllerMetrics::kBuckets[b]
                                                               : std::numeric_limits<double>::infinity();
      w.Sample("controller_runtime_reconcile_time_seconds_bucket",
               {{"controller", e->name}, {"le", FormatMetricValue(le)}}, cumulative);
    }
    w.Sample("controller_runtime_reconcile_time_seconds_sum", {{"controller", e->name}},
             static_cast<double>(m.duration_sum_ns.load()) / 1e9);
    w.Sample("controller_runtime_reconcile_time_seconds_count", {{"controller", e->name}}, m.duration_count.load());
  }
}

Periodic::Periodic(Manager& manager, std::string name, Duration period, std::function<absl::Status()> fn)
    : period_(period), fn_(std::move(fn)) {
  manager.Add(std::move(name), *this).Add("tick");
}

absl::StatusOr<Result> Periodic::Reconcile(const std::string&) {
  if (absl::Status s = fn_(); !s.ok()) return s;
  return Result::After(period_);
}

}  // namespace gpuaas::controller::runtime
