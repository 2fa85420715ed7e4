#include "controller/pools.h"

#include <algorithm>
#include <set>

#include "catalog/catalog.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/pool.h"
#include "service/pools.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::ConditionStatus;
using model::GpuPool;
using model::MigLayout;

std::string PoolKey(const GpuPool& p) { return p.metadata.ns + "/" + p.metadata.name; }

// A device's identity for dedication checks: the GPU and, for MIG, the placement start.
std::string DeviceKey(const std::string& gpu_uuid, const std::string& profile, int64_t start) {
  return profile == catalog::kFullProfile ? gpu_uuid : fmt::format("{}@{}", gpu_uuid, start);
}

bool IsTrue(const GpuPool& p, std::string_view type) {
  const model::Condition* c = model::FindCondition(p.status.conditions, type);
  return c != nullptr && c->status == ConditionStatus::kTrue;
}

// Does the observed GPU already have the layout?
bool Matches(const model::GpuCapacity& g, const MigLayout& l) {
  const bool enabled = g.status.mig_mode == model::MigMode::kEnabled;
  if (enabled != l.spec.mig_enabled) return false;
  if (!enabled) return true;
  if (g.status.mig_instances.size() != l.spec.instances.size()) return false;
  for (const MigLayout::Instance& want : l.spec.instances) {
    bool found = false;
    for (const model::MigInstance& have : g.status.mig_instances) {
      found |= have.profile == want.profile && have.start == want.start;
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

PoolController::PoolController(store::Store& store, const Clock& clock,
                               std::map<std::string, cluster::ClusterDriver*> drivers)
    : store_(store), clock_(clock), drivers_(std::move(drivers)),
      profile_(allocator::ProfileByName("default")) {}

absl::StatusOr<PassStats> PoolController::RunOnce() {
  PassStats stats;
  RETURN_IF_ERROR(ReconcileLayouts(stats));
  RETURN_IF_ERROR(ReconcilePools(stats));
  return stats;
}

absl::Status PoolController::ReconcileLayouts(PassStats& stats) {
  std::vector<MigLayout> layouts;
  std::map<std::string, model::GpuCapacity> gpus;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(layouts, store::ListObjects<MigLayout>(tx));
    ASSIGN_OR_RETURN(std::vector<model::GpuCapacity> all, store::ListObjects<model::GpuCapacity>(tx));
    for (model::GpuCapacity& g : all) gpus.emplace(g.spec.uuid, std::move(g));
    return absl::OkStatus();
  }));
  const Time now = clock_.Now();
  for (MigLayout& l : layouts) {
    // Applied layouts are checked too: a GPU that lost its layout (node reboot, driver reload,
    // a restart of the simulation) gets it again.
    auto g = gpus.find(l.spec.gpu_uuid);
    MigLayout::Status next = l.status;
    // Drivers speak the cluster's node names; NodeCapacity names are "cluster.node".
    const std::string node = l.spec.node.substr(l.spec.node.find('.') + 1);
    if (g != gpus.end() && Matches(g->second, l)) {
      next = {MigLayout::State::kApplied, "", l.status.attempts, l.status.last_attempt, l.metadata.generation};
    } else {
      cluster::ClusterDriver* d = drivers_.count(l.spec.cluster) ? drivers_.at(l.spec.cluster) : nullptr;
      if (d == nullptr) {
        next.state = MigLayout::State::kFailed;
        next.message = fmt::format("no driver for cluster {}", l.spec.cluster);
      } else if (l.status.state == MigLayout::State::kApplying &&
                 l.status.observed_generation == l.metadata.generation) {
        cluster::ClusterDriver::MigState ms = d->NodeMigState(node);
        if (ms.state == "failed") {
          next.state = MigLayout::State::kFailed;
          next.message = ms.message;
          ++stats.layouts_failed;
        } else {
          stats.needs_observation = true;  // still applying
        }
      } else {
        // Pending, failed (retry after backoff), or a newer generation to apply.
        const auto backoff = std::chrono::seconds(std::min<int64_t>(60, int64_t{1} << std::min<int64_t>(l.status.attempts, 6)));
        const bool retry_due = l.status.state != MigLayout::State::kFailed || now - l.status.last_attempt >= backoff ||
                               l.status.observed_generation != l.metadata.generation;
        if (retry_due) {
          std::vector<cluster::ObservedMigInstance> insts;
          for (const MigLayout::Instance& i : l.spec.instances) {
            insts.push_back({i.profile, static_cast<int>(i.start), 0, "", false});
          }
          absl::Status s = d->ApplyMigLayout(node, l.spec.gpu_uuid, l.spec.mig_enabled, insts);
          next.attempts = l.status.attempts + 1;
          next.last_attempt = now;
          next.observed_generation = l.metadata.generation;
          if (s.ok()) {
            next.state = MigLayout::State::kApplying;
            next.message = "";
            ++stats.layouts_applied;
            stats.needs_observation = true;
          } else {
            next.state = MigLayout::State::kFailed;
            next.message = std::string(s.message());
            ++stats.layouts_failed;
          }
        }
      }
    }
    if (next == l.status) continue;
    l.status = next;
    absl::Status s = store_.Transact([&](store::Txn& tx) { return store::UpdateObject(tx, l); });
    if (!s.ok() && !absl::IsAborted(s)) return s;  // a conflict is retried next pass
  }
  return absl::OkStatus();
}

