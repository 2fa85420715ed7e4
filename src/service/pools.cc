#include "service/pools.h"

#include <algorithm>
#include <atomic>

#include "catalog/catalog.h"
#include "common/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "store/objects.h"

namespace gpuaas::service {
namespace {

using model::Condition;
using model::ConditionStatus;
using model::GpuPool;

std::string PoolRef(const GpuPool& p) {
  return fmt::format("gpupools/{}/{}", p.metadata.ns, p.metadata.name);
}

// Whole GPUs and MIG compute slices a set of items asks for, by model.
void AddDemand(const std::vector<model::PoolItem>& items, std::map<std::string, int64_t>& full,
               std::map<std::string, int64_t>& slices) {
  for (const model::PoolItem& i : items) {
    const catalog::GpuModel* m = catalog::FindModel(i.model);
    if (m == nullptr) continue;
    const std::string name(m->name);
    if (i.profile == catalog::kFullProfile) {
      full[name] += i.count;
    } else if (const catalog::MigProfile* p = catalog::FindProfile(*m, i.profile)) {
      slices[name] += i.count * p->compute_slices;
    }
  }
}

}  // namespace

absl::Status PoolService::Record(store::Txn& tx, const std::string& user, std::string action,
                                 std::string object, std::string detail) {
  nlohmann::json j = {{"apiVersion", "gpuaas.io/v1"},
                      {"kind", kAuditKind},
                      {"time", FormatTime(clock_.Now())},
                      {"user", user},
                      {"action", std::move(action)},
                      {"object", std::move(object)},
                      {"detail", std::move(detail)}};
  // Named by revision, then a process-wide counter for events of the same transaction, so that
  // names sort in log order.
  static std::atomic<uint64_t> seq{0};
  const std::string name = fmt::format("{:016}-{:06}", tx.revision(), seq++ % 1000000);
  j["metadata"] = {{"name", name}};
  return tx.Put({std::string(kAuditKind), "", name}, "", j.dump(), store::kMustNotExist);
}

absl::StatusOr<model::Project> PoolService::CreateProject(model::Project p, const std::string& user) {
  p.metadata.ns.clear();
  p.status = {};
  RETURN_IF_ERROR(model::ValidateProject(p));
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    absl::Status s = store::CreateObject(tx, p, clock_.Now());
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(fmt::format("projects \"{}\" already exists", p.metadata.name));
    }
    RETURN_IF_ERROR(s);
    return Record(tx, user, "CreateProject", "projects/" + p.metadata.name, p.spec.display_name);
  }));
  return p;
}

