#include "controller/pools.h"

#include <algorithm>
#include <set>

#include "allocator/snapshot.h"
#include "controller/lending.h"
#include "controller/pool_meter.h"
#include "catalog/catalog.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::ConditionStatus;
using model::GpuPool;
using model::MigLayout;
using GpuPtr = std::shared_ptr<const model::GpuCapacity>;

constexpr std::string_view kWaiting = "waiting";
constexpr std::string_view kDefragPrefix = "defragmentation:";
// The fallback retry of a pool waiting for capacity (capacity changes queue it at once).
const runtime::BackoffPolicy kWaitBackoff{std::chrono::seconds(5), std::chrono::minutes(5)};
// How often a pool whose devices wait for their MIG layout looks at its GPUs without being told.
constexpr Duration kProvisionPoll = std::chrono::seconds(2);

bool IsTrue(const GpuPool& p, std::string_view type) {
  const model::Condition* c = model::FindCondition(p.status.conditions, type);
  return c != nullptr && c->status == ConditionStatus::kTrue;
}

bool Approved(const GpuPool& p) { return p.status.approval && p.status.approval->approved; }

// Approved, live, not being released and still short of devices: such a pool waits for
// capacity. (A release asked of a waiting pool is work to do at once, never a wait.)
bool AwaitsCapacity(const GpuPool& p) {
  return Approved(p) && model::PoolIsLive(p) && !model::PoolReleaseRequested(p) && !IsTrue(p, model::kAllocated);
}

// The GPU of a device, from the informer (GpuCapacity objects are named by the lower-case UUID).
GpuPtr GpuOf(const runtime::Informer<model::GpuCapacity>& gpus, const std::string& uuid) {
  return gpus.Get("", ToLower(uuid));
}

// Where an allocated device stands in the inventory: present when its GPU exists with MIG off
// (a whole GPU) or holds an instance of its profile at its start (then `instance` points to it).
struct Located {
  bool present = false;
  const model::MigInstance* instance = nullptr;
};

Located Locate(const model::AllocatedDevice& d, const model::GpuCapacity* gpu) {
  if (gpu == nullptr) return {};
  const bool mig = gpu->status.mig_mode == model::MigMode::kEnabled;
  if (d.profile == catalog::kFullProfile) return {!mig, nullptr};
  if (!mig) return {};
  for (const model::MigInstance& m : gpu->status.mig_instances) {
    if (m.profile == d.profile && m.start == d.start) return {true, &m};
  }
  return {};
}

bool OnFailedGpu(const model::GpuCapacity* g) {
  return g != nullptr && (g->status.health == model::Health::kUnhealthy || !model::DriverReportedHealthy(*g));
}

std::string WhyFailed(const model::GpuCapacity& g) {
  for (std::string_view type : {model::kGpuHealthy, model::kGpuDriverHealthy}) {
    const model::Condition* c = model::FindCondition(g.status.conditions, type);
    if (c != nullptr && c->status == ConditionStatus::kFalse && !c->message.empty()) return c->message;
  }
  return "unhealthy";
}

// Why a failed GPU is out of service (its Healthy condition's reason) and since when.
std::pair<std::string, Time> FaultOf(const model::GpuCapacity& g, Time now) {
  for (std::string_view type : {model::kGpuHealthy, model::kGpuDriverHealthy}) {
    const model::Condition* c = model::FindCondition(g.status.conditions, type);
    if (c != nullptr && c->status == ConditionStatus::kFalse) {
      return {c->reason.empty() ? "Unhealthy" : c->reason, std::min(c->last_transition_time, now)};
    }
  }
  return {"Unhealthy", now};
}

// A change to a GPU that can make room for a waiting pool.
bool MayFreeCapacity(const model::GpuCapacity* before, const model::GpuCapacity* after) {
  if (after == nullptr) return false;
  if (before == nullptr) return true;
  return OnFailedGpu(before) != OnFailedGpu(after) || before->status.mig_mode != after->status.mig_mode ||
         before->status.mig_instances != after->status.mig_instances ||
         before->status.allocated != after->status.allocated;
}

}  // namespace

std::string DefragKey(std::string_view name) { return std::string(kDefragPrefix) + std::string(name); }

