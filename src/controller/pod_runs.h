// The pod-run controller: each GPU pod of a cluster is a run, a Profile (pod -> devices -> pool ->
// project, from when to when), as the workload controller makes them for gpuaas's own Workloads.
// It reads which pods hold which devices from the inventory (GpuCapacity status.pods and each MIG
// instance's pods, as the cluster's driver reports them) and which pool holds each device from
// the pools' allocations. Keyed by cluster; a cluster is looked at again when the pods on its
// devices or a pool's allocation there change, and when it joins or leaves.
//
// It owns the Profiles labelled gpuaas.io/cluster (in the project's namespace, named
// "<pod namespace>.<pod>-<revision>", spec.pod "namespace/name"): a run starts when the pod is
// first seen on pool devices and ends when it no longer holds them, or holds other ones (then a
// new run starts). A pod on devices that no pool of its project holds makes no run (the
// GpuCapacity names it, and the log says how many there are).
#ifndef GPUAAS_CONTROLLER_POD_RUNS_H_
#define GPUAAS_CONTROLLER_POD_RUNS_H_

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "cluster/registry.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

// A pod's run as the inventory and the pools show it now.
struct PodRun {
  std::string pod;   // "namespace/name"
  std::string node;
  std::string pool;  // the pool holding the pod's devices
  std::string project;
  std::vector<model::WorkloadDevice> devices;  // sorted
  friend bool operator==(const PodRun&, const PodRun&) = default;
};

// Who holds what on a GPU (null: nothing): the whole GPU's pods and each MIG instance's, as one
// comparable value, to tell a change of holders from any other change. Pure.
std::vector<std::vector<std::string>> Holders(const model::GpuCapacity* g);

// The runs of the pods on `gpus` (of one cluster), each attributed to the pool of its project
// (its namespace) holding most of its devices; `unpooled` (when given) gets the pods on devices
// no pool of their project holds. Pure.
std::vector<PodRun> PodRuns(const std::vector<const model::GpuCapacity*>& gpus,
                            const std::vector<const model::GpuPool*>& pools, std::vector<std::string>* unpooled);

struct PodRunStats {
  int64_t started = 0;
  int64_t ended = 0;
  int64_t unpooled = 0;  // pods on devices no pool of theirs holds, as last seen in each cluster
};

class PodRunController final : public runtime::Reconciler {
 public:
  PodRunController(store::Store& store, runtime::Manager& manager, cluster::Registry& registry);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& cluster) override;
  PodRunStats stats() const;

 private:
  store::Store& store_;
  runtime::Manager& manager_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  runtime::Informer<model::GpuPool>& pools_;
  runtime::Informer<model::Profile>& profiles_;
  mutable std::mutex mu_;
  PodRunStats stats_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> unpooled_ ABSL_GUARDED_BY(mu_);  // by cluster
  cluster::Registry::Subscription subscription_;  // last: it goes first
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_POD_RUNS_H_