absl::StatusOr<GpuPool> PoolService::CreatePool(GpuPool pool, const std::string& user) {
  pool.status = {};
  RETURN_IF_ERROR(model::ValidatePool(pool));
  // Normalise model names to the catalogue's spelling.
  for (model::PoolItem& i : pool.spec.items) i.model = std::string(catalog::FindModel(i.model)->name);

  // More than the whole fleet could ever hold is refused now rather than waiting forever.
  const std::map<std::string, int64_t> fleet = fleet_();
  for (const model::PoolItem& i : pool.spec.items) {
    const catalog::GpuModel* m = catalog::FindModel(i.model);
    auto it = fleet.find(i.model);
    const int64_t gpus = it == fleet.end() ? 0 : it->second;
    const int64_t per_gpu = i.profile == catalog::kFullProfile ? 1 : catalog::FindProfile(*m, i.profile)->max_count;
    if (i.count > gpus * per_gpu) {
      return absl::ResourceExhaustedError(fmt::format(
          "{} x {}/{} is more than the whole fleet could ever hold: it has {} {} GPU(s), room for {}",
          i.count, i.model, i.profile, gpus, i.model, gpus * per_gpu));
    }
  }
  pool.status.conditions = {{std::string(model::kApproved), ConditionStatus::kUnknown,
                             "AwaitingApproval", "an operator must approve or reject the pool",
                             clock_.Now(), 1}};
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::Project> project,
                     store::GetObject<model::Project>(tx, "", pool.metadata.ns));
    if (!project) {
      return absl::NotFoundError(fmt::format("projects \"{}\" not found", pool.metadata.ns));
    }
    if (project->spec.quota) {
      std::map<std::string, int64_t> full, slices;
      ASSIGN_OR_RETURN(std::vector<GpuPool> pools, store::ListObjects<GpuPool>(tx, pool.metadata.ns));
      for (const GpuPool& other : pools) {
        if (model::PoolIsLive(other)) AddDemand(other.spec.items, full, slices);
      }
      std::map<std::string, int64_t> want_full, want_slices;
      AddDemand(pool.spec.items, want_full, want_slices);
      auto check = [&](const std::map<std::string, int64_t>& want, const std::map<std::string, int64_t>& have,
                       const std::map<std::string, int64_t>& quota, std::string_view what) -> absl::Status {
        for (const auto& [model, n] : want) {
          auto q = quota.find(model);
          if (q == quota.end()) continue;  // no limit set for this model
          const int64_t used = have.count(model) ? have.at(model) : 0;
          if (used + n > q->second) {
            return absl::ResourceExhaustedError(fmt::format(
                "project {} quota exceeded: {} {} of {} asked, {} in use by its pools, quota {}",
                pool.metadata.ns, n, what, model, used, q->second));
          }
        }
        return absl::OkStatus();
      };
      RETURN_IF_ERROR(check(want_full, full, project->spec.quota->full_gpus, "full GPUs"));
      RETURN_IF_ERROR(check(want_slices, slices, project->spec.quota->mig_compute_slices, "MIG compute slices"));
    }
    absl::Status s = store::CreateObject(tx, pool, clock_.Now());
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(fmt::format("gpupools \"{}\" already exists in project {}",
                                                  pool.metadata.name, pool.metadata.ns));
    }
    RETURN_IF_ERROR(s);
    std::string items;
    for (const model::PoolItem& i : pool.spec.items) {
      items += fmt::format("{}{} x {}/{}", items.empty() ? "" : ", ", i.count, i.model, i.profile);
    }
    return Record(tx, user, "CreatePool", PoolRef(pool), items);
  }));
  return pool;
}

absl::StatusOr<GpuPool> PoolService::Approve(const std::string& ns, const std::string& name,
                                             bool approve, const std::string& reason,
                                             const std::string& user) {
  GpuPool pool;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, ns, name));
    if (!cur) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found in project {}", name, ns));
    if (cur->status.approval) {
      return absl::FailedPreconditionError(fmt::format(
          "gpupools \"{}\" was already {} by {}; {}", name,
          cur->status.approval->approved ? "approved" : "rejected", cur->status.approval->user,
          cur->status.approval->approved ? "release it to end it" : "a rejection is final"));
    }
    const Time now = clock_.Now();
    cur->status.approval = GpuPool::Approval{approve, reason, user, now};
    model::SetCondition(cur->status.conditions,
                        {std::string(model::kApproved),
                         approve ? ConditionStatus::kTrue : ConditionStatus::kFalse,
                         approve ? "Approved" : "Rejected",
                         reason.empty() ? (approve ? "approved" : "rejected") : reason, now,
                         cur->metadata.generation});
    RETURN_IF_ERROR(store::UpdateObject(tx, *cur));
    pool = *cur;
    return Record(tx, user, approve ? "Approve" : "Reject", PoolRef(*cur), reason);
  }));
  return pool;
}

absl::StatusOr<GpuPool> PoolService::Release(const std::string& ns, const std::string& name,
                                             const std::string& user) {
  GpuPool pool;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<GpuPool> cur, store::GetObject<GpuPool>(tx, ns, name));
    if (!cur) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found in project {}", name, ns));
    if (!cur->status.approval || !cur->status.approval->approved) {
      return absl::FailedPreconditionError(fmt::format(
          "gpupools \"{}\" is not approved; only an approved pool can be released", name));
    }
    const Condition* released = model::FindCondition(cur->status.conditions, model::kReleased);
    if (released != nullptr) {
      return absl::FailedPreconditionError(fmt::format("gpupools \"{}\" is already {}", name,
                                                       released->status == ConditionStatus::kTrue ? "released" : "being released"));
    }
    model::SetCondition(cur->status.conditions,
                        {std::string(model::kReleased), ConditionStatus::kFalse, "Releasing",
                         fmt::format("release requested by {}", user), clock_.Now(),
                         cur->metadata.generation});
    RETURN_IF_ERROR(store::UpdateObject(tx, *cur));
    pool = *cur;
    return Record(tx, user, "Release", PoolRef(*cur), "");
  }));
  return pool;
}