// Where an allocated device stands in the inventory: present when its GPU exists with MIG off
// (a whole GPU) or holds an instance of its profile at its start (then `instance` points to it).
struct Located {
  bool present = false;
  const model::MigInstance* instance = nullptr;
};

Located Locate(const model::AllocatedDevice& d, const std::map<std::string, const model::GpuCapacity*>& gpus) {
  auto g = gpus.find(d.gpu_uuid);
  if (g == gpus.end()) return {};
  const model::GpuCapacity& gpu = *g->second;
  const bool mig = gpu.status.mig_mode == model::MigMode::kEnabled;
  if (d.profile == catalog::kFullProfile) return {!mig, nullptr};
  if (!mig) return {};
  for (const model::MigInstance& m : gpu.status.mig_instances) {
    if (m.profile == d.profile && m.start == d.start) return {true, &m};
  }
  return {};
}

bool AllPresent(const GpuPool& pool, const std::map<std::string, const model::GpuCapacity*>& gpus) {
  return std::all_of(pool.status.allocation.begin(), pool.status.allocation.end(),
                     [&](const model::AllocatedDevice& d) { return Locate(d, gpus).present; });
}

// A device whose GPU failed (the driver or the health rules say Unhealthy) must be replaced.
bool OnFailedGpu(const model::AllocatedDevice& d, const std::map<std::string, const model::GpuCapacity*>& gpus) {
  auto g = gpus.find(d.gpu_uuid);
  return g != gpus.end() && g->second->status.health == model::Health::kUnhealthy;
}

std::string WhyFailed(const model::GpuCapacity& g) {
  const model::Condition* c = model::FindCondition(g.status.conditions, model::kGpuHealthy);
  return c != nullptr && !c->message.empty() ? c->message : "unhealthy";
}

// What the pool still lacks: its items minus what its allocation holds, per (model, profile).
std::vector<model::PoolItem> Deficit(const GpuPool& pool, const std::map<std::string, const model::GpuCapacity*>& gpus) {
  std::vector<model::PoolItem> out;
  for (const model::PoolItem& i : pool.spec.items) {
    int64_t have = 0;
    for (const model::AllocatedDevice& d : pool.status.allocation) {
      auto g = gpus.find(d.gpu_uuid);
      const bool same_model = g == gpus.end() || g->second->spec.model == i.model;
      have += d.profile == i.profile && same_model ? 1 : 0;
    }
    if (have < i.count) {
      model::PoolItem miss = i;
      miss.count = i.count - have;
      out.push_back(miss);
    }
  }
  return out;
}

