#include "controller/pools.h"

#include <algorithm>
#include <set>

#include "allocator/snapshot.h"
#include "billing/billing.h"
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
constexpr std::string_view kByModel = "model";
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

// Whether a device of `profile` on GPU `gpu_uuid` is one of `item` (a device whose GPU left the
// inventory counts for the item of its profile).
bool OfItem(const model::PoolItem& item, std::string_view profile, const std::string& gpu_uuid,
            const runtime::Informer<model::GpuCapacity>& gpus) {
  if (profile != item.profile) return false;
  const GpuPtr g = GpuOf(gpus, gpu_uuid);
  return g == nullptr || g->spec.model == item.model;
}

// The devices of `item` the allocation holds, as its meter names them (model::HeldDeviceKey).
std::vector<std::string> HeldOf(const model::PoolItem& item, const std::vector<model::AllocatedDevice>& allocation,
                                const runtime::Informer<model::GpuCapacity>& gpus) {
  std::vector<std::string> out;
  for (const model::AllocatedDevice& d : allocation) {
    if (OfItem(item, d.profile, d.gpu_uuid, gpus)) out.push_back(model::HeldDeviceKey(d));
  }
  return out;
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

PoolController::PoolController(store::Store& store, runtime::Manager& manager)
    : store_(store),
      manager_(manager),
      pools_(manager.informers().For<GpuPool>()),
      gpus_(manager.informers().For<model::GpuCapacity>()),
      nodes_(manager.informers().For<model::NodeCapacity>()),
      layouts_(manager.informers().For<MigLayout>()),
      profile_(allocator::ProfileByName("default")) {
  queue_ = &manager.Add("pools", *this, 1, runtime::BackoffPolicy{std::chrono::milliseconds(50), std::chrono::minutes(5)});
  pools_.AddIndex("gpu", [](const GpuPool& p) {
    std::vector<std::string> out;
    for (const model::AllocatedDevice& d : p.status.allocation) out.push_back(d.gpu_uuid);
    return out;
  });
  pools_.AddIndex(std::string(kWaiting), [](const GpuPool& p) {
    return AwaitsCapacity(p) ? std::vector<std::string>{"yes"} : std::vector<std::string>{};
  });
  // Candidates of an allocation: the GPUs of the models it asks for, in its cluster if it names one.
  gpus_.AddIndex(std::string(kByModel), [](const model::GpuCapacity& g) {
    return std::vector<std::string>{g.spec.model, g.spec.cluster + "/" + g.spec.model};
  });
  pools_.OnChange([this](const GpuPool* before, const GpuPool* after) {
    const GpuPool& p = after ? *after : *before;
    queue_->Add(allocator::PoolKey(p));
    // Devices went back to the fleet: pools waiting for capacity may fit now.
    const size_t had = before && model::PoolIsLive(*before) ? before->status.allocation.size() : 0;
    const size_t has = after && model::PoolIsLive(*after) ? after->status.allocation.size() : 0;
    if (has < had) QueueWaiting();
  });
  gpus_.OnChange([this](const model::GpuCapacity* before, const model::GpuCapacity* after) {
    const model::GpuCapacity& g = after ? *after : *before;
    for (const auto& p : pools_.ByIndex("gpu", g.spec.uuid)) queue_->Add(allocator::PoolKey(*p));
    if (MayFreeCapacity(before, after)) QueueWaiting();
  });
  nodes_.OnChange([this](const model::NodeCapacity* before, const model::NodeCapacity* after) {
    if (after != nullptr && (before == nullptr || before->spec.schedulable != after->spec.schedulable)) QueueWaiting();
  });
  // A run that ended may be what a releasing pool waits for.
  manager.informers().For<model::Workload>().OnChange([this](const model::Workload* before, const model::Workload* after) {
    const bool was = before != nullptr && before->status.phase == model::WorkloadPhase::kRunning;
    const bool is = after != nullptr && after->status.phase == model::WorkloadPhase::kRunning;
    if (was && !is) queue_->Add(runtime::ObjectKey(before->metadata.ns, before->spec.pool));
  });
  layouts_.OnChange([this](const MigLayout* before, const MigLayout* after) {
    const MigLayout& l = after ? *after : *before;
    for (const auto& p : pools_.ByIndex("gpu", l.spec.gpu_uuid)) queue_->Add(allocator::PoolKey(*p));
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

absl::StatusOr<runtime::Result> PoolController::Reconcile(const std::string& key) {
  std::shared_ptr<const GpuPool> listed = pools_.Get(key);
  if (!listed || !Approved(*listed)) return runtime::Result::Done();
  const model::Condition* released = model::FindCondition(listed->status.conditions, model::kReleased);
  if (released != nullptr && released->status == ConditionStatus::kTrue) return runtime::Result::Done();
  return Step(*listed);
}

absl::StatusOr<runtime::Result> PoolController::Step(const GpuPool& listed) {
  const std::string key = allocator::PoolKey(listed);
  const uint64_t epoch = capacity_epoch_.load();
  {
    // Nothing freed since this pool last failed to fit, and the pool is the same: the timer's
    // retry has nothing new to try.
    std::lock_guard<std::mutex> lock(mu_);
    auto w = waits_.find(key);
    if (w != waits_.end() && AwaitsCapacity(listed) && w->second.epoch == epoch &&
        w->second.generation == listed.metadata.generation) {
      return runtime::Result::After(kWaitBackoff.After(w->second.attempts));
    }
  }
  PoolStats delta;
  bool waiting = false;
  bool provisioning = false;
  // Everything the pools informer shows up to this revision is in the owners below; pools that
  // changed after it are read again inside the transaction.
  const int64_t seen = pools_.SyncedRevision();
  bool wrote = false;
  absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
    delta = PoolStats{};
    waiting = false;
    provisioning = false;
    wrote = false;
    ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, listed.metadata.ns, listed.metadata.name));
    if (!cur) return absl::OkStatus();
    GpuPool& pool = *cur;
    const Time now = manager_.clock().Now();
    const int64_t gen = pool.metadata.generation;
    auto set = [&](std::string_view type, bool ok, std::string reason, std::string message) {
      return model::SetCondition(pool.status.conditions,
                                 {std::string(type), ok ? ConditionStatus::kTrue : ConditionStatus::kFalse,
                                  std::move(reason), std::move(message), now, gen});
    };
    // The pool's open meter, read once and written with the pool's change: the devices it
    // bills (from their allocation), fault credits, the cluster.
    std::optional<model::UsageRecord> meter;
    bool meter_changed = false;
    if (!model::PoolReleaseRequested(pool)) {
      ASSIGN_OR_RETURN(meter, store::GetObject<model::UsageRecord>(tx, pool.metadata.ns, pool.metadata.name));
      if (meter && (meter->spec.end || meter->spec.pool_uid != pool.metadata.uid)) meter.reset();
    }
    if (meter && !meter->spec.held) {
      // A meter from before devices were billed from their allocation: what the pool holds now
      // stays billed from the approval, as it was; what it lacks is billed once it comes.
      meter->spec.held.emplace();
      for (const model::PoolItem& i : pool.spec.items) {
        std::vector<std::string> devices = HeldOf(i, pool.status.allocation, gpus_);
        const auto n = static_cast<int64_t>(devices.size());
        if (n > 0) meter->spec.held->push_back({i.model, i.profile, n, meter->spec.start, std::move(devices)});
      }
      meter_changed = true;
    }
    auto commit = [&](bool changed) -> absl::Status {
      if (meter && meter_changed) {
        wrote = true;
        RETURN_IF_ERROR(store::UpdateObject(tx, *meter));
      }
      if (!changed) return absl::OkStatus();
      wrote = true;
      return store::UpdateObject(tx, pool);
    };
    bool changed = false;

    // 1. Release: free the devices; instances created for the pool stay, free for the next pool.
    const model::Condition* rel = model::FindCondition(pool.status.conditions, model::kReleased);
    if (rel != nullptr) {
      if (rel->status == ConditionStatus::kTrue) return absl::OkStatus();
      // Not while a run is open on the pool's devices: another pool could be given a device
      // still in use. The workload controller ends them; their change queues the pool again.
      ASSIGN_OR_RETURN(std::vector<model::Workload> in_ns, store::ListObjects<model::Workload>(tx, pool.metadata.ns));
      const auto running = std::count_if(in_ns.begin(), in_ns.end(), [&](const model::Workload& w) {
        return w.spec.pool == pool.metadata.name && w.status.phase == model::WorkloadPhase::kRunning;
      });
      if (running > 0) {
        changed |= set(model::kReleased, false, "EndingRuns",
                       fmt::format("waiting for {} running workload(s) to be evicted", running));
        return commit(changed);
      }
      const bool held = !pool.status.allocation.empty();
      pool.status.allocation.clear();
      changed |= set(model::kAllocated, false, "Released", held ? "devices returned to the fleet" : "it held no devices");
      if (model::FindCondition(pool.status.conditions, model::kProvisioned) != nullptr) {
        changed |= set(model::kProvisioned, false, "Released", "the pool holds no devices any more");
      }
      changed |= set(model::kReady, false, "Released", "the pool was released");
      changed |= set(model::kReleased, true, "Released", "all devices freed");
      ++delta.released;
      return commit(changed);
    }

    // 2. Replace: devices on failed GPUs leave the pool; what is missing is allocated again from
    // free capacity below (the failed GPUs themselves are filtered out by the allocator).
    std::vector<std::string> lost;
    std::vector<model::UsageRecord::Credit> credits;
    std::erase_if(pool.status.allocation, [&](const model::AllocatedDevice& d) {
      const GpuPtr g = GpuOf(gpus_, d.gpu_uuid);
      if (!OnFailedGpu(g.get())) return false;
      lost.push_back(fmt::format("{} on GPU {} ({})", d.profile, d.gpu_uuid, WhyFailed(*g)));
      const auto [reason, since] = FaultOf(*g, now);
      credits.push_back({d.gpu_uuid, g->spec.model, d.profile, reason, since, std::nullopt});
      return true;
    });
    // Billing: the device's time is credited from the fault until it is replaced (the meter is
    // written in this transaction, with the pool's change).
    for (model::UsageRecord::Credit& c : credits) {
      // Never into a month whose invoice is kept (final): from the start of the next one.
      for (billing::Period m = billing::MonthOf(c.start); m.end <= now; m = billing::MonthOf(m.end)) {
        ASSIGN_OR_RETURN(std::optional<store::Record> kept,
                         tx.Get({std::string(model::kInvoiceKind), pool.metadata.ns, m.Name()}));
        if (!kept) break;
        c.start = m.end;
      }
    }
    if (!credits.empty() && meter) {
      for (model::UsageRecord::Credit& c : credits) {
        c.start = std::max(c.start, meter->spec.start);
        meter->spec.credits.push_back(std::move(c));
      }
      meter_changed = true;
    }
    if (!lost.empty()) {
      ++delta.replaced;
      changed |= set(model::kDevicesHealthy, false, "DeviceFailed",
                     fmt::format("{} device(s) left the pool: {}", lost.size(), fmt::join(lost, "; ")));
      changed |= set(model::kAllocated, false, "ReplacingFailedDevices",
                     fmt::format("replacing {} device(s) from free capacity", lost.size()));
    }

    // 3. Allocate what the pool lacks: its items minus what its allocation holds.
    std::vector<model::PoolItem> deficit;
    for (const model::PoolItem& i : pool.spec.items) {
      const auto have = static_cast<int64_t>(HeldOf(i, pool.status.allocation, gpus_).size());
      if (have < i.count) deficit.push_back({i.model, i.profile, i.count - have});
    }
    if (!IsTrue(pool, model::kAllocated) && deficit.empty()) {
      changed |= set(model::kAllocated, true, "Allocated", "every device is allocated");
    }
    if (!IsTrue(pool, model::kAllocated) && !deficit.empty()) {
      const model::Condition* dh = model::FindCondition(pool.status.conditions, model::kDevicesHealthy);
      const bool replacing = dh != nullptr && dh->status == ConditionStatus::kFalse;
      // Owners as of `seen`, then the pools written since, read here (this pool among them).
      std::vector<std::shared_ptr<const GpuPool>> live = pools_.List();
      std::map<std::string, std::shared_ptr<const GpuPool>> by_key;
      for (auto& p : live) by_key[allocator::PoolKey(*p)] = p;
      by_key.erase(key);
      ASSIGN_OR_RETURN(std::vector<store::Key> moved, tx.ChangedKeys(GpuPool::kKind, seen));
      for (const store::Key& k : moved) {
        ASSIGN_OR_RETURN(std::optional<GpuPool> fresh, store::GetObject<GpuPool>(tx, k.ns, k.name));
        const std::string pk = k.ns + "/" + k.name;
        if (!fresh) {
          by_key.erase(pk);
        } else if (pk != key) {
          by_key[pk] = std::make_shared<const GpuPool>(std::move(*fresh));
        }
      }
      std::vector<const GpuPool*> others;
      for (const auto& [k, p] : by_key) others.push_back(p.get());
      const std::map<std::string, std::string> owners = allocator::DeviceOwners(others);

      // Only the GPUs of the models asked for (and their nodes) can hold the deficit.
      std::vector<GpuPtr> gpu_objs;
      std::set<std::string> models;
      for (const model::PoolItem& i : deficit) models.insert(i.model);
      for (const std::string& m : models) {
        std::vector<GpuPtr> of = gpus_.ByIndex(kByModel, pool.spec.cluster.empty() ? m : pool.spec.cluster + "/" + m);
        gpu_objs.insert(gpu_objs.end(), std::make_move_iterator(of.begin()), std::make_move_iterator(of.end()));
      }
      std::vector<std::shared_ptr<const model::NodeCapacity>> node_objs;
      std::set<std::string_view> node_names;
      std::vector<const model::GpuCapacity*> gpus;
      gpus.reserve(gpu_objs.size());
      for (const GpuPtr& g : gpu_objs) {
        gpus.push_back(g.get());
        if (node_names.insert(g->spec.node).second) {
          if (auto n = nodes_.Get("", g->spec.node)) node_objs.push_back(std::move(n));
        }
      }
      std::vector<std::shared_ptr<const MigLayout>> layout_objs = layouts_.List();
      std::vector<const model::NodeCapacity*> nodes;
      for (const auto& n : node_objs) nodes.push_back(n.get());
      std::vector<const MigLayout*> layouts;
      for (const auto& l : layout_objs) layouts.push_back(l.get());
      // The pool's own devices count as its own, so that a replacement does not take them twice.
      std::map<std::string, std::string> with_self = owners;
      for (const model::AllocatedDevice& d : pool.status.allocation) {
        with_self[allocator::DeviceKey(d.gpu_uuid, d.profile, d.start)] = key;
      }
      allocator::FleetSnapshot fleet = allocator::BuildPoolSnapshot(gpus, nodes, layouts, with_self);

      allocator::Request req{key, pool.spec.cluster, {}};
      for (const model::PoolItem& i : deficit) req.items.push_back({i.model, i.profile, static_cast<int>(i.count)});
      allocator::Outcome out = allocator::Allocate(fleet, req, *profile_);
      if (out.code != allocator::Code::kSuccess) {
        ++delta.unschedulable;
        waiting = true;
        changed |= set(model::kAllocated, false,
                       out.code == allocator::Code::kUnschedulable ? "Unschedulable" : "Unresolvable",
                       replacing ? fmt::format("no replacement for {} device(s) yet: {}", deficit.size(), out.reason)
                                 : out.reason);
        changed |= set(model::kReady, false, "NotAllocated", "waiting for devices");
        return commit(changed);
      }
      // Dedication: no device may have another owner.
      for (const allocator::Placement& p : out.plan.placements) {
        const std::string dk = allocator::DeviceKey(p.gpu_uuid, p.profile, p.start);
        if (auto o = with_self.find(dk); o != with_self.end()) {
          return absl::AbortedError(fmt::format("device {} is held by pool {}", dk, o->second));
        }
        pool.status.allocation.push_back({p.cluster, p.node, p.gpu_uuid, p.profile, p.start, p.instance_uuid});
      }
      // The plan builds on the desired layouts the informer showed: one changed since (by a pool
      // written meanwhile) would be overwritten without its instances. Decide again instead.
      ASSIGN_OR_RETURN(std::vector<store::Key> relaid, tx.ChangedKeys(MigLayout::kKind, seen));
      for (const store::Key& k : relaid) {
        ASSIGN_OR_RETURN(std::optional<MigLayout> now_l, store::GetObject<MigLayout>(tx, "", k.name));
        const MigLayout* seen_l = nullptr;  // as the snapshot used it
        for (const MigLayout* l : layouts) {
          if (l->metadata.name == k.name) seen_l = l;
        }
        const bool same = now_l && seen_l != nullptr && now_l->spec == seen_l->spec;
        if (!same && (now_l || seen_l != nullptr)) {
          return absl::AbortedError(fmt::format("the desired MIG layout of {} changed meanwhile", k.name));
        }
      }
      for (const auto& [uuid, change] : out.plan.gpu_changes) {
        const std::string& wanted = uuid;  // clang 14 cannot capture a structured binding
        const allocator::GpuState& g = *std::find_if(fleet.gpus.begin(), fleet.gpus.end(),
                                                     [&](const allocator::GpuState& x) { return x.uuid == wanted; });
        MigLayout l;
        l.metadata.name = ToLower(uuid);
        l.metadata.labels = {{"gpuaas.io/cluster", g.cluster}};
        l.spec = {g.cluster, g.node, uuid, change.mig_enabled, {}};
        for (const catalog::Instance& i : change.layout) l.spec.instances.push_back({std::string(i.profile->name), i.start});
        ASSIGN_OR_RETURN(std::optional<MigLayout> old, store::GetObject<MigLayout>(tx, "", l.metadata.name));
        if (old) {
          l.metadata = old->metadata;
          l.status = {MigLayout::State::kPending, "", 0, Time{}, old->status.observed_generation};
          RETURN_IF_ERROR(store::UpdateObject(tx, l));
        } else {
          RETURN_IF_ERROR(store::CreateObject(tx, l, now));
        }
      }
      ++delta.allocated;
      if (meter && !out.plan.placements.empty() && meter->spec.cluster.empty()) {
        meter->spec.cluster = out.plan.placements.front().cluster;  // revenue by cluster (the pool asked for any)
        meter_changed = true;
      }
      if (meter) {
        // Billing of the new devices starts now; a replacement takes a failed device's entry.
        const Time since = std::chrono::floor<std::chrono::seconds>(now);
        for (const model::PoolItem& i : pool.spec.items) {
          std::vector<std::string> placed;  // this item's new devices
          for (const allocator::Placement& p : out.plan.placements) {
            if (OfItem(i, p.profile, p.gpu_uuid, gpus_)) {
              placed.push_back(model::HeldDeviceKey({p.cluster, p.node, p.gpu_uuid, p.profile, p.start, ""}));
            }
          }
          if (placed.empty()) continue;
          int64_t billed = 0;
          model::UsageRecord::Held* last = nullptr;
          for (model::UsageRecord::Held& h : *meter->spec.held) {
            if (h.model != i.model || h.profile != i.profile) continue;
            billed += h.count;
            last = &h;
          }
          if (const auto have = static_cast<int64_t>(HeldOf(i, pool.status.allocation, gpus_).size()); have > billed) {
            meter->spec.held->push_back({i.model, i.profile, have - billed, since, std::move(placed)});
          } else if (last != nullptr) {
            last->devices.insert(last->devices.end(), placed.begin(), placed.end());
          }
          meter_changed = true;
        }
      }
      if (replacing) {
        if (meter) {
          for (model::UsageRecord::Credit& c : meter->spec.credits) {
            if (!c.end) {
              c.end = std::max(c.start, now);
              meter_changed = true;
            }
          }
        }
        changed |= set(model::kDevicesHealthy, true, "Replaced",
                       fmt::format("{} device(s) replaced from free capacity", out.plan.placements.size()));
      }
      std::set<std::string> used_gpus;
      for (const auto& p : out.plan.placements) used_gpus.insert(p.gpu_uuid);
      set(model::kAllocated, true, replacing ? "Reallocated" : "Allocated",
          fmt::format("{} device(s) on {} GPU(s), {} to reconfigure", out.plan.placements.size(), used_gpus.size(),
                      out.plan.ReconfiguredGpus()));
      changed = true;
    }

    // 4. Provision: every device exists in the inventory as allocated.
    int missing = 0;
    std::string failed;
    for (model::AllocatedDevice& d : pool.status.allocation) {
      const GpuPtr g = GpuOf(gpus_, d.gpu_uuid);
      const Located at = Locate(d, g.get());
      if (!at.present) {
        ++missing;
        if (std::shared_ptr<const MigLayout> l = layouts_.Get("", ToLower(d.gpu_uuid));
            failed.empty() && l && l->status.state == MigLayout::State::kFailed) {
          failed = fmt::format("GPU {}: {} (attempt {}, retrying with backoff)", d.gpu_uuid, l->status.message,
                               l->status.attempts);
        }
      } else if (at.instance != nullptr && d.instance_uuid != at.instance->uuid) {
        d.instance_uuid = at.instance->uuid;
        changed = true;
      }
    }
    if (missing == 0) {
      changed |= set(model::kProvisioned, true, "Provisioned", "every device is in place");
      if (set(model::kReady, true, "Ready", "the pool's devices are dedicated and in place")) {
        changed = true;
        ++delta.ready;
      }
    } else {
      provisioning = true;
      changed |= failed.empty() ? set(model::kProvisioned, false, "WaitingForMigLayout",
                                      fmt::format("{} of {} device(s) wait for their GPU's MIG layout", missing,
                                                  pool.status.allocation.size()))
                                : set(model::kProvisioned, false, "MigLayoutFailed", failed);
      changed |= set(model::kReady, false, "Provisioning", "devices are being prepared");
    }
    return commit(changed);
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
      w.generation = listed.metadata.generation;
    } else {
      waits_.erase(key);
    }
  }
  // Devices that wait for their MIG layout arrive with a GPU change; looking again now and then
  // as well keeps a pool from hanging on a change it was not told of.
  if (provisioning) return runtime::Result::After(kProvisionPoll);
  if (!waiting) return runtime::Result::Done();
  // Capacity changes queue the pool at once; this is only the fallback.
  return runtime::Result::After(kWaitBackoff.After(waits));
}

}  // namespace gpuaas::controller
