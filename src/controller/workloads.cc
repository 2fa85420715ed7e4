#include "controller/workloads.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/status.h"
#include "fmt/format.h"
#include "model/pool.h"
#include "service/pools.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::GpuPool;
using model::Workload;
using model::WorkloadPhase;

bool Ready(const GpuPool& p) {
  const model::Condition* c = model::FindCondition(p.status.conditions, model::kReady);
  return c != nullptr && c->status == model::ConditionStatus::kTrue;
}

std::string Key(const model::WorkloadDevice& d) { return d.gpu_uuid + "/" + d.instance_uuid; }

}  // namespace

absl::StatusOr<WorkloadStats> WorkloadController::RunOnce() {
  WorkloadStats stats;
  std::set<std::pair<std::string, std::string>> pools_with_work;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<Workload> all, store::ListObjects<Workload>(tx));
    for (const Workload& w : all) {
      if (w.status.phase == WorkloadPhase::kPending || w.status.phase == WorkloadPhase::kRunning) {
        pools_with_work.insert({w.metadata.ns, w.spec.pool});
      }
    }
    return absl::OkStatus();
  }));
  for (const auto& [ns, pool_name] : pools_with_work) {
    absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
      const Time now = clock_.Now();
      ASSIGN_OR_RETURN(std::optional<GpuPool> pool, store::GetObject<GpuPool>(tx, ns, pool_name));
      ASSIGN_OR_RETURN(std::vector<Workload> in_ns, store::ListObjects<Workload>(tx, ns));
      std::vector<Workload*> mine;
      for (Workload& w : in_ns) {
        if (w.spec.pool == pool_name &&
            (w.status.phase == WorkloadPhase::kPending || w.status.phase == WorkloadPhase::kRunning)) {
          mine.push_back(&w);
        }
      }
      std::set<Workload*> dirty;
      if (!pool || !service::PoolIsLive(*pool)) {
        for (Workload* w : mine) {
          RETURN_IF_ERROR(service::EndRun(tx, *w, WorkloadPhase::kEvicted, "PoolReleased",
                                          fmt::format("pool {} is gone or released", pool_name), now));
          dirty.insert(w);
          ++stats.evicted;
        }
      } else {
        // A device that left the pool (its GPU failed) takes its runs with it: they queue again
        // and restart on the replacement.
        std::set<std::string> held;
        for (const model::AllocatedDevice& d : pool->status.allocation) {
          held.insert(Key({d.gpu_uuid, d.profile == "full" ? "" : d.instance_uuid}));
        }
        for (Workload* w : mine) {
          if (w->status.phase != WorkloadPhase::kRunning) continue;
          for (const model::WorkloadDevice& d : w->status.devices) {
            if (held.count(Key(d))) continue;
            RETURN_IF_ERROR(service::EndRun(tx, *w, WorkloadPhase::kPending, "DeviceFailed",
                                            fmt::format("device {} left pool {} (its GPU failed)",
                                                        d.instance_uuid.empty() ? d.gpu_uuid : d.instance_uuid,
                                                        pool_name),
                                            now));
            w->status.message += "; queued again";
            dirty.insert(w);
            ++stats.requeued;
            break;
          }
        }
      }
      if (pool && service::PoolIsLive(*pool) && Ready(*pool)) {
        // Device slots: each allocated device of the pool, times the time-slicing replicas.
        const int64_t slots = std::max<int64_t>(1, pool->spec.time_slicing_replicas);
        std::map<std::string, std::vector<model::WorkloadDevice>> devices;  // by profile
        std::map<std::string, int64_t> used;                               // by device key
        for (const model::AllocatedDevice& d : pool->status.allocation) {
          devices[d.profile].push_back({d.gpu_uuid, d.profile == "full" ? "" : d.instance_uuid});
        }
        for (Workload* w : mine) {
          if (w->status.phase == WorkloadPhase::kRunning) {
            for (const model::WorkloadDevice& d : w->status.devices) ++used[Key(d)];
          }
        }
        std::vector<Workload*> pending;
        for (Workload* w : mine) {
          if (w->status.phase == WorkloadPhase::kPending) pending.push_back(w);
        }
        std::sort(pending.begin(), pending.end(), [](const Workload* a, const Workload* b) {
          if (a->spec.priority != b->spec.priority) return a->spec.priority < b->spec.priority;
          if (a->metadata.creation_timestamp != b->metadata.creation_timestamp) {
            return a->metadata.creation_timestamp < b->metadata.creation_timestamp;
          }
          return a->metadata.name < b->metadata.name;
        });
        auto pick = [&](const std::string& profile, int64_t count) {
          std::vector<model::WorkloadDevice> got;
          for (const model::WorkloadDevice& d : devices[profile]) {
            if (static_cast<int64_t>(got.size()) == count) break;
            if (used[Key(d)] < slots) got.push_back(d);
          }
          return static_cast<int64_t>(got.size()) == count ? got : std::vector<model::WorkloadDevice>{};
        };
        for (Workload* w : pending) {
          const std::string profile = model::ProfileOfResource(w->spec.resource);
          std::vector<model::WorkloadDevice> got = pick(profile, w->spec.count);
          if (got.empty() && w->spec.priority == model::PriorityClass::kInference) {
            // Preempt batch work of this profile, newest first, until the workload fits.
            std::vector<Workload*> victims;
            for (Workload* v : mine) {
              if (v->status.phase == WorkloadPhase::kRunning && v->spec.priority == model::PriorityClass::kBatch &&
                  model::ProfileOfResource(v->spec.resource) == profile) {
                victims.push_back(v);
              }
            }
            std::sort(victims.begin(), victims.end(), [](const Workload* a, const Workload* b) {
              return std::tie(a->status.start_time, a->metadata.creation_timestamp, a->metadata.name) >
                     std::tie(b->status.start_time, b->metadata.creation_timestamp, b->metadata.name);
            });
            // Only preempt when that is enough: count free and batch-held slots first.
            int64_t reachable = 0;
            for (const model::WorkloadDevice& d : devices[profile]) reachable += slots - used[Key(d)];
            for (Workload* v : victims) reachable += static_cast<int64_t>(v->status.devices.size());
            for (size_t k = 0; k < victims.size() && got.empty() && reachable >= w->spec.count; ++k) {
              Workload* v = victims[k];
              for (const model::WorkloadDevice& d : v->status.devices) --used[Key(d)];
              RETURN_IF_ERROR(service::EndRun(tx, *v, WorkloadPhase::kPending, "Preempted",
                                              fmt::format("preempted by inference workload {}", w->metadata.name), now));
              v->status.message += "; queued again";
              dirty.insert(v);
              ++stats.preempted;
              got = pick(profile, w->spec.count);
            }
          }
          if (got.empty()) {
            const std::string msg = fmt::format("no free {} device in pool {} ({} slot(s) each); queued",
                                                profile, pool_name, slots);
            if (w->status.reason != "Queued" && w->status.reason != "Preempted") {
              w->status.reason = "Queued";
              dirty.insert(w);
            }
            if (w->status.reason == "Queued" && w->status.message != msg) {
              w->status.message = msg;
              dirty.insert(w);
            }
            ++stats.queued;
            continue;
          }
          for (const model::WorkloadDevice& d : got) ++used[Key(d)];
          model::Profile prof;
          prof.metadata.name = fmt::format("{}-{}", w->metadata.name, tx.revision());
          prof.metadata.ns = ns;
          prof.spec = {w->metadata.name, pool_name, ns, got, now, std::nullopt};
          RETURN_IF_ERROR(store::CreateObject(tx, prof, now));
          w->status.phase = WorkloadPhase::kRunning;
          w->status.reason = "Admitted";
          w->status.message = fmt::format("running on {} device(s) of pool {}", got.size(), pool_name);
          w->status.devices = got;
          w->status.start_time = now;
          w->status.profile = prof.metadata.name;
          dirty.insert(w);
          ++stats.admitted;
        }
      } else {
        for (Workload* w : mine) {
          if (w->status.phase == WorkloadPhase::kPending && w->status.reason != "PoolNotReady") {
            w->status.reason = "PoolNotReady";
            w->status.message = fmt::format("pool {} is not Ready yet", pool_name);
            dirty.insert(w);
          }
        }
      }
      for (Workload* w : dirty) RETURN_IF_ERROR(store::UpdateObject(tx, *w));
      return absl::OkStatus();
    });
    if (!s.ok() && !absl::IsAborted(s)) return s;
  }
  return stats;
}

}  // namespace gpuaas::controller