absl::Status PoolController::ReconcilePools(PassStats& stats) {
  std::vector<GpuPool> pools;
  std::vector<model::GpuCapacity> inventory;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(pools, store::ListObjects<GpuPool>(tx));
    ASSIGN_OR_RETURN(inventory, store::ListObjects<model::GpuCapacity>(tx));
    return absl::OkStatus();
  }));
  std::map<std::string, const model::GpuCapacity*> present;
  for (const model::GpuCapacity& g : inventory) present[g.spec.uuid] = &g;
  for (const GpuPool& listed : pools) {
    const bool approved = listed.status.approval && listed.status.approval->approved;
    const model::Condition* released = model::FindCondition(listed.status.conditions, model::kReleased);
    const bool releasing = released != nullptr && released->status != ConditionStatus::kTrue;
    const bool done = released != nullptr && released->status == ConditionStatus::kTrue;
    if (!approved || done) continue;
    // A Ready pool is looked at again only when one of its devices went missing (a GPU lost its
    // layout, say after a node reboot): level-triggered, not edge-triggered.
    // So is one with a device on a failed GPU, which must be replaced.
    const bool healthy = std::none_of(listed.status.allocation.begin(), listed.status.allocation.end(),
                                      [&](const model::AllocatedDevice& d) { return OnFailedGpu(d, present); });
    if (!releasing && IsTrue(listed, model::kReady) && AllPresent(listed, present) && healthy) continue;

    // Each pool in its own transaction, reading everything it decides on afresh.
    absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
      ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, listed.metadata.ns, listed.metadata.name));
      if (!cur) return absl::OkStatus();
      GpuPool& pool = *cur;
      const Time now = clock_.Now();
      const int64_t gen = pool.metadata.generation;
      auto set = [&](std::string_view type, bool ok, std::string reason, std::string message) {
        return model::SetCondition(pool.status.conditions,
                                   {std::string(type), ok ? ConditionStatus::kTrue : ConditionStatus::kFalse,
                                    std::move(reason), std::move(message), now, gen});
      };
      bool changed = false;
      if (releasing) {
        // Free the devices; instances created for the pool stay, free for the next pool.
        pool.status.allocation.clear();
        changed |= set(model::kAllocated, false, "Released", "devices returned to the fleet");
        changed |= set(model::kReady, false, "Released", "the pool was released");
        changed |= set(model::kReleased, true, "Released", "all devices freed");
        ++stats.released;
        return changed ? store::UpdateObject(tx, pool) : absl::OkStatus();
      }
      ASSIGN_OR_RETURN(std::vector<model::GpuCapacity> gpus, store::ListObjects<model::GpuCapacity>(tx));
      std::map<std::string, const model::GpuCapacity*> health_of;
      for (const model::GpuCapacity& g : gpus) health_of[g.spec.uuid] = &g;
      // Devices on failed GPUs leave the pool; what is missing is allocated again from free
      // capacity below (the failed GPUs themselves are filtered out by the allocator).
      std::vector<std::string> lost;
      std::erase_if(pool.status.allocation, [&](const model::AllocatedDevice& d) {
        if (!OnFailedGpu(d, health_of)) return false;
        lost.push_back(fmt::format("{} on GPU {} ({})", d.profile, d.gpu_uuid, WhyFailed(*health_of.at(d.gpu_uuid))));
        return true;
      });
      if (!lost.empty()) {
        ++stats.replaced;
        changed |= set(model::kDevicesHealthy, false, "DeviceFailed",
                       fmt::format("{} device(s) left the pool: {}", lost.size(), fmt::join(lost, "; ")));
        changed |= set(model::kAllocated, false, "ReplacingFailedDevices",
                       fmt::format("replacing {} device(s) from free capacity", lost.size()));
      }
      const std::vector<model::PoolItem> deficit = Deficit(pool, health_of);
      if (!IsTrue(pool, model::kAllocated) && deficit.empty()) {
        changed |= set(model::kAllocated, true, "Allocated", "every device is allocated");
      }
      if (!IsTrue(pool, model::kAllocated) && !deficit.empty()) {
        const model::Condition* dh = model::FindCondition(pool.status.conditions, model::kDevicesHealthy);
        const bool replacing = dh != nullptr && dh->status == ConditionStatus::kFalse;
        // Allocate on a fresh snapshot: owners from every live pool, layouts as desired.
        ASSIGN_OR_RETURN(std::vector<GpuPool> all, store::ListObjects<GpuPool>(tx));
        ASSIGN_OR_RETURN(std::vector<model::NodeCapacity> nodes, store::ListObjects<model::NodeCapacity>(tx));
        ASSIGN_OR_RETURN(std::vector<MigLayout> layouts, store::ListObjects<MigLayout>(tx));
        std::map<std::string, std::string> owners;  // device key -> pool
        for (const GpuPool& other : all) {
          if (!service::PoolIsLive(other)) continue;
          for (const model::AllocatedDevice& d : other.status.allocation) {
            owners[DeviceKey(d.gpu_uuid, d.profile, d.start)] = PoolKey(other);
          }
        }
        std::map<std::string, const MigLayout*> desired;
        for (const MigLayout& l : layouts) desired[l.spec.gpu_uuid] = &l;
        allocator::FleetSnapshot fleet = allocator::BuildSnapshot(gpus, nodes, {}, {});
        for (allocator::GpuState& g : fleet.gpus) {
          if (auto d = desired.find(g.uuid); d != desired.end() && g.model != nullptr) {
            // Plan on the layout gpuaas asked for, even if the GPU has not reached it yet.
            std::vector<allocator::InstanceState> insts;
            for (const MigLayout::Instance& i : d->second->spec.instances) {
              const catalog::MigProfile* p = catalog::FindProfile(*g.model, i.profile);
              if (p == nullptr) continue;
              allocator::InstanceState st{p, static_cast<int>(i.start), "", "", false};
              for (const allocator::InstanceState& o : g.instances) {
                if (o.profile == p && o.start == i.start) st = o;
              }
              insts.push_back(st);
            }
            g.mig_enabled = d->second->spec.mig_enabled;
            g.instances = std::move(insts);
          }
          if (auto o = owners.find(g.uuid); o != owners.end() && !g.mig_enabled) g.owner = o->second;
          for (allocator::InstanceState& i : g.instances) {
            if (auto o = owners.find(DeviceKey(g.uuid, "mig", i.start)); o != owners.end()) i.owner = o->second;
          }
        }
        allocator::Request req{PoolKey(pool), pool.spec.cluster, {}};
        for (const model::PoolItem& i : deficit) {
          req.items.push_back({i.model, i.profile, static_cast<int>(i.count)});
        }
        allocator::Outcome out = allocator::Allocate(fleet, req, *profile_);
        if (out.code != allocator::Code::kSuccess) {
          ++stats.unschedulable;
          changed |= set(model::kAllocated, false,
                         out.code == allocator::Code::kUnschedulable ? "Unschedulable" : "Unresolvable",
                         replacing ? fmt::format("no replacement for {} device(s) yet: {}", deficit.size(), out.reason)
                                   : out.reason);
          changed |= set(model::kReady, false, "NotAllocated", "waiting for devices");
          return changed ? store::UpdateObject(tx, pool) : absl::OkStatus();
        }
        // Dedication, checked again inside this transaction: no device may have another owner.
        for (const allocator::Placement& p : out.plan.placements) {
          const std::string key = DeviceKey(p.gpu_uuid, p.profile, p.start);
          if (owners.count(key)) {
            return absl::AbortedError(fmt::format("device {} was taken meanwhile", key));
          }
          pool.status.allocation.push_back({p.cluster, p.node, p.gpu_uuid, p.profile, p.start, p.instance_uuid});
        }
        for (const auto& [uuid, change] : out.plan.gpu_changes) {
          const allocator::GpuState& g = *std::find_if(fleet.gpus.begin(), fleet.gpus.end(),
                                                       [&](const allocator::GpuState& x) { return x.uuid == uuid; });
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
        ++stats.allocated;
        if (replacing) {
          changed |= set(model::kDevicesHealthy, true, "Replaced",
                         fmt::format("{} device(s) replaced from free capacity", out.plan.placements.size()));
        }
        set(model::kAllocated, true, replacing ? "Reallocated" : "Allocated",
            fmt::format("{} device(s) on {} GPU(s), {} to reconfigure", out.plan.placements.size(),
                        std::set<std::string>([&] {
                          std::set<std::string> u;
                          for (const auto& p : out.plan.placements) u.insert(p.gpu_uuid);
                          return u;
                        }()).size(),
                        out.plan.ReconfiguredGpus()));
        changed = true;
      }
      // Provisioned: every device exists in the inventory as allocated.
      std::map<std::string, const model::GpuCapacity*> by_uuid;
      for (const model::GpuCapacity& g : gpus) by_uuid[g.spec.uuid] = &g;
      int missing = 0;
      for (model::AllocatedDevice& d : pool.status.allocation) {
        const Located at = Locate(d, by_uuid);
        if (!at.present) {
          ++missing;
        } else if (at.instance != nullptr && d.instance_uuid != at.instance->uuid) {
          d.instance_uuid = at.instance->uuid;
          changed = true;
        }
      }
      std::string failed;
      if (missing > 0) {
        for (const model::AllocatedDevice& d : pool.status.allocation) {
          ASSIGN_OR_RETURN(std::optional<MigLayout> l, store::GetObject<MigLayout>(tx, "", ToLower(d.gpu_uuid)));
          if (l && l->status.state == MigLayout::State::kFailed) {
            failed = fmt::format("GPU {}: {} (attempt {}, retrying with backoff)", d.gpu_uuid,
                                 l->status.message, l->status.attempts);
            break;
          }
        }
      }
      if (missing == 0) {
        changed |= set(model::kProvisioned, true, "Provisioned", "every device is in place");
        if (set(model::kReady, true, "Ready", "the pool's devices are dedicated and in place")) {
          changed = true;
          ++stats.ready;
        }
      } else {
        changed |= failed.empty()
                       ? set(model::kProvisioned, false, "WaitingForMigLayout",
                             fmt::format("{} of {} device(s) wait for their GPU's MIG layout",
                                         missing, pool.status.allocation.size()))
                       : set(model::kProvisioned, false, "MigLayoutFailed", failed);
        changed |= set(model::kReady, false, "Provisioning", "devices are being prepared");
      }
      return changed ? store::UpdateObject(tx, pool) : absl::OkStatus();
    });
    if (!s.ok() && !absl::IsAborted(s)) return s;  // conflicts retry on the next pass
  }
  return absl::OkStatus();
}

}  // namespace gpuaas::controller
