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

// The health controller's fields (status.health and its conditions) are not the inventory's
// to change: they are carried over as stored.
void KeepHealth(model::GpuCapacity& desired, const model::GpuCapacity& stored) {
  desired.status.health = stored.status.health;
  for (const Condition& c : stored.status.conditions) {
    if (c.type != model::kGpuDriverHealthy) model::SetCondition(desired.status.conditions, c);
  }
}

// One kind's difference for one cluster: what to create, update (at the stored version) and
// delete (likewise).
template <typename T>
struct Diff {
  std::vector<T*> create;
  std::vector<T*> update;
  std::vector<std::shared_ptr<const T>> remove;
};

template <typename T>
Diff<T> Compare(std::vector<T>& desired, const std::vector<std::shared_ptr<const T>>& stored, SyncStats& stats) {
  Diff<T> d;
  std::map<std::string_view, const std::shared_ptr<const T>*> by_name;
  for (const auto& s : stored) by_name[s->metadata.name] = &s;
  for (T& want : desired) {
    auto it = by_name.find(want.metadata.name);
    if (it == by_name.end()) {
      d.create.push_back(&want);
      continue;
    }
    const T& have = **it->second;
    if constexpr (std::is_same_v<T, model::GpuCapacity>) KeepHealth(want, have);
    AdoptStored(want, have);
    if (want == have) {
      ++stats.unchanged;
    } else {
      d.update.push_back(&want);
    }
    by_name.erase(it);
  }
  for (const auto& [name, obj] : by_name) d.remove.push_back(*obj);
  return d;
}

template <typename T>
absl::Status Write(store::Txn& tx, const Diff<T>& d, Time now, SyncStats& stats) {
  for (T* c : d.create) {
    RETURN_IF_ERROR(store::CreateObject(tx, *c, now));
    ++stats.created;
  }
  for (T* u : d.update) {
    RETURN_IF_ERROR(store::UpdateObject(tx, *u));
    ++stats.updated;
  }
  for (const auto& r : d.remove) {
    RETURN_IF_ERROR(store::DeleteObject<T>(tx, "", r->metadata.name, r->metadata.resource_version));
    ++stats.deleted;
  }
  return absl::OkStatus();
}

template <typename T>
size_t Size(const Diff<T>& d) {
  return d.create.size() + d.update.size() + d.remove.size();
}

