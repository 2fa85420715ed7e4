#include "model/pool.h"

#include <algorithm>
#include <map>
#include <set>

#include "catalog/catalog.h"
#include "common/clock.h"
#include "common/strings.h"
#include "fmt/format.h"

namespace gpuaas::model {

absl::Status ValidateProject(const Project& p) {
  if (absl::Status s = ValidateName(p.metadata.name); !s.ok()) return s;
  if (p.metadata.name.find('.') != std::string::npos || p.metadata.name.size() > 63) {
    return absl::InvalidArgumentError(fmt::format(
        "metadata.name: \"{}\" must be a DNS label (it names a namespace): letters, digits, '-', "
        "at most 63", p.metadata.name));
  }
  if (p.spec.quota) {
    for (const auto* m : {&p.spec.quota->full_gpus, &p.spec.quota->mig_compute_slices, &p.spec.quota->borrowing}) {
      for (const auto& [model, n] : *m) {
        if (catalog::FindModel(model) == nullptr) {
          return absl::InvalidArgumentError(
              fmt::format("spec.quota: unknown GPU model \"{}\" (see gpuaas catalog models)", model));
        }
      }
    }
  }
  if (p.spec.display_name.size() > 256 || !IsValidUtf8(p.spec.display_name)) {
    return absl::InvalidArgumentError("spec.displayName: at most 256 bytes of UTF-8");
  }
  if (p.spec.budget && (p.spec.budget->amount_micros > 1'000'000'000'000'000 || p.spec.budget->gpu_hours > 1'000'000'000)) {
    return absl::InvalidArgumentError("spec.budget: at most 10^18 micro-units and 10^9 GPU-hours a month");
  }
  if (absl::Status s = ValidateAnnotations(p.metadata.annotations); !s.ok()) return s;
  return ValidateLabels(p.metadata.labels);
}

absl::Status ValidatePool(const GpuPool& p) {
  if (absl::Status s = ValidateName(p.metadata.name); !s.ok()) return s;
  if (p.metadata.ns.empty()) return absl::InvalidArgumentError("metadata.namespace: required (the project)");
  if (p.spec.items.empty()) return absl::InvalidArgumentError("spec.items: at least one item is required");
  if (p.spec.release_requested) {
    return absl::InvalidArgumentError(
        "spec.releaseRequested: set by the release subresource once the pool is approved, never by a new pool");
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < p.spec.items.size(); ++i) {
    const PoolItem& item = p.spec.items[i];
    const std::string where = fmt::format("spec.items[{}]", i);
    const catalog::GpuModel* m = catalog::FindModel(item.model);
    if (m == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{}.model: unknown GPU model \"{}\" (see gpuaas catalog models)", where, item.model));
    }
    if (item.profile != catalog::kFullProfile) {
      if (!m->mig_capable) {
        return absl::InvalidArgumentError(fmt::format(
            "{}.profile: {} does not support MIG; use \"full\"", where, m->name));
      }
      if (catalog::FindProfile(*m, item.profile) == nullptr) {
        std::string names;
        for (const catalog::MigProfile& mp : m->profiles) names += (names.empty() ? "" : ", ") + std::string(mp.name);
        return absl::InvalidArgumentError(fmt::format(
            "{}.profile: {} has no MIG profile \"{}\"; it has full, {}", where, m->name, item.profile, names));
      }
    }
    if (item.count < 1 || item.count > 100000) {
      return absl::InvalidArgumentError(fmt::format("{}.count: must be between 1 and 100000", where));
    }
    if (!seen.insert({std::string(m->name), item.profile}).second) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}/{} is listed twice; add the counts", where, m->name, item.profile));
    }
  }
  if (p.spec.time_slicing_replicas < 0 || p.spec.time_slicing_replicas > 64) {
    return absl::InvalidArgumentError("spec.sharing.timeSlicing.replicas: must be between 1 and 64");
  }
  if (p.spec.start_time && p.spec.end_time && *p.spec.end_time <= *p.spec.start_time) {
    return absl::InvalidArgumentError(fmt::format("spec.endTime: {} is not after spec.startTime {}",
                                                  FormatTime(*p.spec.end_time), FormatTime(*p.spec.start_time)));
  }
  if (p.spec.lending) {
    if (p.spec.lending->idle_after_seconds < 0 || p.spec.lending->idle_after_seconds > 30 * 86400) {
      return absl::InvalidArgumentError("spec.lending.idleAfterSeconds: must be between 0 and 2592000 (30 days)");
    }
    if (p.spec.lending->reclaim_grace_seconds < 0 || p.spec.lending->reclaim_grace_seconds > kMaxReclaimGraceSeconds) {
      return absl::InvalidArgumentError(fmt::format(
          "spec.lending.reclaimGraceSeconds: must be between 0 and {}", kMaxReclaimGraceSeconds));
    }
  }
  if (absl::Status s = ValidateAnnotations(p.metadata.annotations); !s.ok()) return s;
  return ValidateLabels(p.metadata.labels);
}

