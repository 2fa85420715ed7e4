#include "controller/inventory.h"

#include <map>
#include <type_traits>

#include "catalog/catalog.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::Condition;
using model::ConditionStatus;

// Profile names as label values and name parts: '+' is not allowed there ("1g.18gb+me").
std::string NameSafe(std::string_view profile) {
  std::string p(profile);
  for (char& c : p) {
    if (c == '+') c = '-';
  }
  return p;
}

// Carries over what the store owns (uid, versions, creation time) and the transition times of
// conditions whose status did not change, so that an unchanged object encodes identically.
template <typename T>
void AdoptStored(T& desired, const T& stored) {
  desired.metadata.uid = stored.metadata.uid;
  desired.metadata.resource_version = stored.metadata.resource_version;
  desired.metadata.generation = stored.metadata.generation;
  desired.metadata.creation_timestamp = stored.metadata.creation_timestamp;
  if constexpr (requires { desired.status.conditions; }) {
    for (Condition& c : desired.status.conditions) {
      if (const Condition* old = model::FindCondition(stored.status.conditions, c.type);
          old != nullptr && old->status == c.status) {
        c.last_transition_time = old->last_transition_time;
      }
    }
  }
}

// The telemetry controller's conditions (MemoryErrors, ResetRequired, Overheating) are not the
// inventory's to drop: they are carried over and the Healthy summary is made from both views.
void KeepTelemetryConditions(model::GpuCapacity& desired, const model::GpuCapacity& stored, Time now) {
  const bool driver_healthy = model::DriverReportedHealthy(desired);
  for (const Condition& c : stored.status.conditions) {
    if (c.type == model::kGpuMemoryErrors || c.type == model::kGpuResetRequired || c.type == model::kGpuOverheating) {
      model::SetCondition(desired.status.conditions, c);
    }
  }
  model::SummarizeGpuHealth(desired, driver_healthy, now);
}

// Makes the store's objects of kind T in `cluster` equal to `desired`.
template <typename T, typename ClusterOf>
absl::Status Reconcile(store::Txn& tx, std::vector<T>& desired, std::string_view cluster,
                       ClusterOf cluster_of, Time now, SyncStats& stats) {
  ASSIGN_OR_RETURN(std::vector<T> stored, store::ListObjects<T>(tx));
  std::map<std::string, const T*> by_name;
  for (const T& s : stored) {
    if (cluster_of(s) == cluster) by_name[s.metadata.name] = &s;
  }
  for (T& d : desired) {
    auto it = by_name.find(d.metadata.name);
    if (it == by_name.end()) {
      RETURN_IF_ERROR(store::CreateObject(tx, d, now));
      ++stats.created;
      continue;
    }
    if constexpr (std::is_same_v<T, model::GpuCapacity>) KeepTelemetryConditions(d, *it->second, now);
    AdoptStored(d, *it->second);
    if (model::Encode(d) == model::Encode(*it->second)) {
      ++stats.unchanged;
    } else {
      RETURN_IF_ERROR(store::UpdateObject(tx, d));
      ++stats.updated;
    }
    by_name.erase(it);
  }
  for (const auto& [name, obj] : by_name) {
    RETURN_IF_ERROR(store::DeleteObject<T>(tx, "", name, obj->metadata.resource_version));
    ++stats.deleted;
  }
  return absl::OkStatus();
}

}  // namespace