PoolController::PoolController(store::Store& store, runtime::Manager& manager)
    : store_(store),
      manager_(manager),
      pools_(manager.informers().For<GpuPool>()),
      gpus_(manager.informers().For<model::GpuCapacity>()),
      nodes_(manager.informers().For<model::NodeCapacity>()),
      layouts_(manager.informers().For<MigLayout>()),
      meters_(manager.informers().For<model::UsageRecord>()),
      allocation_{pools_, gpus_, nodes_, layouts_},
      profile_(allocator::ProfileByName("default")) {
  queue_ = &manager.Add("pools", *this, 1, runtime::BackoffPolicy{std::chrono::milliseconds(50), std::chrono::minutes(5)});
  AddAllocationIndexes(allocation_);
  pools_.AddIndex(std::string(kWaiting), [](const GpuPool& p) {
    return AwaitsCapacity(p) ? std::vector<std::string>{"yes"} : std::vector<std::string>{};
  });
  pools_.OnChange([this](const GpuPool* before, const GpuPool* after) {
    const GpuPool& p = after ? *after : *before;
    queue_->Add(allocator::PoolKey(p));
    // Devices went back to the fleet: pools waiting for capacity may fit now.
    const size_t had = before && model::PoolIsLive(*before) ? before->status.allocation.size() : 0;
    const size_t has = after && model::PoolIsLive(*after) ? after->status.allocation.size() : 0;
    if (has < had) QueueWaiting();
  });
  // A meter named like a pool that is gone (or is another pool now) is to be retired.
  meters_.OnChange([this](const model::UsageRecord*, const model::UsageRecord* after) {
    if (after == nullptr || after->metadata.name != after->spec.pool) return;
    const std::shared_ptr<const GpuPool> p = pools_.Get(after->metadata.ns, after->metadata.name);
    if (p == nullptr || p->metadata.uid != after->spec.pool_uid) {
      queue_->Add(runtime::ObjectKey(after->metadata.ns, after->metadata.name));
    }
  });
  gpus_.OnChange([this](const model::GpuCapacity* before, const model::GpuCapacity* after) {
    const model::GpuCapacity& g = after ? *after : *before;
    for (const auto& p : pools_.ByIndex(kPoolsByGpu, g.spec.uuid)) queue_->Add(allocator::PoolKey(*p));
    if (MayFreeCapacity(before, after)) QueueWaiting();
  });
  nodes_.OnChange([this](const model::NodeCapacity* before, const model::NodeCapacity* after) {
    if (after != nullptr && (before == nullptr || before->spec.schedulable != after->spec.schedulable)) QueueWaiting();
  });
  // A run that ended may be what a releasing pool waits for.
  manager.informers().For<model::Workload>().OnChange([this](const model::Workload* before, const model::Workload* after) {
    const bool was = before != nullptr && before->status.phase == model::WorkloadPhase::kRunning;
    const bool is = after != nullptr && after->status.phase == model::WorkloadPhase::kRunning;
    if (was && !is) {
      // A borrower's run is on the pool it borrowed from.
      queue_->Add(before->status.borrowed_from
                      ? runtime::ObjectKey(before->status.borrowed_from->project, before->status.borrowed_from->pool)
                      : runtime::ObjectKey(before->metadata.ns, before->spec.pool));
    }
  });
  layouts_.OnChange([this](const MigLayout* before, const MigLayout* after) {
    const MigLayout& l = after ? *after : *before;
    for (const auto& p : pools_.ByIndex(kPoolsByGpu, l.spec.gpu_uuid)) queue_->Add(allocator::PoolKey(*p));
  });
  // An operator's request to defragment, until it is made or failed.
  // An operator's request to defragment: its moves, then, once made or failed, when it is due to go
  // (Defragment answers After until then).
  manager.informers().For<model::Defragmentation>().OnChange(
      [this](const model::Defragmentation*, const model::Defragmentation* after) {
        if (after != nullptr) queue_->Add(DefragKey(after->metadata.name));
      });
}

void PoolController::QueueWaiting() {
  ++capacity_epoch_;
  for (const auto& p : pools_.ByIndex(kWaiting, "yes")) queue_->Add(allocator::PoolKey(*p));
}

PoolStats PoolController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}


// One reconcile of one pool, inside its transaction: what the steps read and what they change.
struct PoolController::Cycle {
  Cycle(store::Txn& t, Time n, int64_t s) : tx(t), now(n), seen(s) {}

  store::Txn& tx;
  const Time now;
  const int64_t seen;  // the store revision the informers showed when the reconcile began
  GpuPool pool;
  PoolMeter meter;
  bool changed = false;  // the pool is to be written
  bool waiting = false;  // it waits for capacity
  bool provisioning = false;
  std::optional<Time> wake;  // a reservation's start or end to come
  PoolStats delta;

