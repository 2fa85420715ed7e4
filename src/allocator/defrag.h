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
// Applying a plan is the MIG controller's work (a MigLayout per GPU that changes) and, for moved
// instances, the pools' allocations, after an operator's approval (service/defrag.h). Pure.
#ifndef GPUAAS_ALLOCATOR_DEFRAG_H_
#define GPUAAS_ALLOCATOR_DEFRAG_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "allocator/snapshot.h"
#include "catalog/catalog.h"

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

// How many instances of `profile` a GPU of `model` laid out as `layout` could hand out: the free
// ones of that profile (`free`, a subset of `layout`) and the new ones its free slots take.
int RoomFor(const catalog::GpuModel& model, const catalog::Layout& layout, const catalog::Layout& free,
            const catalog::MigProfile& profile);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_DEFRAG_H_
