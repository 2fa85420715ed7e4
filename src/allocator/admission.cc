#include "allocator/admission.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "catalog/catalog.h"
#include "fmt/format.h"

namespace gpuaas::allocator {
namespace {

using model::WorkloadDevice;
using model::WorkloadPhase;

std::string Key(const WorkloadDevice& d) { return d.gpu_uuid + "/" + d.instance_uuid; }

bool Ready(const model::GpuPool& p) {
  const model::Condition* c = model::FindCondition(p.status.conditions, model::kReady);
  return c != nullptr && c->status == model::ConditionStatus::kTrue;
}

// A workload's state as the decision goes along.
struct Seat {
  const model::Workload* w;
  WorkloadPhase phase;
  std::string reason;
  std::string message;
  std::vector<WorkloadDevice> devices;
};

}  // namespace

int AdmissionDecision::Count(AdmissionStep::Kind k, std::string_view reason) const {
  return static_cast<int>(std::count_if(steps.begin(), steps.end(), [&](const AdmissionStep& s) {
    return s.kind == k && (reason.empty() || s.reason == reason);
  }));
}

AdmissionDecision Admit(const model::GpuPool* pool, const std::vector<const model::Workload*>& workloads) {
  AdmissionDecision out;
  std::vector<Seat> seats;
  std::vector<size_t> index;  // seat -> position in `workloads`
  for (size_t i = 0; i < workloads.size(); ++i) {
    const model::Workload& w = *workloads[i];
    if (w.status.phase != WorkloadPhase::kPending && w.status.phase != WorkloadPhase::kRunning) continue;
    seats.push_back({&w, w.status.phase, w.status.reason, w.status.message, w.status.devices});
    index.push_back(i);
  }
  auto end = [&](size_t s, WorkloadPhase phase, std::string reason, std::string message) {
    seats[s].phase = phase;
    seats[s].reason = reason;
    seats[s].message = message;
    seats[s].devices.clear();
    out.steps.push_back({AdmissionStep::Kind::kEnd, index[s], phase, std::move(reason), std::move(message), {}});
  };

  const std::string pool_name = pool != nullptr ? pool->metadata.name
                                : seats.empty() ? std::string()
                                                : seats.front().w->spec.pool;
  // A pool being released ends its runs first; its devices go back to the fleet after that.
  if (pool == nullptr || !model::PoolIsLive(*pool) || model::PoolReleaseRequested(*pool)) {
    for (size_t s = 0; s < seats.size(); ++s) {
      end(s, WorkloadPhase::kEvicted, "PoolReleased", fmt::format("pool {} is gone or released", pool_name));
    }
    return out;
  }

  // A device that left the pool (its GPU failed) takes its runs with it: they queue again and
  // restart on the replacement.
  std::set<std::string> held;
  for (const model::AllocatedDevice& d : pool->status.allocation) {
    held.insert(Key({d.gpu_uuid, d.profile == catalog::kFullProfile ? "" : d.instance_uuid}));
  }
  for (size_t s = 0; s < seats.size(); ++s) {
    if (seats[s].phase != WorkloadPhase::kRunning) continue;
    for (const WorkloadDevice& d : seats[s].devices) {
      if (held.count(Key(d))) continue;
      end(s, WorkloadPhase::kPending, "DeviceFailed",
          fmt::format("device {} left pool {} (its GPU failed); queued again",
                      d.instance_uuid.empty() ? d.gpu_uuid : d.instance_uuid, pool_name));
      break;
    }
  }

  auto wait = [&](size_t s, std::string reason, std::string message) {
    if (seats[s].reason == reason && seats[s].message == message) return;
    seats[s].reason = reason;
    seats[s].message = message;
    out.steps.push_back({AdmissionStep::Kind::kWait, index[s], WorkloadPhase::kPending, std::move(reason),
                         std::move(message), {}});
  };

  if (!Ready(*pool)) {
    for (size_t s = 0; s < seats.size(); ++s) {
      if (seats[s].phase == WorkloadPhase::kPending && seats[s].reason != "PoolNotReady") {
        wait(s, "PoolNotReady", fmt::format("pool {} is not Ready yet", pool_name));
      }
    }
    return out;
  }

  // Device slots: each allocated device of the pool, times the time-slicing replicas.
  const int64_t slots = std::max<int64_t>(1, pool->spec.time_slicing_replicas);
  std::map<std::string, std::vector<WorkloadDevice>> devices;  // by profile
  std::map<std::string, int64_t> used;                         // by device key
  for (const model::AllocatedDevice& d : pool->status.allocation) {
    devices[d.profile].push_back({d.gpu_uuid, d.profile == catalog::kFullProfile ? "" : d.instance_uuid});
  }
  std::vector<size_t> pending;
  for (size_t s = 0; s < seats.size(); ++s) {
    if (seats[s].phase == WorkloadPhase::kRunning) {
      for (const WorkloadDevice& d : seats[s].devices) ++used[Key(d)];
    } else {
      pending.push_back(s);
    }
  }
  std::sort(pending.begin(), pending.end(), [&](size_t a, size_t b) {
    const model::Workload& x = *seats[a].w;
    const model::Workload& y = *seats[b].w;
    return std::tie(x.spec.priority, x.metadata.creation_timestamp, x.metadata.name) <
           std::tie(y.spec.priority, y.metadata.creation_timestamp, y.metadata.name);
  });
  auto pick = [&](const std::string& profile, int64_t count) {
    std::vector<WorkloadDevice> got;
    for (const WorkloadDevice& d : devices[profile]) {
      if (static_cast<int64_t>(got.size()) == count) break;
      if (used[Key(d)] < slots) got.push_back(d);
    }
    return static_cast<int64_t>(got.size()) == count ? got : std::vector<WorkloadDevice>{};
  };
  for (size_t s : pending) {
    const model::Workload& w = *seats[s].w;
    const std::string profile = model::ProfileOfResource(w.spec.resource);
    std::vector<WorkloadDevice> got = pick(profile, w.spec.count);
    if (got.empty() && w.spec.priority == model::PriorityClass::kInference) {
      // Preempt batch work of this profile, newest first, until the workload fits.
      std::vector<size_t> victims;
      for (size_t v = 0; v < seats.size(); ++v) {
        if (seats[v].phase == WorkloadPhase::kRunning && seats[v].w->spec.priority == model::PriorityClass::kBatch &&
            model::ProfileOfResource(seats[v].w->spec.resource) == profile) {
          victims.push_back(v);
        }
      }
      std::sort(victims.begin(), victims.end(), [&](size_t a, size_t b) {
        const model::Workload& x = *seats[a].w;
        const model::Workload& y = *seats[b].w;
        return std::tie(x.status.start_time, x.metadata.creation_timestamp, x.metadata.name) >
               std::tie(y.status.start_time, y.metadata.creation_timestamp, y.metadata.name);
      });
      // Only preempt when that is enough: count free and batch-held slots first.
      int64_t reachable = 0;
      for (const WorkloadDevice& d : devices[profile]) reachable += slots - used[Key(d)];
      for (size_t v : victims) reachable += static_cast<int64_t>(seats[v].devices.size());
      for (size_t k = 0; k < victims.size() && got.empty() && reachable >= w.spec.count; ++k) {
        const size_t v = victims[k];
        for (const WorkloadDevice& d : seats[v].devices) --used[Key(d)];
        end(v, WorkloadPhase::kPending, "Preempted",
            fmt::format("preempted by inference workload {}; queued again", w.metadata.name));
        got = pick(profile, w.spec.count);
      }
    }
    if (got.empty()) {
      const std::string msg =
          fmt::format("no free {} device in pool {} ({} slot(s) each); queued", profile, pool_name, slots);
      // A preempted workload keeps saying so while it waits.
      if (seats[s].reason != "Preempted") wait(s, "Queued", msg);
      continue;
    }
    for (const WorkloadDevice& d : got) ++used[Key(d)];
    seats[s].phase = WorkloadPhase::kRunning;
    seats[s].reason = "Admitted";
    seats[s].message = fmt::format("running on {} device(s) of pool {}", got.size(), pool_name);
    seats[s].devices = got;
    out.steps.push_back({AdmissionStep::Kind::kStart, index[s], WorkloadPhase::kRunning, seats[s].reason,
                         seats[s].message, std::move(got)});
  }
  return out;
}

}  // namespace gpuaas::allocator