Inventory BuildInventory(const cluster::ObservedCluster& oc, Time now) {
  Inventory inv;
  inv.cluster.metadata.name = oc.name;
  inv.cluster.spec = {oc.display_name, oc.driver, oc.region};
  inv.cluster.status.nodes = static_cast<int64_t>(oc.nodes.size());
  model::SetCondition(inv.cluster.status.conditions,
                      {"Reachable", ConditionStatus::kTrue, "Observed", "", now, 0});
  for (const cluster::ObservedNode& on : oc.nodes) {
    model::NodeCapacity node;
    node.metadata.name = fmt::format("{}.{}", oc.name, on.name);
    absl::StatusOr<const catalog::GpuModel*> found = catalog::ModelFromProduct(on.gpu_product);
    const catalog::GpuModel* m = found.ok() ? *found : nullptr;
    const std::string model_name = m ? std::string(m->name) : "";
    node.metadata.labels = {{std::string(kLabelCluster), oc.name},
                            {std::string(kLabelNode), on.name}};
    if (m) node.metadata.labels[std::string(kLabelModel)] = model_name;
    node.spec = {oc.name, on.name, model_name, on.gpu_product,
                 static_cast<int64_t>(on.gpus.size()), on.cpu_cores, on.memory_bytes,
                 on.schedulable};
    model::SetCondition(
        node.status.conditions,
        m ? Condition{"Recognized", ConditionStatus::kTrue, "KnownGpuModel", "", now, 0}
          : Condition{"Recognized", ConditionStatus::kFalse, "UnknownGpuModel",
                      std::string(found.status().message()), now, 0});

    // Per-node device counts by profile ("full" for whole GPUs): {count, allocated}.
    std::map<std::string, std::pair<int64_t, int64_t>> devices;
    for (const cluster::ObservedGpu& og : on.gpus) {
      model::GpuCapacity g;
      g.metadata.name = ToLower(og.uuid);
      g.metadata.labels = {{std::string(kLabelCluster), oc.name},
                           {std::string(kLabelNode), on.name},
                           {std::string(kLabelMigMode), og.mig_enabled ? "enabled" : "disabled"}};
      if (m) g.metadata.labels[std::string(kLabelModel)] = model_name;
      g.spec = {oc.name, node.metadata.name, og.uuid, og.index, model_name, on.gpu_product,
                og.memory_mib, m != nullptr && m->mig_capable};
      g.status.mig_mode = og.mig_enabled ? model::MigMode::kEnabled : model::MigMode::kDisabled;
      model::SummarizeGpuHealth(g, og.healthy, now);
      node.status.physical_gpus += 1;
      node.status.physical_gpu_memory_mib += og.memory_mib;
      if (og.mig_enabled) {
        node.status.mig_enabled_gpus += 1;
        for (const cluster::ObservedMigInstance& mi : og.mig_instances) {
          g.status.mig_instances.push_back(
              {mi.profile, mi.start, mi.size, mi.uuid, mi.in_use});
          auto& d = devices[mi.profile];
          d.first += 1;
          d.second += mi.in_use ? 1 : 0;
        }
        std::sort(g.status.mig_instances.begin(), g.status.mig_instances.end(),
                  [](const model::MigInstance& a, const model::MigInstance& b) {
                    return a.start < b.start;
                  });
      } else {
        g.status.allocated = og.in_use;
        auto& d = devices[std::string(catalog::kFullProfile)];
        d.first += 1;
        d.second += og.in_use ? 1 : 0;
      }
      inv.gpus.push_back(std::move(g));
    }
    for (const auto& [profile, counts] : devices) {
      const std::string resource = catalog::ResourceName(profile);
      node.status.allocatable[resource] = counts.first;
      if (counts.second > 0) node.status.allocated[resource] = counts.second;
      model::SpecAndCount s;
      s.metadata.name = fmt::format("{}.{}", node.metadata.name, NameSafe(profile));
      s.metadata.labels = {{std::string(kLabelCluster), oc.name},
                           {std::string(kLabelNode), on.name},
                           {std::string(kLabelProfile), NameSafe(profile)}};
      if (m) s.metadata.labels[std::string(kLabelModel)] = model_name;
      s.spec = {oc.name, node.metadata.name, model_name, profile, resource};
      s.status = {counts.first, counts.second, counts.first - counts.second};
      inv.specs.push_back(std::move(s));
    }
    inv.cluster.status.gpus += static_cast<int64_t>(on.gpus.size());
    inv.nodes.push_back(std::move(node));
  }
  return inv;
}

absl::StatusOr<SyncStats> InventoryController::Sync(cluster::ClusterDriver& driver) {
  const Time now = clock_.Now();
  const std::string name(driver.ClusterName());
  absl::StatusOr<cluster::ObservedCluster> observed = driver.Observe();
  SyncStats stats;
  if (!observed.ok()) {
    log::Warn("cluster {}: cannot observe: {}", name, observed.status().ToString());
    RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
      ASSIGN_OR_RETURN(std::optional<model::Cluster> c,
                       store::GetObject<model::Cluster>(tx, "", name));
      if (!c) return absl::OkStatus();
      if (!model::SetCondition(c->status.conditions,
                               {"Reachable", ConditionStatus::kFalse, "ObserveFailed",
                                std::string(observed.status().message()), now, 0})) {
        return absl::OkStatus();
      }
      ++stats.updated;
      return store::UpdateObject(tx, *c);
    }));
    return stats;
  }
  Inventory inv = BuildInventory(*observed, now);
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    stats = SyncStats{};
    std::vector<model::Cluster> clusters = {inv.cluster};
    RETURN_IF_ERROR(Reconcile(tx, clusters, name,
                              [](const model::Cluster& c) { return c.metadata.name; }, now, stats));
    RETURN_IF_ERROR(Reconcile(tx, inv.nodes, name,
                              [](const model::NodeCapacity& n) { return n.spec.cluster; }, now, stats));
    RETURN_IF_ERROR(Reconcile(tx, inv.gpus, name,
                              [](const model::GpuCapacity& g) { return g.spec.cluster; }, now, stats));
    return Reconcile(tx, inv.specs, name,
                     [](const model::SpecAndCount& s) { return s.spec.cluster; }, now, stats);
  }));
  return stats;
}

}  // namespace gpuaas::controller