absl::StatusOr<model::Workload> PoolService::CreateWorkload(model::Workload w, const std::string& user) {
  w.status = {};
  RETURN_IF_ERROR(model::ValidateWorkload(w));
  w.status.reason = "Queued";
  w.status.message = "waiting for admission onto the pool's devices";
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<GpuPool> pool, store::GetObject<GpuPool>(tx, w.metadata.ns, w.spec.pool));
    if (!pool) {
      return absl::NotFoundError(fmt::format("gpupools \"{}\" not found in project {}", w.spec.pool, w.metadata.ns));
    }
    if (!model::PoolIsLive(*pool)) {
      return absl::FailedPreconditionError(fmt::format("gpupools \"{}\" is rejected or released", w.spec.pool));
    }
    const std::string profile = model::ProfileOfResource(w.spec.resource);
    const bool in_pool = std::any_of(pool->spec.items.begin(), pool->spec.items.end(),
                                     [&](const model::PoolItem& i) { return i.profile == profile; });
    if (!in_pool) {
      return absl::InvalidArgumentError(fmt::format(
          "spec.resources: pool {} has no {} devices", w.spec.pool, profile));
    }
    absl::Status s = store::CreateObject(tx, w, clock_.Now());
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(fmt::format("workloads \"{}\" already exists", w.metadata.name));
    }
    RETURN_IF_ERROR(s);
    return Record(tx, user, "CreateWorkload", fmt::format("workloads/{}/{}", w.metadata.ns, w.metadata.name),
                  fmt::format("{} x {} on pool {}", w.spec.count, w.spec.resource, w.spec.pool));
  }));
  return w;
}

absl::StatusOr<model::Workload> PoolService::DeleteWorkload(const std::string& ns, const std::string& name,
                                                            const std::string& user) {
  model::Workload w;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::Workload> cur, store::GetObject<model::Workload>(tx, ns, name));
    if (!cur) return absl::NotFoundError(fmt::format("workloads \"{}\" not found in project {}", name, ns));
    if (cur->status.phase == model::WorkloadPhase::kSucceeded || cur->status.phase == model::WorkloadPhase::kEvicted) {
      return absl::FailedPreconditionError(fmt::format("workloads \"{}\" has already ended", name));
    }
    RETURN_IF_ERROR(EndRun(tx, *cur, model::WorkloadPhase::kSucceeded, "Deleted", "deleted by " + user, clock_.Now()));
    RETURN_IF_ERROR(store::UpdateObject(tx, *cur));
    w = *cur;
    return Record(tx, user, "DeleteWorkload", fmt::format("workloads/{}/{}", ns, name), "");
  }));
  return w;
}

absl::Status EndRun(store::Txn& tx, model::Workload& w, model::WorkloadPhase phase, std::string reason,
                    std::string message, Time now) {
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

absl::StatusOr<std::vector<std::pair<int64_t, AuditEvent>>> PoolService::Audit(int64_t after, size_t limit) {
  ASSIGN_OR_RETURN(std::vector<store::Record> records, store_.List(std::string(kAuditKind), ""));
  std::vector<std::pair<int64_t, AuditEvent>> out;
  for (const store::Record& r : records) {
    if (r.resource_version <= after) continue;
    nlohmann::json j = nlohmann::json::parse(r.data, nullptr, false);
    if (!j.is_object()) continue;
    AuditEvent e;
    e.time = ParseTime(j.value("time", "")).value_or(Time{});
    e.user = j.value("user", "");
    e.action = j.value("action", "");
    e.object = j.value("object", "");
    e.detail = j.value("detail", "");
    out.emplace_back(r.resource_version, std::move(e));
    if (limit && out.size() == limit) break;
  }
  return out;
}

}  // namespace gpuaas::service
