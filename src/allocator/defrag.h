// MIG defragmentation: free MIG instances that nobody holds (left by released pools, or made
// ahead) cut a GPU's free memory slices into pieces no large profile fits. On an idle GPU the
// allocator lays the GPU out anew when a pool needs it; on a GPU that a pool uses in part it
// never does (that would destroy the pool's instances), so the free instances stay in the way.
// The planner finds those GPUs where destroying the free instances lets the GPU hold a larger
// profile than it can now, and proposes for each the layout that keeps every allocated instance
// where it is. It never touches an instance a pool holds, nor a GPU where a workload runs, nor
// an unhealthy GPU. Applying a plan is the MIG controller's work (a MigLayout per GPU), after an
// operator's approval (service/defrag.h). Pure.
#ifndef GPUAAS_ALLOCATOR_DEFRAG_H_
#define GPUAAS_ALLOCATOR_DEFRAG_H_

#include <map>
#include <string>
#include <vector>

#include "allocator/snapshot.h"
#include "catalog/catalog.h"

namespace gpuaas::allocator {

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
};

// What a fleet could still hand out: per model and profile, instances (free ones, and those its
// free slots could take, one profile at a time).
using Room = std::map<std::string, std::map<std::string, int>>;

struct DefragPlan {
  std::vector<DefragMove> moves;  // in fleet order
  Room before;
  Room after;  // once every move is made
};

DefragPlan PlanDefrag(const FleetSnapshot& fleet);

// How many instances of `profile` a GPU of `model` laid out as `layout` could hand out: the free
// ones of that profile (`free`, a subset of `layout`) and the new ones its free slots take.
int RoomFor(const catalog::GpuModel& model, const catalog::Layout& layout, const catalog::Layout& free,
            const catalog::MigProfile& profile);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_DEFRAG_H_
