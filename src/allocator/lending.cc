#include "allocator/lending.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "allocator/admission.h"
#include "catalog/catalog.h"
#include "fmt/format.h"

namespace gpuaas::allocator {
namespace {

using model::WorkloadDevice;
using model::WorkloadPhase;

bool IsTrue(const model::GpuPool& p, std::string_view type) {
  const model::Condition* c = model::FindCondition(p.status.conditions, type);
  return c != nullptr && c->status == model::ConditionStatus::kTrue;
}
bool Ready(const model::GpuPool& p) { return IsTrue(p, model::kReady); }
bool Provisioned(const model::GpuPool& p) { return IsTrue(p, model::kProvisioned); }

}  // namespace

std::string LendKey(const WorkloadDevice& d) { return d.gpu_uuid + "/" + d.instance_uuid; }

std::vector<LendableDevice> Lendable(const LenderView& v, Time now, std::optional<Time>* next) {
  std::vector<LendableDevice> out;
  const model::GpuPool& pool = *v.pool;
  const int64_t grace = pool.spec.lending ? pool.spec.lending->reclaim_grace_seconds : kDefaultReclaimGraceSeconds;
  // A reservation lends everything until its start less the grace (its own work cannot run yet).
  const bool reserved = model::PoolBeforeStart(pool, now + std::chrono::seconds(grace));
  const bool lends = reserved || (pool.spec.lending && pool.spec.lending->enabled);
  if (!lends || !model::PoolIsLive(pool) || model::PoolEnded(pool, now) ||
      !(reserved ? Provisioned(pool) : Ready(pool))) {
    return out;
  }
  const Duration idle_after =
      reserved ? Duration::zero() : std::chrono::seconds(pool.spec.lending->idle_after_seconds);
  std::set<std::string> busy;
  std::set<std::string> waiting;  // profiles the pool's own work waits for
  for (const model::Workload* w : v.owner) {
    if (w->status.phase == WorkloadPhase::kRunning) {
      for (const WorkloadDevice& d : w->status.devices) busy.insert(LendKey(d));
    } else if (w->status.phase == WorkloadPhase::kPending) {
      waiting.insert(model::ProfileOfResource(w->spec.resource));
    }
  }
  for (const model::Workload* b : v.borrowers) {
    for (const WorkloadDevice& d : b->status.devices) busy.insert(LendKey(d));
  }
  for (const model::AllocatedDevice& a : pool.status.allocation) {
    const bool full = a.profile == catalog::kFullProfile;
    if (!full && a.instance_uuid.empty()) continue;  // the instance does not exist yet
    WorkloadDevice d{a.gpu_uuid, full ? "" : a.instance_uuid};
    const std::string key = LendKey(d);
    if (busy.contains(key) || waiting.contains(a.profile)) continue;
    auto it = v.last_used.find(key);
    const Time idle_from = std::max(v.ready_since, it == v.last_used.end() ? v.ready_since : it->second);
    if (idle_from + idle_after > now) {
      if (next != nullptr && (!*next || idle_from + idle_after < **next)) *next = idle_from + idle_after;
      continue;
    }
    auto m = v.model_of_gpu.find(a.gpu_uuid);
    if (m == v.model_of_gpu.end()) continue;  // a GPU the inventory no longer knows
    out.push_back({std::move(d), m->second, a.profile});
  }
  return out;
}

LendingDecision Lend(const std::vector<LenderView>& lenders, const std::vector<std::vector<LendableDevice>>& lendable,
                     const std::vector<const model::Workload*>& borrowers, const BorrowingState& state) {
  LendingDecision out;
  std::vector<std::vector<LendableDevice>> offer = lendable;
  // Waiting borrowers per project, oldest first.
  std::map<std::string, std::vector<size_t>> queue;
  for (size_t i = 0; i < borrowers.size(); ++i) {
    if (borrowers[i]->status.phase == WorkloadPhase::kPending) queue[borrowers[i]->metadata.ns].push_back(i);
  }
  for (auto& [project, q] : queue) {
    std::sort(q.begin(), q.end(), [&](size_t a, size_t b) {
      const model::Workload& x = *borrowers[a];
      const model::Workload& y = *borrowers[b];
      return std::tie(x.metadata.creation_timestamp, x.metadata.name) <
             std::tie(y.metadata.creation_timestamp, y.metadata.name);
    });
  }
  std::map<std::string, std::map<std::string, int64_t>> held = state.held;
  auto held_total = [&](const std::string& project) {
    int64_t n = 0;
    for (const auto& [m, c] : held[project]) n += c;
    return n;
  };
  auto recent = [&](const std::string& project) {
    auto it = state.recent_gpu_seconds.find(project);
    return it == state.recent_gpu_seconds.end() ? 0.0 : it->second;
  };
  std::map<std::string, size_t> next;  // project -> next borrower to try
  while (true) {
    // The project to serve: least recent borrowing, then fewest devices now, then the name.
    const std::string* pick = nullptr;
    for (const auto& [project, q] : queue) {
      if (next[project] >= q.size()) continue;
      if (pick == nullptr ||
          std::make_tuple(recent(project), held_total(project), project) <
              std::make_tuple(recent(*pick), held_total(*pick), *pick)) {
        pick = &project;
      }
    }
    if (pick == nullptr) break;
    const std::string project = *pick;
    const size_t bi = queue[project][next[project]++];
    const model::Workload& b = *borrowers[bi];
    const std::string profile = model::ProfileOfResource(b.spec.resource);
    // The pool of another project with room for all of it; of those, the one with the fewest
    // lendable devices (the others stay whole for larger borrowers).
    std::optional<size_t> best;
    int64_t best_count = 0;
    std::string best_model;
    std::string refusal;
    for (size_t l = 0; l < lenders.size(); ++l) {
      if (lenders[l].pool->metadata.ns == project) continue;
      std::map<std::string, int64_t> by_model;
      for (const LendableDevice& d : offer[l]) {
        if (d.profile != profile) continue;
        if (!b.spec.model.empty() && catalog::FindModel(b.spec.model) != catalog::FindModel(d.model)) continue;
        ++by_model[d.model];
      }
      for (const auto& [m, n] : by_model) {
        if (n < b.spec.count) continue;
        auto lim = state.limits.find(project);
        if (lim != state.limits.end()) {
          auto cap = lim->second.find(m);
          if (cap != lim->second.end() && held[project][m] + b.spec.count > cap->second) {
            refusal = fmt::format("project {} may borrow at most {} {} device(s) at once and holds {}", project,
                                  cap->second, m, held[project][m]);
            continue;
          }
        }
        if (!best || n < best_count) {
          best = l;
          best_count = n;
          best_model = m;
        }
      }
    }
    if (!best) {
      out.waits.push_back({bi, !refusal.empty()
                                   ? refusal
                                   : fmt::format("no {} lent {} device(s) in one pool of another project; queued",
                                                 b.spec.count, b.spec.model.empty() ? profile
                                                                                   : b.spec.model + "/" + profile)});
      continue;
    }
    Borrowing loan{bi, *best, best_model, profile, {}};
    std::vector<LendableDevice>& o = offer[*best];
    for (auto it = o.begin(); it != o.end() && static_cast<int64_t>(loan.devices.size()) < b.spec.count;) {
      if (it->profile == profile && it->model == best_model) {
        loan.devices.push_back(it->device);
        it = o.erase(it);
      } else {
        ++it;
      }
    }
    held[project][best_model] += b.spec.count;
    out.loans.push_back(std::move(loan));
  }
  return out;
}

}  // namespace gpuaas::allocator