  // Sets one of the pool's conditions; returns whether it changed.
  bool Set(std::string_view type, bool ok, std::string reason, std::string message) {
    const bool c = model::SetCondition(pool.status.conditions,
                                       {std::string(type), ok ? ConditionStatus::kTrue : ConditionStatus::kFalse,
                                        std::move(reason), std::move(message), now, pool.metadata.generation});
    changed |= c;
    return c;
  }
};

bool PoolController::Settled(const std::string& key, const GpuPool* pool) const {
  const std::shared_ptr<const model::UsageRecord> meter = meters_.Get(key);
  if (pool == nullptr) return meter == nullptr;  // else: the meter of a deleted pool, to retire
  if (meter != nullptr && meter->spec.pool_uid != pool->metadata.uid) return false;
  if (pool->metadata.deletion_timestamp) return false;  // to remove once released
  if (!Approved(*pool)) return true;
  if (meter == nullptr) return false;                                // to open
  if (!model::PoolIsLive(*pool)) return meter->spec.end.has_value();  // released: ended?
  return false;
}

absl::StatusOr<runtime::Result> PoolController::Reconcile(const std::string& key) {
  if (key.starts_with(kDefragPrefix)) return Defragment(key.substr(kDefragPrefix.size()));
  std::shared_ptr<const GpuPool> listed = pools_.Get(key);
  if (Settled(key, listed.get())) {
    if (listed == nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      waits_.erase(key);  // a pool deleted while it waited
    }
    return runtime::Result::Done();
  }
  const uint64_t epoch = capacity_epoch_.load();
  if (listed != nullptr) {
    // Nothing freed since this pool last failed to fit, and the pool is the same: the timer's
    // retry has nothing new to try.
    std::lock_guard<std::mutex> lock(mu_);
    auto w = waits_.find(key);
    if (w != waits_.end() && AwaitsCapacity(*listed) && w->second.epoch == epoch &&
        w->second.generation == listed->metadata.generation) {
      return runtime::Result::After(kWaitBackoff.After(w->second.attempts));
    }
  }
  const auto [ns, name] = runtime::SplitKey(key);
  // Everything the pools informer shows up to this revision is in the owners an allocation
  // sees; pools that changed after it are read again inside the transaction.
  const int64_t seen = pools_.SyncedRevision();
  PoolStats delta;
  bool waiting = false;
  bool provisioning = false;
  bool wrote = false;
  std::optional<Time> wake;
  absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
    wake.reset();
    ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, ns, name));
    Cycle c(tx, manager_.clock().Now(), seen);
    ASSIGN_OR_RETURN(wrote, RetireStaleMeter(tx, ns, name, cur ? &*cur : nullptr, c.now));
    if (!cur || !Approved(*cur)) return absl::OkStatus();
    c.pool = std::move(*cur);
    RETURN_IF_ERROR(c.meter.Load(tx, c.pool, gpus_));
    if (model::PoolEnded(c.pool, c.now)) {
      RETURN_IF_ERROR(Release(c));
    } else {
      RETURN_IF_ERROR(ReplaceFailed(c));
      RETURN_IF_ERROR(Allocate(c));
      if (!c.waiting) Provision(c);
      if (c.pool.spec.end_time) c.wake = *c.pool.spec.end_time;  // released then
    }
    ASSIGN_OR_RETURN(const bool metered, c.meter.Save(tx, c.now));
    if (c.pool.metadata.deletion_timestamp && !model::PoolIsLive(c.pool)) {
      // Deleted while in force, and now released: the finalizer's work is done. Its meter is
      // retired on the next pass, as a deleted pool's is.
      RETURN_IF_ERROR(store::DeleteObject<GpuPool>(tx, ns, name));
      c.changed = false;
      wrote = true;
    }
    if (c.changed) RETURN_IF_ERROR(store::UpdateObject(tx, c.pool));
    wrote = wrote || metered || c.changed;
    delta = c.delta;
    waiting = c.waiting;
    provisioning = c.provisioning;
    wake = c.wake;
    return absl::OkStatus();
  });
  if (!s.ok()) {
    if (absl::IsAborted(s)) manager_.AwaitRevision(store_.Revision());  // retry on what is there now
    return s;
  }
  if (wrote) manager_.AwaitRevision(store_.Revision());  // read our own allocation before the next pool
  int waits = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated += delta.allocated;
    stats_.ready += delta.ready;
    stats_.released += delta.released;
    stats_.unschedulable += delta.unschedulable;
    stats_.replaced += delta.replaced;
    if (waiting) {
      Waiting& w = waits_[key];
      waits = ++w.attempts;
      w.epoch = epoch;
      w.generation = listed != nullptr ? listed->metadata.generation : 0;
    } else {
      waits_.erase(key);
    }
  }
  // Devices that wait for their MIG layout arrive with a GPU change; looking again now and then
  // as well keeps a pool from hanging on a change it was not told of.
  const Time now = manager_.clock().Now();
  auto until_wake = [&](Duration d) {
    return wake ? std::min(d, std::max<Duration>(*wake - now, std::chrono::milliseconds(1))) : d;
  };
  if (provisioning) return runtime::Result::After(until_wake(kProvisionPoll));
  if (!waiting) return wake ? runtime::Result::After(until_wake(Duration::max())) : runtime::Result::Done();
  // Capacity changes queue the pool at once; this is only the fallback.
  return runtime::Result::After(until_wake(kWaitBackoff.After(waits)));
}