std::vector<GpuPool> PoolsWithLoans(std::string_view project, std::vector<GpuPool> pools, std::span<const Loan> loans,
                                    const std::function<const GpuPool*(std::string_view, std::string_view)>& lender_pool,
                                    Time now) {
  std::erase_if(pools, [&](const GpuPool& p) { return PoolBeforeStart(p, now); });
  auto key = [](const WorkloadDevice& d) { return d.gpu_uuid + "/" + d.instance_uuid; };
  std::set<std::string> lent;                       // this project's devices lent now
  std::map<std::string, GpuPool> borrowed;          // lending pool "ns/name" -> what it lends us
  for (const Loan& l : loans) {
    if (l.spec.end) continue;
    if (l.spec.lender == project) {
      for (const WorkloadDevice& d : l.spec.devices) lent.insert(l.spec.pool + "|" + key(d));
    }
    if (l.spec.borrower != project) continue;
    const GpuPool* from = lender_pool(l.spec.lender, l.spec.pool);
    if (from == nullptr || !PoolIsLive(*from)) continue;
    GpuPool& b = borrowed[l.spec.lender + "/" + l.spec.pool];
    if (b.metadata.name.empty()) {
      b.metadata.ns = std::string(project);
      b.metadata.name = fmt::format("loan.{}.{}", l.spec.lender, l.spec.pool);
      b.metadata.labels[std::string(kLoanOfLabel)] = NodePoolValue(*from);
      b.spec.cluster = from->spec.cluster;
      b.status.approval = GpuPool::Approval{true, "borrowed", "", l.spec.start};
      b.status.conditions = {{std::string(kReady), ConditionStatus::kTrue, "Borrowed", "", l.spec.start, 0}};
    }
    for (const WorkloadDevice& d : l.spec.devices) {
      for (const AllocatedDevice& a : from->status.allocation) {
        const bool full = a.profile == catalog::kFullProfile;
        if (a.gpu_uuid != d.gpu_uuid || (!full && a.instance_uuid != d.instance_uuid)) continue;
        b.status.allocation.push_back(a);
        auto item = std::find_if(b.spec.items.begin(), b.spec.items.end(), [&](const PoolItem& i) {
          return i.model == l.spec.model && i.profile == a.profile;
        });
        if (item == b.spec.items.end()) {
          b.spec.items.push_back({l.spec.model, a.profile, 1});
        } else {
          ++item->count;
        }
      }
    }
  }
  if (!lent.empty()) {
    for (GpuPool& p : pools) {
      std::erase_if(p.status.allocation, [&](const AllocatedDevice& a) {
        const WorkloadDevice d{a.gpu_uuid, a.profile == catalog::kFullProfile ? "" : a.instance_uuid};
        return lent.contains(p.metadata.name + "|" + key(d));
      });
    }
  }
  for (auto& [k, b] : borrowed) pools.push_back(std::move(b));
  return pools;
}

bool IsBorrower(const Workload& w) { return w.spec.priority == PriorityClass::kPreemptible && w.spec.pool.empty(); }

std::string ProfileOfResource(std::string_view resource) {
  if (resource == "nvidia.com/gpu") return std::string(catalog::kFullProfile);
  constexpr std::string_view kMig = "nvidia.com/mig-";
  if (resource.substr(0, kMig.size()) != kMig || resource.size() == kMig.size()) return "";
  std::string p(resource.substr(kMig.size()));
  // The device plugin writes "+me" as ".me": "nvidia.com/mig-1g.18gb.me".
  if (p.size() > 3 && p.compare(p.size() - 3, 3, ".me") == 0) p.replace(p.size() - 3, 1, "+");
  return p;
}