template <typename T>
std::vector<std::string> ClusterIndex(const T& obj) {
  if constexpr (std::is_same_v<T, model::Cluster>) {
    return {obj.metadata.name};
  } else {
    return {obj.spec.cluster};
  }
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
                            {std::string(kLabelNode), node.metadata.name}};
    if (m) node.metadata.labels[std::string(kLabelModel)] = model_name;
    // A node kept for the pool that holds it whole (controller/fencing.h), as the cluster says.
    if (auto owner = on.labels.find(std::string(model::kNodePoolKey)); owner != on.labels.end()) {
      node.metadata.labels[std::string(model::kNodePoolKey)] = owner->second;
    }
    node.spec = {oc.name, on.name, model_name, on.gpu_product,
                 static_cast<int64_t>(on.gpus.size()), on.cpu_cores, on.memory_bytes,
                 on.schedulable};
    node.status.pod_cpu_milli = on.pod_cpu_milli;
    node.status.pod_memory_bytes = on.pod_memory_bytes;
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
                           {std::string(kLabelNode), node.metadata.name},
                           {std::string(kLabelMigMode), og.mig_enabled ? "enabled" : "disabled"}};
      if (m) g.metadata.labels[std::string(kLabelModel)] = model_name;
      g.spec = {oc.name, node.metadata.name, og.uuid, og.index, model_name, on.gpu_product,
                og.memory_mib, m != nullptr && m->mig_capable};
      g.status.mig_mode = og.mig_enabled ? model::MigMode::kEnabled : model::MigMode::kDisabled;
      g.status.health = model::Health::kUnknown;  // the health controller's to judge
      model::SetDriverHealth(g, og.healthy, now);
      node.status.physical_gpus += 1;
      node.status.physical_gpu_memory_mib += og.memory_mib;
      if (og.mig_enabled) {
        node.status.mig_enabled_gpus += 1;
        for (const cluster::ObservedMigInstance& mi : og.mig_instances) {
          g.status.mig_instances.push_back(
              {mi.profile, mi.start, mi.size, mi.uuid, mi.in_use, mi.pods});
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
        g.status.pods = og.pods;
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
                           {std::string(kLabelNode), node.metadata.name},
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

InventoryController::InventoryController(store::Store& store, runtime::Manager& manager, cluster::Registry& registry,
                                         Duration resync)
    : store_(store),
      manager_(manager),
      registry_(registry),
      resync_(resync),
      clusters_(manager.informers().For<model::Cluster>()),
      nodes_(manager.informers().For<model::NodeCapacity>()),
      gpus_(manager.informers().For<model::GpuCapacity>()),
      specs_(manager.informers().For<model::SpecAndCount>()) {
  clusters_.AddIndex("cluster", ClusterIndex<model::Cluster>);
  nodes_.AddIndex("cluster", ClusterIndex<model::NodeCapacity>);
  gpus_.AddIndex("cluster", ClusterIndex<model::GpuCapacity>);
  specs_.AddIndex("cluster", ClusterIndex<model::SpecAndCount>);
  runtime::WorkQueue& queue = manager.Add("inventory", *this);
  subscription_ = registry_.Subscribe([this, &queue](const std::string& name, cluster::ClusterDriver* added) {
    if (added != nullptr) {
      const bool watched = added->Watch([&queue, name] { queue.Add(name); });
      std::lock_guard<std::mutex> lock(mu_);
      watched_[name] = watched;
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      watched_.erase(name);
      observed_.erase(name);
    }
    queue.Add(name);
  });
}

InventoryController::~InventoryController() {
  subscription_.Reset();
  // The drivers outlive this controller (a new leader's control plane watches them again).
  for (const auto& [name, d] : registry_.All()) d->Watch(nullptr);
}

bool InventoryController::WaitObserved(Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::vector<std::string> names = registry_.Names();
  return observed_cv_.wait_for(lock, timeout, [&] {
    for (const std::string& n : names) {
      if (!observed_.contains(n)) return false;
    }
    return true;
  });
}

SyncStats InventoryController::last() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

absl::StatusOr<runtime::Result> InventoryController::Reconcile(const std::string& cluster) {
  const std::shared_ptr<cluster::ClusterDriver> driver = registry_.Get(cluster);
  if (driver == nullptr) {
    absl::StatusOr<SyncStats> forgot = Forget(cluster);
    if (!forgot.ok()) return forgot.status();
    if (forgot->deleted > 0) log::Info("cluster {}: no longer managed, {} objects deleted", cluster, forgot->deleted);
    return runtime::Result::Done();
  }
  absl::StatusOr<SyncStats> synced = Sync(*driver);
  bool watched = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    observed_.insert(cluster);
    if (synced.ok()) last_ = *synced;
    watched = watched_[cluster];
  }
  observed_cv_.notify_all();
  if (!synced.ok()) return synced.status();
  const SyncStats& st = *synced;
  if (st.created + st.updated + st.deleted > 0) {
    log::Info("cluster {}: {} created, {} updated, {} deleted", cluster, st.created, st.updated, st.deleted);
  }
  // A driver that reports its changes is observed when it does; the others on a timer.
  return watched ? runtime::Result::Done() : runtime::Result::After(resync_);
}

absl::StatusOr<SyncStats> InventoryController::Forget(const std::string& cluster) {
  if (auto w = written_.find(cluster); w != written_.end()) manager_.AwaitRevision(w->second);
  const Time now = manager_.clock().Now();
  SyncStats stats;
  // Compared with nothing: every object of the cluster is to be deleted.
  Inventory none;
  std::vector<model::Cluster> no_clusters;
  const Diff<model::Cluster> dc = Compare(no_clusters, clusters_.ByIndex("cluster", cluster), stats);
  const Diff<model::NodeCapacity> dn = Compare(none.nodes, nodes_.ByIndex("cluster", cluster), stats);
  const Diff<model::GpuCapacity> dg = Compare(none.gpus, gpus_.ByIndex("cluster", cluster), stats);
  const Diff<model::SpecAndCount> ds = Compare(none.specs, specs_.ByIndex("cluster", cluster), stats);
  if (Size(dc) + Size(dn) + Size(dg) + Size(ds) == 0) return stats;
  absl::Status written = store_.Transact([&](store::Txn& tx) -> absl::Status {
    stats = SyncStats{};
    RETURN_IF_ERROR(Write(tx, ds, now, stats));
    RETURN_IF_ERROR(Write(tx, dg, now, stats));
    RETURN_IF_ERROR(Write(tx, dn, now, stats));
    return Write(tx, dc, now, stats);
  });
  written_[cluster] = store_.Revision();
  RETURN_IF_ERROR(written);
  written_.erase(cluster);
  return stats;
}

absl::StatusOr<SyncStats> InventoryController::Sync(cluster::ClusterDriver& driver) {
  const Time now = manager_.clock().Now();
  const std::string name(driver.ClusterName());
  // Compare with our own last write of this cluster, not with the state before it.
  if (auto w = written_.find(name); w != written_.end()) manager_.AwaitRevision(w->second);
  absl::StatusOr<cluster::ObservedCluster> observed = driver.Observe();
  SyncStats stats;
  if (!observed.ok()) {
    log::Warn("cluster {}: cannot observe: {}", name, observed.status().ToString());
    std::shared_ptr<const model::Cluster> cur = clusters_.Get(name);
    if (!cur) return stats;
    model::Cluster c = *cur;
    if (!model::SetCondition(c.status.conditions, {"Reachable", ConditionStatus::kFalse, "ObserveFailed",
                                                   std::string(observed.status().message()), now, 0})) {
      return stats;
    }
    RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) { return store::UpdateObject(tx, c); }));
    ++stats.updated;
    written_[name] = store_.Revision();
    return stats;
  }
  Inventory inv = BuildInventory(*observed, now);
  std::vector<model::Cluster> clusters = {inv.cluster};
  const Diff<model::Cluster> dc = Compare(clusters, clusters_.ByIndex("cluster", name), stats);
  const Diff<model::NodeCapacity> dn = Compare(inv.nodes, nodes_.ByIndex("cluster", name), stats);
  const Diff<model::GpuCapacity> dg = Compare(inv.gpus, gpus_.ByIndex("cluster", name), stats);
  const Diff<model::SpecAndCount> ds = Compare(inv.specs, specs_.ByIndex("cluster", name), stats);
  if (judge_new_) {
    for (model::GpuCapacity* g : dg.create) judge_new_(*g, now);
  }
  if (Size(dc) + Size(dn) + Size(dg) + Size(ds) == 0) return stats;
  const int unchanged = stats.unchanged;
  absl::Status written = store_.Transact([&](store::Txn& tx) -> absl::Status {
    stats = SyncStats{0, 0, 0, unchanged};
    RETURN_IF_ERROR(Write(tx, dc, now, stats));
    RETURN_IF_ERROR(Write(tx, dn, now, stats));
    RETURN_IF_ERROR(Write(tx, dg, now, stats));
    return Write(tx, ds, now, stats);
  });
  // Read our own writes (or, after a conflict, the newer state) before this cluster's next
  // comparison, which would otherwise conflict with them.
  written_[name] = store_.Revision();
  RETURN_IF_ERROR(written);
  return stats;
}

}  // namespace gpuaas::controller
