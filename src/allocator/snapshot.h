// The allocator's view of the fleet: an immutable snapshot of every GPU, its MIG instances and
// who holds them. Built from GpuCapacity/NodeCapacity objects (or by hand in tests); decisions
// never touch the store. Layer 5 of docs/architecture.md: pure data and functions, no I/O.
#ifndef GPUAAS_ALLOCATOR_SNAPSHOT_H_
#define GPUAAS_ALLOCATOR_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "catalog/catalog.h"
#include "model/fleet.h"
#include "model/pool.h"

namespace gpuaas::allocator {

struct InstanceState {
  const catalog::MigProfile* profile = nullptr;
  int start = 0;
  std::string uuid;   // empty for an instance that is planned but not yet created
  std::string owner;  // the pool ("namespace/name") it is allocated to; empty when free
  bool busy = false;  // a workload runs on it (whoever allocated it)
};

// A share of a whole GPU (MIG disabled) that a holder time-slices with others: milli-GPU, as the
// GPU-sharing pods of a trace ask for (sim/). Pools take whole devices; none holds a share yet.
struct GpuShare {
  std::string owner;
  int32_t milli = 0;  // thousandths of the GPU, 1..999
};

struct GpuState {
  std::string uuid;
  std::string cluster;
  std::string node;  // NodeCapacity name
  int index = 0;
  const catalog::GpuModel* model = nullptr;  // null for GPUs the catalogue does not know
  bool healthy = true;
  bool schedulable = true;  // the node accepts new work
  bool mig_enabled = false;
  std::vector<InstanceState> instances;  // MIG instances, when mig_enabled
  std::string owner;  // the pool holding the whole GPU (MIG disabled); empty when free
  bool busy = false;  // a workload runs on the whole GPU
  std::vector<GpuShare> shares;  // MIG disabled and no owner: who time-shares the GPU
  int32_t node_room = -1;  // index into FleetSnapshot::nodes; -1 when its node's room is unknown

  // True when nothing on the GPU is allocated or running, so its layout may change.
  bool Idle() const;
  // The thousandths of the GPU its shares hold together.
  int32_t SharedMilli() const;
  // The instances as a catalogue layout.
  catalog::Layout Layout() const;
};

// Where a decision looks, so that it visits the GPUs that could serve it rather than the whole
// fleet: positions in FleetSnapshot::gpus, ascending, per model.
struct SnapshotIndex {
  struct OfModel {
    std::vector<uint32_t> all;
    std::vector<uint32_t> whole_free;  // MIG disabled, no owner, not busy, not shared
    std::vector<uint32_t> shared;      // MIG disabled, no owner, not busy, shared in part
    std::vector<uint32_t> idle_mig;    // MIG enabled, nothing allocated or running
    // MIG enabled, by profile (indexed like GpuModel::profiles): with a free instance of the
    // profile; and, of those in use (not idle), with free slots where one could be made.
    std::vector<std::vector<uint32_t>> free_instance;
    std::vector<std::vector<uint32_t>> free_slots;
  };
  std::unordered_map<const catalog::GpuModel*, OfModel> models;
  // Node numbers: node_of[position] is its GPU's node, 0..nodes-1 (GPUs of one node share it),
  // so that a decision counts per node in arrays rather than maps of names.
  std::vector<uint32_t> node_of;
  uint32_t nodes = 0;
  // The GPUs of node n: node_gpus[node_first[n] .. node_first[n + 1]), ascending positions.
  std::vector<uint32_t> node_first;
  std::vector<uint32_t> node_gpus;
  const GpuState* built_for = nullptr;  // gpus.data() and size when built: a stale index is not used
  size_t size = 0;
};

// What a node has left for new work besides its GPUs: the CPU and memory that the pods running
// there have not requested. A negative figure is unknown and limits nothing.
struct NodeRoom {
  std::string name;  // NodeCapacity name
  int64_t cpu_free_milli = -1;
  int64_t memory_free_mib = -1;
  // A GPU's share of the node: its CPU and memory over its GPUs (not rounded: a stranding key
  // compares such shares across nodes); -1 when unknown.
  double cpu_share_milli = -1;
  double memory_share_mib = -1;
};

struct FleetSnapshot {
  std::vector<GpuState> gpus;  // sorted by (cluster, node, index)
  // Per node, as GpuState::node_room points. Given, like health: ApplyPlan and ReleasePool leave
  // it alone (the product reads it from the cluster's pods; the simulator keeps its own).
  std::vector<NodeRoom> nodes;
  // Kept by BuildSnapshot, BuildPoolSnapshot, ApplyPlan and ReleasePool. Code that changes
  // `gpus` otherwise calls Reindex before the next Allocate (one that finds no index for its
  // `gpus` builds its own, for that call).
  SnapshotIndex index;
  void Reindex();
};

// The index of `gpus` (what Reindex stores).
SnapshotIndex IndexGpus(const std::vector<GpuState>& gpus);
// Numbers the nodes of `gpus` into `node_of` (by position); returns how many there are.
uint32_t NumberNodes(const std::vector<GpuState>& gpus, std::vector<uint32_t>& node_of);

// Builds a snapshot from inventory objects. `owners` maps device UUIDs (GPU or MIG) to the pool
// holding them; `busy` lists device UUIDs with running workloads. GPUs of unknown models are kept
// (model null) and never chosen.
FleetSnapshot BuildSnapshot(std::span<const model::GpuCapacity> gpus,
                            std::span<const model::NodeCapacity> nodes,
                            const std::map<std::string, std::string>& owners,
                            const std::set<std::string>& busy);
// The same over shared objects (an informer's), copying nothing but the snapshot itself.
FleetSnapshot BuildSnapshot(std::span<const model::GpuCapacity* const> gpus,
                            std::span<const model::NodeCapacity* const> nodes,
                            const std::map<std::string, std::string>& owners,
                            const std::set<std::string>& busy);

// A device's identity for dedication: the GPU UUID for a whole GPU, "UUID@start" for a MIG
// instance (its placement, which exists before the instance and its UUID do).
std::string DeviceKey(std::string_view gpu_uuid, std::string_view profile, int64_t start);
// "namespace/name": how pools are named as owners.
std::string PoolKey(const model::GpuPool& pool);

// Which live pool holds which device (DeviceKey -> PoolKey), from the pools' allocations.
std::map<std::string, std::string> DeviceOwners(std::span<const model::GpuPool* const> pools);

// The fleet as the pool allocator sees it: the inventory, with the devices of every live pool
// owned (`owners`, from DeviceOwners), and every GPU that has a MigLayout planned on the layout
// gpuaas asked for, even before the GPU reached it (instances that exist keep their state).
FleetSnapshot BuildPoolSnapshot(std::span<const model::GpuCapacity* const> gpus,
                                std::span<const model::NodeCapacity* const> nodes,
                                std::span<const model::MigLayout* const> layouts,
                                const std::map<std::string, std::string>& owners);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_SNAPSHOT_H_