absl::Status PoolController::Release(Cycle& c) {
  GpuPool& pool = c.pool;
  // Billing ends with the request: the project gave the devices up (its runs are evicted).
  RETURN_IF_ERROR(c.meter.End(c.tx, pool, c.now));
  if (!model::PoolIsLive(pool)) return absl::OkStatus();  // released already
  // The devices stay while a run is open on them: another pool could be given a device still
  // in use. The workload controller ends them; their change queues the pool again.
  ASSIGN_OR_RETURN(std::vector<model::Workload> in_ns, store::ListObjects<model::Workload>(c.tx, pool.metadata.ns));
  auto running = std::count_if(in_ns.begin(), in_ns.end(), [&](const model::Workload& w) {
    return w.spec.pool == pool.metadata.name && w.status.phase == model::WorkloadPhase::kRunning;
  });
  // Other projects' runs on its lent devices too (the workload controller ends them at once).
  const runtime::Informer<model::Workload>& workloads = manager_.informers().For<model::Workload>();
  ASSIGN_OR_RETURN(const std::vector<model::Workload> lent,
                   BorrowersOn(c.tx, workloads, workloads.SyncedRevision(), pool.metadata.ns, pool.metadata.name));
  running += static_cast<decltype(running)>(lent.size());
  if (running > 0) {
    c.Set(model::kReleased, false, "EndingRuns", fmt::format("waiting for {} running workload(s) to be evicted", running));
    return absl::OkStatus();
  }
  // Free the devices; instances created for the pool stay, free for the next pool.
  const bool held = !pool.status.allocation.empty();
  pool.status.allocation.clear();
  c.changed = true;
  c.Set(model::kAllocated, false, "Released", held ? "devices returned to the fleet" : "it held no devices");
  if (model::FindCondition(pool.status.conditions, model::kProvisioned) != nullptr) {
    c.Set(model::kProvisioned, false, "Released", "the pool holds no devices any more");
  }
  c.Set(model::kReady, false, "Released", "the pool was released");
  c.Set(model::kReleased, true, "Released", "all devices freed");
  ++c.delta.released;
  return absl::OkStatus();
}

absl::Status PoolController::ReplaceFailed(Cycle& c) {
  GpuPool& pool = c.pool;
  // What is missing afterwards is allocated again from free capacity (the allocator filters the
  // failed GPUs themselves out).
  std::vector<std::string> lost;
  std::vector<model::UsageRecord::Credit> credits;
  std::erase_if(pool.status.allocation, [&](const model::AllocatedDevice& d) {
    const GpuPtr g = GpuOf(gpus_, d.gpu_uuid);
    if (!OnFailedGpu(g.get())) return false;
    lost.push_back(fmt::format("{} on GPU {} ({})", d.profile, d.gpu_uuid, WhyFailed(*g)));
    const auto [reason, since] = FaultOf(*g, c.now);
    credits.push_back({d.gpu_uuid, g->spec.model, d.profile, reason, since, std::nullopt});
    return true;
  });
  if (lost.empty()) return absl::OkStatus();
  // The device's time is credited from the fault until it is replaced.
  RETURN_IF_ERROR(c.meter.Credit(c.tx, pool.metadata.ns, std::move(credits), c.now));
  ++c.delta.replaced;
  c.changed = true;
  c.Set(model::kDevicesHealthy, false, "DeviceFailed",
        fmt::format("{} device(s) left the pool: {}", lost.size(), fmt::join(lost, "; ")));
  c.Set(model::kAllocated, false, "ReplacingFailedDevices",
        fmt::format("replacing {} device(s) from free capacity", lost.size()));
  return absl::OkStatus();
}

