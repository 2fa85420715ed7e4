// The control plane: every controller of gpuaas on one manager, wired the same way in the server
// and in tests. Who owns what (each field has one writer):
//   inventory  - Cluster, NodeCapacity, SpecAndCount; GpuCapacity but for its health
//   health     - GpuCapacity status.health and its Healthy, MemoryErrors, ResetRequired and
//                Overheating conditions; tells the hub the known GPUs
//   pools      - GpuPool status (allocation, conditions but Approved); MigLayout specs; every
//                UsageRecord (controller/pool_meter.h); Defragmentation status (the moves made)
//   miglayouts - MigLayout status; asks drivers for layouts
//   workloads  - Workload status and Profiles of Workloads; a loan's reclaim and end (Loan end)
//   lending    - waiting borrowers' status and the start of their runs (Profile, Loan)
//   podruns    - Profiles of cluster pods (labelled gpuaas.io/cluster)
//   loanpods   - Loan status: a borrower's pods told of a reclaim, removed at the loan's end
//   rollups    - persisted telemetry rollups
//   metering   - final invoices of closed months, once every approved pool's meter exists
//   quotas     - nothing in the store: each cluster holds each project to its pools' devices
//   clusters   - nothing in the store: a driver for each ClusterRegistration, in the registry
//   fencing    - nothing in the store: nodes a pool holds whole labelled and tainted for it
// The API (service/) writes specs, approvals, release requests (spec.releaseRequested),
// defragmentation requests and cluster registrations; docs/architecture.md "Who writes what"
// lists every field's writer.
#ifndef GPUAAS_CONTROLLER_CONTROL_PLANE_H_
#define GPUAAS_CONTROLLER_CONTROL_PLANE_H_

#include <map>
#include <memory>
#include <string>

#include "cluster/driver.h"
#include "cluster/registry.h"
#include "controller/clusters.h"
#include "controller/fencing.h"
#include "controller/health.h"
#include "controller/inventory.h"
#include "controller/lending.h"
#include "controller/loan_pods.h"
#include "controller/metering.h"
#include "controller/pod_runs.h"
#include "controller/pools.h"
#include "controller/provisioning.h"
#include "controller/quotas.h"
#include "controller/runtime/manager.h"
#include "controller/workloads.h"
#include "store/cache.h"
#include "store/store.h"
#include "telemetry/hub.h"

namespace gpuaas::controller {

struct ControlPlaneOptions {
  Duration inventory_resync = std::chrono::seconds(30);  // for drivers that cannot Watch
  Duration mig_poll = std::chrono::seconds(1);           // MIG manager state while applying
  Duration rollup_flush = std::chrono::seconds(10);
  Duration stuck_after = kStuckAfter;  // a borrower's pods past its loan's end (loan_pods.h)
  // Makes the driver of a cluster registered through the API; null leaves them unconnected.
  ClusterConnector connect;
};

// The object kinds the controllers follow (the cache must load them).
std::vector<std::string> ControlPlaneKinds();

// Observes every driver once and writes the inventory, health summed up, as a server's first
// moments do, on a control plane of its own that is gone when this returns (tests, tools).
absl::Status ObserveOnce(store::Store& store, const std::vector<cluster::ClusterDriver*>& drivers, const Clock& clock);

class ControlPlane {
 public:
  // `drivers` by cluster name, fixed and not owned; more can join (and leave) through
  // clusters(). `cache` must have loaded ControlPlaneKinds() (Start for a server, Load for tests).
  ControlPlane(store::Store& store, store::ObjectCache& cache, const Clock& clock,
               std::map<std::string, cluster::ClusterDriver*> drivers, telemetry::Hub& hub,
               ControlPlaneOptions options = {});
  // On a registry that outlives it (not owned): a server makes a control plane for each term it
  // leads, and the API lists the clusters between terms.
  ControlPlane(store::Store& store, store::ObjectCache& cache, const Clock& clock, cluster::Registry& registry,
               telemetry::Hub& hub, ControlPlaneOptions options = {});
  ~ControlPlane();

  // Restores what a previous run persisted (health verdicts, rollups). Call before Start.
  absl::Status Restore();

  runtime::Manager& manager() { return manager_; }
  cluster::Registry& clusters() { return registry_; }
  InventoryController& inventory() { return inventory_; }
  HealthController& health() { return health_; }
  PoolController& pools() { return pools_; }
  MigLayoutController& miglayouts() { return miglayouts_; }
  WorkloadController& workloads() { return workloads_; }
  LendingController& lending() { return lending_; }
  PodRunController& pod_runs() { return pod_runs_; }
  LoanPodController& loan_pods() { return loan_pods_; }
  MeteringController& metering() { return metering_; }
  QuotaController& quotas() { return quotas_; }
  ClusterConnectionController& connections() { return connections_; }
  FencingController& fencing() { return fencing_; }

  void Start() { manager_.Start(); }
  // Stops the controllers (in-flight reconciles finish), then writes what telemetry closed since
  // the last flush, so that a graceful stop loses no rollup.
  void Stop();
  int RunUntilIdle() { return manager_.RunUntilIdle(); }

 private:
  ControlPlane(store::Store& store, store::ObjectCache& cache, const Clock& clock,
               std::unique_ptr<cluster::Registry> owned, cluster::Registry* registry, telemetry::Hub& hub,
               ControlPlaneOptions options);

  std::unique_ptr<cluster::Registry> owned_registry_;
  cluster::Registry& registry_;  // before the controllers, which subscribe to it
  runtime::Manager manager_;
  InventoryController inventory_;
  HealthController health_;
  PoolController pools_;
  MigLayoutController miglayouts_;
  WorkloadController workloads_;
  LendingController lending_;
  PodRunController pod_runs_;
  LoanPodController loan_pods_;
  RollupWriter rollups_;
  MeteringController metering_;
  QuotaController quotas_;
  FencingController fencing_;
  ClusterConnectionController connections_;
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_CONTROL_PLANE_H_
