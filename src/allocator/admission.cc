#include "allocator/admission.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "allocator/lending.h"
#include "catalog/catalog.h"
#include "common/clock.h"
#include "fmt/format.h"

namespace gpuaas::allocator {
namespace {

using model::WorkloadDevice;
using model::WorkloadPhase;

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

AdmissionDecision Admit(const model::GpuPool* pool, const std::vector<const model::Workload*>& workloads,
                        const std::vector<const model::Workload*>& borrowers, Time now) {
  AdmissionDecision out;
  // Borrowers on the pool's devices, as the decision goes along.
  struct Loan {
    const model::Workload* w;
    bool gone = false;
    bool told = false;  // has a reclaim deadline
  };
  std::vector<Loan> loans;
  for (const model::Workload* b : borrowers) {
    if (b->status.phase == WorkloadPhase::kRunning) loans.push_back({b, false, b->status.reclaim_deadline.has_value()});
  }
  std::vector<size_t> loan_index;  // loan -> position in `borrowers`
  for (size_t i = 0; i < borrowers.size(); ++i) {
    if (borrowers[i]->status.phase == WorkloadPhase::kRunning) loan_index.push_back(i);
  }
  auto end_loan = [&](size_t l, WorkloadPhase phase, std::string reason, std::string message) {
    loans[l].gone = true;
    AdmissionStep st{AdmissionStep::Kind::kEnd, loan_index[l], phase, std::move(reason), std::move(message), {}};
    st.borrower = true;
    out.steps.push_back(std::move(st));
  };
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
  if (pool == nullptr || !model::PoolIsLive(*pool) || model::PoolEnded(*pool, now)) {
    for (size_t s = 0; s < seats.size(); ++s) {
      end(s, WorkloadPhase::kEvicted, "PoolReleased", fmt::format("pool {} is gone or released", pool_name));
    }
    for (size_t l = 0; l < loans.size(); ++l) {
      end_loan(l, WorkloadPhase::kPending, "PoolReleased",
               fmt::format("the lending pool {} is gone or released; queued again", pool_name));
    }
    return out;
  }

  // A device that left the pool (its GPU failed) takes its runs with it: they queue again and
  // restart on the replacement.
  std::set<std::string> held;
  for (const model::AllocatedDevice& d : pool->status.allocation) {
    held.insert(LendKey({d.gpu_uuid, d.profile == catalog::kFullProfile ? "" : d.instance_uuid}));
  }
  for (size_t s = 0; s < seats.size(); ++s) {
    if (seats[s].phase != WorkloadPhase::kRunning) continue;
    for (const WorkloadDevice& d : seats[s].devices) {
      if (held.count(LendKey(d))) continue;
      end(s, WorkloadPhase::kPending, "DeviceFailed",
          fmt::format("device {} left pool {} (its GPU failed); queued again",
                      d.instance_uuid.empty() ? d.gpu_uuid : d.instance_uuid, pool_name));
      break;
    }
  }
  // A borrower's device that left the pool, and a borrower still there at its deadline.
  const int64_t grace = pool->spec.lending ? pool->spec.lending->reclaim_grace_seconds : kDefaultReclaimGraceSeconds;
  // A reservation lends until its start less the grace, so that its devices are free at the start.
  const bool lending = (pool->spec.lending && pool->spec.lending->enabled) ||
                       model::PoolBeforeStart(*pool, now + std::chrono::seconds(grace));
  for (size_t l = 0; l < loans.size(); ++l) {
    const model::Workload& b = *loans[l].w;
    for (const WorkloadDevice& d : b.status.devices) {
      if (held.count(LendKey(d))) continue;
      end_loan(l, WorkloadPhase::kPending, "DeviceFailed",
               fmt::format("lent device {} left pool {} (its GPU failed); queued again",
                           d.instance_uuid.empty() ? d.gpu_uuid : d.instance_uuid, pool_name));
      break;
    }
    if (loans[l].gone || !b.status.reclaim_deadline || *b.status.reclaim_deadline > now) continue;
    end_loan(l, b.spec.requeue_on_reclaim ? WorkloadPhase::kPending : WorkloadPhase::kEvicted, "Reclaimed",
             fmt::format("removed at the reclaim deadline {}: pool {} of project {} took its device(s) back{}",
                         FormatTime(*b.status.reclaim_deadline), pool_name, pool->metadata.ns,
                         b.spec.requeue_on_reclaim ? "; queued again" : ""));
  }
  // A reservation about to start wants its devices at its start, not later. Deadlines are whole
  // seconds, as stored: rounded up, so that a borrower never gets less than its grace.
  const Time by = std::chrono::ceil<std::chrono::seconds>(
      pool->spec.start_time && *pool->spec.start_time > now
          ? std::min(now + std::chrono::seconds(grace), *pool->spec.start_time)
          : now + std::chrono::seconds(grace));
  auto reclaim = [&](size_t l, const std::string& why) {
    loans[l].told = true;
    AdmissionStep st{AdmissionStep::Kind::kReclaim, loan_index[l], WorkloadPhase::kRunning, "Reclaimed",
                     fmt::format("{}: leave by {} (grace {} s)", why, FormatTime(by),
                                 std::chrono::duration_cast<std::chrono::seconds>(by - now).count()),
                     {}};
    st.borrower = true;
    st.deadline = by;
    out.steps.push_back(std::move(st));
  };
  if (!lending) {
    const std::string why = pool->spec.start_time && *pool->spec.start_time + std::chrono::seconds(grace) > now
                                ? fmt::format("pool {} of project {} is reserved from {}", pool_name,
                                              pool->metadata.ns, FormatTime(*pool->spec.start_time))
                                : fmt::format("pool {} of project {} stopped lending", pool_name, pool->metadata.ns);
    for (size_t l = 0; l < loans.size(); ++l) {
      if (!loans[l].gone && !loans[l].told) reclaim(l, why);
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
      for (const WorkloadDevice& d : seats[s].devices) ++used[LendKey(d)];
    } else {
      pending.push_back(s);
    }
  }
  // A borrower holds its devices whole.
  std::map<std::string, int64_t> coming;  // by profile: lent devices already told to come back
  std::map<std::string, std::string> profile_of;  // device key -> profile
  for (const auto& [profile, ds] : devices) {
    for (const WorkloadDevice& d : ds) profile_of[LendKey(d)] = profile;
  }
  for (const Loan& l : loans) {
    if (l.gone) continue;
    for (const WorkloadDevice& d : l.w->status.devices) {
      used[LendKey(d)] += slots;
      if (l.told) ++coming[profile_of[LendKey(d)]];
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
      if (used[LendKey(d)] < slots) got.push_back(d);
    }
    return static_cast<int64_t>(got.size()) == count ? got : std::vector<WorkloadDevice>{};
  };
  // Lent devices of a profile not told to come back yet.
  auto untold_lent = [&](const std::string& profile) {
    int64_t n = 0;
    for (const Loan& l : loans) {
      if (l.gone || l.told) continue;
      for (const WorkloadDevice& d : l.w->status.devices) n += profile_of[LendKey(d)] == profile ? 1 : 0;
    }
    return n;
  };
  auto free_devices = [&](const std::string& profile) {
    std::vector<WorkloadDevice> free;
    for (const WorkloadDevice& d : devices[profile]) {
      if (used[LendKey(d)] < slots) free.push_back(d);
    }
    return free;
  };
  // Takes lent devices back for pending workload `s`: the devices already coming back count
  // first, then every borrower on as many more as it needs is told now, in this one pass; its
  // free devices wait for it too (later work in this decision does not take them). False when
  // that cannot make it fit: nobody is told.
  auto take_back = [&](size_t s, const std::string& profile) {
    const model::Workload& w = *seats[s].w;
    const std::vector<WorkloadDevice> free = free_devices(profile);
    int64_t need = w.spec.count - static_cast<int64_t>(free.size());
    if (loans.empty() || need <= 0) return false;
    const int64_t from_coming = std::min(need, coming[profile]);
    if (need - from_coming > untold_lent(profile)) return false;
    coming[profile] -= from_coming;
    need -= from_coming;
    for (size_t l = 0; l < loans.size() && need > 0; ++l) {
      if (loans[l].gone || loans[l].told || loans[l].w->status.devices.empty() ||
          profile_of[LendKey(loans[l].w->status.devices.front())] != profile) {
        continue;
      }
      const int64_t n = static_cast<int64_t>(loans[l].w->status.devices.size());
      reclaim(l, fmt::format("pool {} of project {} needs its {} device(s) back for workload {}", pool_name,
                             pool->metadata.ns, profile, w.metadata.name));
      // What it frees beyond this workload's need comes back for the next one.
      coming[profile] += std::max<int64_t>(0, n - need);
      need -= n;
    }
    for (const WorkloadDevice& d : free) used[LendKey(d)] = slots;
    wait(s, "Reclaiming",
         fmt::format("waiting for lent {} device(s) of pool {} to come back (at most the reclaim grace, {} s)", profile,
                     pool_name, grace));
    return true;
  };
  for (size_t s : pending) {
    const model::Workload& w = *seats[s].w;
    const std::string profile = model::ProfileOfResource(w.spec.resource);
    std::vector<WorkloadDevice> got = pick(profile, w.spec.count);
    // Lent devices come back before the pool's own batch work is preempted.
    if (got.empty() && take_back(s, profile)) continue;
    if (got.empty() && w.spec.priority == model::PriorityClass::kInference) {
      // Preempt batch work of this profile, newest first, until the workload fits (with the lent
      // devices taken back, when they are needed too).
      std::vector<size_t> victims;
      for (size_t v = 0; v < seats.size(); ++v) {
        if (seats[v].phase == WorkloadPhase::kRunning && seats[v].w->spec.priority != model::PriorityClass::kInference &&
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
      // Only preempt when that is enough: count the distinct devices that would have a free
      // slot once every victim is gone, and the lent ones, first (a workload takes distinct
      // devices; counting slots would preempt for a workload that still cannot start, and the
      // victims would start again and be preempted again, forever).
      const int64_t lent = untold_lent(profile) + coming[profile];
      std::map<std::string, int64_t> victim_use;
      for (size_t v : victims) {
        for (const WorkloadDevice& d : seats[v].devices) ++victim_use[LendKey(d)];
      }
      int64_t reachable = lent;
      for (const WorkloadDevice& d : devices[profile]) reachable += used[LendKey(d)] - victim_use[LendKey(d)] < slots ? 1 : 0;
      for (size_t k = 0; k < victims.size() && got.empty() && reachable >= w.spec.count; ++k) {
        const size_t v = victims[k];
        for (const WorkloadDevice& d : seats[v].devices) --used[LendKey(d)];
        end(v, WorkloadPhase::kPending, "Preempted",
            fmt::format("preempted by inference workload {}; queued again", w.metadata.name));
        got = pick(profile, w.spec.count);
        if (lent > 0 && static_cast<int64_t>(free_devices(profile).size()) + lent >= w.spec.count) break;
      }
      if (got.empty() && take_back(s, profile)) continue;
    }
    if (got.empty()) {
      const std::string msg =
          fmt::format("no free {} device in pool {} ({} slot(s) each); queued", profile, pool_name, slots);
      // A preempted workload keeps saying so while it waits.
      if (seats[s].reason != "Preempted") wait(s, "Queued", msg);
      continue;
    }
    for (const WorkloadDevice& d : got) ++used[LendKey(d)];
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