absl::Status PoolController::Allocate(Cycle& c) {
  GpuPool& pool = c.pool;
  // What the pool lacks: its items minus what its allocation holds.
  std::vector<model::PoolItem> deficit;
  for (const model::PoolItem& i : pool.spec.items) {
    const auto have = static_cast<int64_t>(HeldOf(i, pool.status.allocation, gpus_).size());
    if (have < i.count) deficit.push_back({i.model, i.profile, i.count - have});
  }
  if (IsTrue(pool, model::kAllocated)) return absl::OkStatus();
  if (deficit.empty()) {
    c.Set(model::kAllocated, true, "Allocated", "every device is allocated");
    return absl::OkStatus();
  }
  const model::Condition* dh = model::FindCondition(pool.status.conditions, model::kDevicesHealthy);
  const bool replacing = dh != nullptr && dh->status == ConditionStatus::kFalse;
  ASSIGN_OR_RETURN(allocator::Outcome out, AllocateDeficit(c.tx, pool, deficit, allocation_, c.seen, *profile_, c.now));
  if (out.code != allocator::Code::kSuccess) {
    ++c.delta.unschedulable;
    c.waiting = true;
    c.Set(model::kAllocated, false, out.code == allocator::Code::kUnschedulable ? "Unschedulable" : "Unresolvable",
          replacing ? fmt::format("no replacement for {} device(s) yet: {}", deficit.size(), out.reason) : out.reason);
    c.Set(model::kReady, false, "NotAllocated", "waiting for devices");
    return absl::OkStatus();
  }
  std::set<std::string> used_gpus;
  for (const allocator::Placement& p : out.plan.placements) {
    pool.status.allocation.push_back({p.cluster, p.node, p.gpu_uuid, p.profile, p.start, p.instance_uuid});
    used_gpus.insert(p.gpu_uuid);
  }
  c.changed = true;
  ++c.delta.allocated;
  c.meter.AddPlaced(pool, out.plan.placements, gpus_, c.now);
  if (replacing) {
    c.meter.EndCredits(c.now);
    c.Set(model::kDevicesHealthy, true, "Replaced",
          fmt::format("{} device(s) replaced from free capacity", out.plan.placements.size()));
  }
  c.Set(model::kAllocated, true, replacing ? "Reallocated" : "Allocated",
        fmt::format("{} device(s) on {} GPU(s), {} to reconfigure", out.plan.placements.size(), used_gpus.size(),
                    out.plan.ReconfiguredGpus()));
  return absl::OkStatus();
}

void PoolController::Provision(Cycle& c) {
  GpuPool& pool = c.pool;
  // Every device exists in the inventory as allocated.
  int missing = 0;
  std::string failed;
  for (model::AllocatedDevice& d : pool.status.allocation) {
    const GpuPtr g = GpuOf(gpus_, d.gpu_uuid);
    const Located at = Locate(d, g.get());
    if (!at.present) {
      ++missing;
      if (std::shared_ptr<const MigLayout> l = layouts_.Get("", ToLower(d.gpu_uuid));
          failed.empty() && l && l->status.state == MigLayout::State::kFailed &&
          l->status.observed_generation == l->metadata.generation) {
        failed = fmt::format("GPU {}: {} (attempt {}, retrying with backoff)", d.gpu_uuid, l->status.message,
                             l->status.attempts);
      }
    } else if (at.instance != nullptr && d.instance_uuid != at.instance->uuid) {
      d.instance_uuid = at.instance->uuid;
      c.changed = true;
    }
  }
  if (missing == 0) {
    c.Set(model::kProvisioned, true, "Provisioned", "every device is in place");
    if (model::PoolBeforeStart(pool, c.now)) {
      // A reservation: its devices are held and lent until its start (docs/lending.md).
      c.Set(model::kReady, false, "Reserved",
            fmt::format("reserved from {}{}; its devices are lent to preemptible work until then",
                        FormatTime(*pool.spec.start_time),
                        pool.spec.end_time ? " until " + FormatTime(*pool.spec.end_time) : std::string()));
      c.wake = *pool.spec.start_time;
      return;
    }
    if (c.Set(model::kReady, true, "Ready", "the pool's devices are dedicated and in place")) ++c.delta.ready;
    return;
  }
  c.provisioning = true;
  if (failed.empty()) {
    c.Set(model::kProvisioned, false, "WaitingForMigLayout",
          fmt::format("{} of {} device(s) wait for their GPU's MIG layout", missing, pool.status.allocation.size()));
  } else {
    c.Set(model::kProvisioned, false, "MigLayoutFailed", failed);
  }
  c.Set(model::kReady, false, "Provisioning", "devices are being prepared");
}

}  // namespace gpuaas::controller
