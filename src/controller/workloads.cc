#include "controller/workloads.h"

#include <set>

#include "allocator/admission.h"
#include "common/status.h"
#include "controller/inventory.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::Workload;
using model::WorkloadPhase;
using Kind = allocator::AdmissionStep::Kind;

bool Active(const Workload& w) { return w.status.phase == WorkloadPhase::kPending || w.status.phase == WorkloadPhase::kRunning; }

constexpr std::string_view kOpenRunsOf = "open";  // Profiles of workloads' runs not yet ended, by pool

// The Profile of a workload's run (a cluster pod's carries the cluster label; the podruns
// controller keeps those).
bool OfWorkload(const model::Profile& p) { return !p.metadata.labels.contains(std::string(kLabelCluster)); }

// Ends a workload's run: closes its Profile (written here) and sets the phase; `w` is then
// written by the caller, in the same transaction.
absl::Status EndRun(store::Txn& tx, Workload& w, WorkloadPhase phase, std::string reason, std::string message,
                    Time now) {
  if (!w.status.profile.empty()) {
    ASSIGN_OR_RETURN(std::optional<model::Profile> p, store::GetObject<model::Profile>(tx, w.metadata.ns, w.status.profile));
    if (p && !p->spec.end) {
      p->spec.end = now;
      RETURN_IF_ERROR(store::UpdateObject(tx, *p));
    }
  }
  w.status.phase = phase;
  w.status.reason = std::move(reason);
  w.status.message = std::move(message);
  w.status.devices.clear();
  w.status.profile.clear();
  w.status.start_time.reset();
  return absl::OkStatus();
}

}  // namespace

WorkloadController::WorkloadController(store::Store& store, runtime::Manager& manager)
    : store_(store),
      manager_(manager),
      workloads_(manager.informers().For<Workload>()),
      profiles_(manager.informers().For<model::Profile>()) {
  runtime::WorkQueue& q = manager.Add("workloads", *this);
  profiles_.AddIndex(std::string(kOpenRunsOf), [](const model::Profile& p) {
    return OfWorkload(p) && !p.spec.end ? std::vector<std::string>{runtime::ObjectKey(p.metadata.ns, p.spec.pool)}
                                        : std::vector<std::string>{};
  });
  workloads_.AddIndex("pool", [](const Workload& w) {
    return Active(w) ? std::vector<std::string>{runtime::ObjectKey(w.metadata.ns, w.spec.pool)} : std::vector<std::string>{};
  });
  workloads_.OnChange([&q](const Workload* before, const Workload* after) {
    const Workload& w = after ? *after : *before;
    q.Add(runtime::ObjectKey(w.metadata.ns, w.spec.pool));
  });
  manager.informers().For<model::GpuPool>().OnChange([this, &q](const model::GpuPool* before, const model::GpuPool* after) {
    const model::GpuPool& p = after ? *after : *before;
    const std::string key = runtime::ObjectKey(p.metadata.ns, p.metadata.name);
    if (!workloads_.ByIndex("pool", key).empty()) q.Add(key);
  });
}

WorkloadStats WorkloadController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

absl::StatusOr<runtime::Result> WorkloadController::Reconcile(const std::string& key) {
  if (workloads_.ByIndex("pool", key).empty() && profiles_.ByIndex(kOpenRunsOf, key).empty()) {
    return runtime::Result::Done();
  }
  // Named, not structured bindings: clang 14 (the fuzz preset) cannot capture those in lambdas.
  const std::pair<std::string, std::string> split = runtime::SplitKey(key);
  const std::string& ns = split.first;
  const std::string& pool_name = split.second;
  WorkloadStats delta;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    delta = WorkloadStats{};
    const Time now = manager_.clock().Now();
    ASSIGN_OR_RETURN(std::optional<model::GpuPool> pool, store::GetObject<model::GpuPool>(tx, ns, pool_name));
    ASSIGN_OR_RETURN(std::vector<Workload> in_ns, store::ListObjects<Workload>(tx, ns));
    std::vector<Workload*> mine;
    std::vector<const Workload*> view;
    for (Workload& w : in_ns) {
      if (w.spec.pool == pool_name && Active(w)) {
        mine.push_back(&w);
        view.push_back(&w);
      }
    }
    const allocator::AdmissionDecision d = allocator::Admit(pool ? &*pool : nullptr, view);
    std::vector<bool> dirty(mine.size(), false);
    for (const allocator::AdmissionStep& step : d.steps) {
      Workload& w = *mine[step.workload];
      dirty[step.workload] = true;
      switch (step.kind) {
        case Kind::kEnd:
          RETURN_IF_ERROR(EndRun(tx, w, step.phase, step.reason, step.message, now));
          if (step.phase == WorkloadPhase::kEvicted) ++delta.evicted;
          if (step.reason == "Preempted") ++delta.preempted;
          if (step.reason == "DeviceFailed") ++delta.requeued;
          break;
        case Kind::kStart: {
          model::Profile prof;
          prof.metadata.name = fmt::format("{}-{}", w.metadata.name, tx.revision());
          prof.metadata.ns = ns;
          prof.spec = {w.metadata.name, pool_name, ns, step.devices, now, std::nullopt};
          RETURN_IF_ERROR(store::CreateObject(tx, prof, now));
          w.status.phase = WorkloadPhase::kRunning;
          w.status.reason = step.reason;
          w.status.message = step.message;
          w.status.devices = step.devices;
          w.status.start_time = now;
          w.status.profile = prof.metadata.name;
          ++delta.admitted;
          break;
        }
        case Kind::kWait:
          w.status.reason = step.reason;
          w.status.message = step.message;
          if (step.reason == "Queued") ++delta.queued;
          break;
      }
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      if (dirty[i]) RETURN_IF_ERROR(store::UpdateObject(tx, *mine[i]));
    }
    // Runs whose workload was deleted (the API removes it): their Profiles end now.
    std::set<std::string> running;
    for (const Workload& w : in_ns) {
      if (!w.status.profile.empty()) running.insert(w.status.profile);
    }
    for (const auto& open : profiles_.ByIndex(kOpenRunsOf, key)) {
      if (running.contains(open->metadata.name)) continue;
      ASSIGN_OR_RETURN(std::optional<model::Profile> p, store::GetObject<model::Profile>(tx, ns, open->metadata.name));
      if (!p || p->spec.end) continue;
      p->spec.end = now;
      RETURN_IF_ERROR(store::UpdateObject(tx, *p));
    }
    return absl::OkStatus();
  }));
  std::lock_guard<std::mutex> lock(mu_);
  stats_.admitted += delta.admitted;
  stats_.preempted += delta.preempted;
  stats_.evicted += delta.evicted;
  stats_.queued += delta.queued;
  stats_.requeued += delta.requeued;
  return runtime::Result::Done();
}

}  // namespace gpuaas::controller
