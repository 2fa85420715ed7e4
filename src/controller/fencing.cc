#include "controller/fencing.h"

#include <set>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "fmt/format.h"

namespace gpuaas::controller {
namespace {

constexpr std::string_view kPoolsInCluster = "fencing/cluster";
// Nodes by cluster: the inventory controller's index too, registered alike (one index, whoever
// registers it first).
constexpr std::string_view kNodesByCluster = "cluster";

}  // namespace

FencingController::FencingController(runtime::Manager& manager, cluster::Registry& registry)
    : registry_(registry),
      pools_(manager.informers().For<model::GpuPool>()),
      nodes_(manager.informers().For<model::NodeCapacity>()) {
  runtime::WorkQueue& q = manager.Add("fencing", *this);
  // Live pools by the clusters they hold devices in: a cluster's reconcile reads its own.
  pools_.AddIndex(std::string(kPoolsInCluster), [](const model::GpuPool& p) {
    std::set<std::string> clusters;
    if (model::PoolIsLive(p)) {
      for (const model::AllocatedDevice& d : p.status.allocation) clusters.insert(d.cluster);
    }
    return std::vector<std::string>(clusters.begin(), clusters.end());
  });
  nodes_.AddIndex(std::string(kNodesByCluster),
                  [](const model::NodeCapacity& n) { return std::vector<std::string>{n.spec.cluster}; });
  // A pool's change can free or take a node of the clusters it holds devices in: those are asked
  // again; a change that moves no device (a condition, an instance UUID) asks nothing.
  pools_.OnChange([&q](const model::GpuPool* before, const model::GpuPool* after) {
    if (before != nullptr && after != nullptr && before->status.allocation == after->status.allocation &&
        model::PoolIsLive(*before) == model::PoolIsLive(*after) &&
        before->spec.time_slicing_replicas == after->spec.time_slicing_replicas) {
      return;
    }
    for (const model::GpuPool* p : {before, after}) {
      if (p == nullptr) continue;
      for (const model::AllocatedDevice& d : p->status.allocation) q.Add(d.cluster);
    }
  });
  // Only a node that comes, goes or changes its GPU count can change whom it belongs to wholly.
  nodes_.OnChange([&q](const model::NodeCapacity* before, const model::NodeCapacity* after) {
    if (before != nullptr && after != nullptr && before->status.physical_gpus == after->status.physical_gpus) return;
    q.Add((after ? after : before)->spec.cluster);
  });
  subscription_ = registry_.Subscribe([this, &q](const std::string& name, cluster::ClusterDriver* added) {
    std::lock_guard<std::mutex> lock(mu_);
    enforced_.erase(name);  // a cluster that joins (again) is told afresh
    if (added != nullptr) q.Add(name);
  });
}

absl::StatusOr<runtime::Result> FencingController::Reconcile(const std::string& cluster) {
  const std::shared_ptr<cluster::ClusterDriver> driver = registry_.Get(cluster);
  if (driver == nullptr) return runtime::Result::Done();
  // The pools holding devices here and the cluster's nodes, from the informers' indexes.
  std::vector<model::GpuPool> pools;
  for (const auto& p : pools_.ByIndex(kPoolsInCluster, cluster)) pools.push_back(*p);
  std::map<std::string, int64_t> gpus;
  for (const auto& n : nodes_.ByIndex(kNodesByCluster, cluster)) gpus[n->metadata.name] = n->status.physical_gpus;
  std::map<std::string, cluster::ClusterDriver::NodeOwner> owners;
  // Held by name: iterating a temporary's member would outlive it.
  std::map<std::string, std::map<std::string, model::WholeNodeOwner>> all = model::WholeNodeOwners(pools, gpus);
  for (const auto& [node, o] : all[cluster]) owners[node] = {o.pool, o.time_slices};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = enforced_.find(cluster);
    if (it != enforced_.end() && it->second == owners) return runtime::Result::Done();
  }
  if (absl::Status s = driver->EnforceNodeOwners(owners); !s.ok()) return s;  // requeued with backoff
  std::lock_guard<std::mutex> lock(mu_);
  enforced_[cluster] = owners;
  if (!owners.empty()) log::Info("cluster {}: {} node(s) kept for the pools holding them whole", cluster, owners.size());
  return runtime::Result::Done();
}

std::map<std::string, cluster::ClusterDriver::NodeOwner> FencingController::enforced(const std::string& cluster) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = enforced_.find(cluster);
  return it == enforced_.end() ? std::map<std::string, cluster::ClusterDriver::NodeOwner>{} : it->second;
}

}  // namespace gpuaas::controller
