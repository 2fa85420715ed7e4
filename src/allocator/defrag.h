// MIG defragmentation: free MIG instances that nobody holds (left by released pools, or made
// ahead) cut a GPU's free memory slices into pieces no large profile fits. On an idle GPU the
// allocator lays the GPU out anew when a pool needs it; on a GPU that a pool uses in part it
// never does (that would destroy the pool's instances), so the free instances stay in the way.
// The planner finds those GPUs where destroying the free instances lets the GPU hold a larger
// profile than it can now, and proposes for each the layout that keeps every allocated instance
// where it is. It never touches an instance a pool holds, nor a GPU where a workload runs, nor
// an unhealthy GPU.
//
// Pools may let their instances move (GpuPool spec.moveIdleInstances): a GPU whose held
// instances all belong to such pools, none with work on it, is emptied when every one of them
// fits elsewhere, in a free instance of its profile or in free slots of another GPU of the same
// model and cluster that a pool uses in part (never an idle one, nor one that loses instances):
// the emptied GPU is then idle, a whole GPU for whatever comes next. A move never destroys
// anything on the GPUs it moves instances to.
//
// Making moves is the pool controller's work (controller/pool_defrag.cc), on an operator's
// request (a Defragmentation, service/defrag.h): it writes a MigLayout per GPU that changes, which
// the MIG controller applies, and, for moved instances, the pools' allocations. Pure.
#ifndef GPUAAS_ALLOCATOR_DEFRAG_H_
#define GPUAAS_ALLOCATOR_DEFRAG_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/snapshot.h"
#include "catalog/catalog.h"
#include "model/pool.h"

namespace gpuaas::allocator {

// One instance a pool holds, moved to another GPU.
struct Relocation {
  std::string pool;  // "namespace/name"
  const catalog::MigProfile* profile = nullptr;
  std::string from_gpu;
  int from_start = 0;
  std::string to_gpu;
  std::string to_cluster;
  std::string to_node;
  int to_start = 0;
  std::string to_instance;  // the free instance it takes; empty: a new one in free slots
};

struct DefragMove {
  std::string gpu_uuid;
  std::string cluster;
  std::string node;
  const catalog::GpuModel* model = nullptr;
  catalog::Layout before;   // the GPU's instances now
  catalog::Layout after;    // those a pool holds, where they are
  catalog::Layout removed;  // free instances destroyed
  std::string largest_before;  // the largest profile the GPU could hand out now ("" for none)
  std::string largest_after;   // and afterwards
  // For a GPU emptied by moving its instances: where each goes (`after` is then empty and
  // `removed` too: its instances stay, free, until the allocator lays the idle GPU out anew).
  std::vector<Relocation> relocations = {};
};

// What a fleet could still hand out: per model and profile, instances (free ones, and those its
// free slots could take, one profile at a time).
using Room = std::map<std::string, std::map<std::string, int>>;

struct DefragPlan {
  std::vector<DefragMove> moves;  // in fleet order
  Room before;
  Room after;  // once every move is made
};

// `movable`: the pools ("namespace/name") whose instances that no workload uses may move.
DefragPlan PlanDefrag(const FleetSnapshot& fleet, const std::set<std::string>& movable = {});

// The fleet as defragmentation plans on it: the pool allocator's view (BuildPoolSnapshot), with
// the devices that Running workloads use marked busy, and the live pools that let their idle
// instances move.
struct DefragFleet {
  FleetSnapshot snapshot;
  std::set<std::string> movable;
};
DefragFleet BuildDefragFleet(std::span<const model::GpuCapacity* const> gpus,
                             std::span<const model::NodeCapacity* const> nodes,
                             std::span<const model::MigLayout* const> layouts,
                             std::span<const model::GpuPool* const> pools,
                             std::span<const model::Workload* const> workloads);

// What making some moves of a plan writes.
struct DefragWrites {
  std::vector<DefragMove> moves;  // those made, in the plan's order
  // Each GPU's new desired layout: those a move lays out anew, and those moved instances go to
  // (what the GPU has, with the new instances in its free slots).
  struct GpuLayout {
    std::string cluster;
    std::string node;
    std::string gpu_uuid;
    catalog::Layout layout;
  };
  std::vector<GpuLayout> layouts;
  // The moved instances by pool ("namespace/name").
  std::map<std::string, std::vector<Relocation>> relocations;
};

// The moves of `plan` (made on `fleet`) for the GPUs `gpus` (UUIDs in lower case; every move when
// empty). FailedPrecondition naming a GPU that has no move in the plan, or saying that the plan
// has none when every move is asked for; nothing is then made.
absl::StatusOr<DefragWrites> ChooseMoves(const DefragFleet& fleet, const DefragPlan& plan,
                                         const std::set<std::string>& gpus);

// Moves the device of `allocation` that `r` takes away to where it goes; false when the
// allocation holds no such device.
bool Relocate(std::vector<model::AllocatedDevice>& allocation, const Relocation& r);

// A move as a Defragmentation records it.
model::Defragmentation::Move Record(const DefragMove& mv);

// How many instances of `profile` a GPU of `model` laid out as `layout` could hand out: the free
// ones of that profile (`free`, a subset of `layout`) and the new ones its free slots take.
int RoomFor(const catalog::GpuModel& model, const catalog::Layout& layout, const catalog::Layout& free,
            const catalog::MigProfile& profile);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_DEFRAG_H_
