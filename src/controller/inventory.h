// The inventory controller: makes the store's Cluster, NodeCapacity, GpuCapacity and SpecAndCount
// objects match what each ClusterDriver observes. Level-triggered: every Sync reads the cluster
// and the store afresh and writes only the difference, in one transaction per cluster, so a
// crash at any point leaves either the old or the new inventory. Every driver, simulated or
// Kubernetes, goes through this one path.
#ifndef GPUAAS_CONTROLLER_INVENTORY_H_
#define GPUAAS_CONTROLLER_INVENTORY_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/driver.h"
#include "common/clock.h"
#include "model/fleet.h"
#include "store/store.h"

namespace gpuaas::controller {

// Label keys gpuaas puts on inventory objects, for selectors.
inline constexpr std::string_view kLabelCluster = "gpuaas.io/cluster";
inline constexpr std::string_view kLabelNode = "gpuaas.io/node";
inline constexpr std::string_view kLabelModel = "gpuaas.io/gpu-model";
inline constexpr std::string_view kLabelMigMode = "gpuaas.io/mig-mode";
inline constexpr std::string_view kLabelProfile = "gpuaas.io/profile";

struct Inventory {
  model::Cluster cluster;
  std::vector<model::NodeCapacity> nodes;
  std::vector<model::GpuCapacity> gpus;
  std::vector<model::SpecAndCount> specs;
};

// The objects an observation calls for (pure; metadata other than name and labels left empty).
// GPUs whose product is unknown to the catalogue are listed with an empty model and a
// `Recognized=False` condition on their node rather than dropped.
Inventory BuildInventory(const cluster::ObservedCluster& observed, Time now);

struct SyncStats {
  int created = 0;
  int updated = 0;
  int deleted = 0;
  int unchanged = 0;
};

class InventoryController {
 public:
  InventoryController(store::Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // Observes `driver` and writes the difference. When the driver cannot observe, marks the
  // Cluster `Reachable=False` and keeps the last known inventory. Thread-compatible: run Syncs
  // of one cluster one at a time.
  absl::StatusOr<SyncStats> Sync(cluster::ClusterDriver& driver);

 private:
  store::Store& store_;
  const Clock& clock_;
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_INVENTORY_H_