absl::Status ValidateWorkload(const Workload& w) {
  if (absl::Status s = ValidateName(w.metadata.name); !s.ok()) return s;
  if (w.spec.pool.empty() && w.spec.priority != PriorityClass::kPreemptible) {
    return absl::InvalidArgumentError(
        "spec.pool: required (only a preemptible workload may name none, to borrow lent devices)");
  }
  if (!w.spec.model.empty()) {
    if (!w.spec.pool.empty()) {
      return absl::InvalidArgumentError("spec.model: only for a borrower (a preemptible workload without a pool)");
    }
    if (catalog::FindModel(w.spec.model) == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("spec.model: unknown GPU model \"{}\" (see gpuaas catalog models)", w.spec.model));
    }
  }
  if (ProfileOfResource(w.spec.resource).empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "spec.resource: \"{}\" is not a GPU resource; use nvidia.com/gpu or nvidia.com/mig-<profile>",
        w.spec.resource));
  }
  if (w.spec.count < 1 || w.spec.count > 64) return absl::InvalidArgumentError("spec.count: must be between 1 and 64");
  if (absl::Status s = ValidateAnnotations(w.metadata.annotations); !s.ok()) return s;
  return ValidateLabels(w.metadata.labels);
}

bool PoolReleaseRequested(const GpuPool& p) { return p.spec.release_requested.has_value(); }

std::optional<Time> PoolEnd(const GpuPool& p) {
  std::optional<Time> end = p.spec.end_time;
  if (p.spec.release_requested && (!end || p.spec.release_requested->time < *end)) end = p.spec.release_requested->time;
  return end;
}

bool PoolEnded(const GpuPool& p, Time now) {
  return PoolReleaseRequested(p) || (p.spec.end_time && now >= *p.spec.end_time);
}

bool PoolBeforeStart(const GpuPool& p, Time now) { return p.spec.start_time && now < *p.spec.start_time; }

const std::string& DeviceUuid(const AllocatedDevice& d) { return d.profile == catalog::kFullProfile ? d.gpu_uuid : d.instance_uuid; }

bool PoolIsLive(const GpuPool& p) {
  if (p.status.approval && !p.status.approval->approved) return false;
  const Condition* released = FindCondition(p.status.conditions, kReleased);
  return released == nullptr || released->status != ConditionStatus::kTrue;
}

std::map<std::string, std::map<std::string, int64_t>> DevicesByCluster(std::span<const GpuPool> pools) {
  std::map<std::string, std::map<std::string, int64_t>> out;
  for (const GpuPool& p : pools) {
    if (!PoolIsLive(p)) continue;
    for (const AllocatedDevice& d : p.status.allocation) ++out[d.cluster][catalog::ResourceName(d.profile)];
  }
  return out;
}

std::string NodePoolValue(const GpuPool& pool) {
  std::string v = fmt::format("{}.{}", pool.metadata.ns, pool.metadata.name);
  if (v.size() <= 63) return v;
  // FNV-1a: stable across builds and machines, unlike std::hash.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : v) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{}-{:012x}", v.substr(0, 50), h & 0xffffffffffffull);
}

std::map<std::string, std::map<std::string, WholeNodeOwner>> WholeNodeOwners(
    std::span<const GpuPool> pools, const std::map<std::string, int64_t>& gpus_by_node) {
  // NodeCapacity name -> pool index -> GPUs it has devices on.
  std::map<std::string, std::map<size_t, std::set<std::string>>> on_node;
  std::map<std::string, std::string> cluster_of;
  for (size_t i = 0; i < pools.size(); ++i) {
    if (!PoolIsLive(pools[i])) continue;
    for (const AllocatedDevice& d : pools[i].status.allocation) {
      on_node[d.node][i].insert(d.gpu_uuid);
      cluster_of[d.node] = d.cluster;
    }
  }
  std::map<std::string, std::map<std::string, WholeNodeOwner>> out;
  for (const auto& [node, by_pool] : on_node) {
    if (by_pool.size() != 1) continue;  // shared with another pool
    auto gpus = gpus_by_node.find(node);
    const auto& [index, held] = *by_pool.begin();
    if (gpus == gpus_by_node.end() || gpus->second <= 0 || static_cast<int64_t>(held.size()) != gpus->second) continue;
    const std::string& cluster = cluster_of[node];
    const std::string prefix = cluster + ".";
    out[cluster][node.starts_with(prefix) ? node.substr(prefix.size()) : node] =
        WholeNodeOwner{NodePoolValue(pools[index]), pools[index].spec.time_slicing_replicas};
  }
  return out;
}

}  // namespace gpuaas::model
