// MIG planning for new GPUs: which layouts hold a set of MIG instances on the fewest GPUs of a
// model. Exact: a breadth-first search over the instances still to place, each step one GPU laid
// out as a maximal layout of the model (every legal layout is part of a maximal one, so the
// fewest steps are the fewest GPUs). The states are the count vectors of what is left (a pool of
// 16 instances over 6 profiles has a few thousand at most) and the moves the distinct count
// vectors of the maximal layouts (tens per model), so a plan takes well under a millisecond.
// Pure.
#ifndef GPUAAS_ALLOCATOR_MIG_PLAN_H_
#define GPUAAS_ALLOCATOR_MIG_PLAN_H_

#include <map>
#include <vector>

#include "catalog/catalog.h"

namespace gpuaas::allocator {

// The layouts of the fewest GPUs of `model` that hold `demand` (profile -> instances), one
// layout a GPU, holding exactly the instances asked for, fullest GPU first; each layout is
// legal and keeps its free slots together (largest profiles placed first). Empty for an empty
// demand, or when a profile is not `model`'s or a count is not positive.
std::vector<catalog::Layout> PackInstances(const catalog::GpuModel& model,
                                           const std::map<const catalog::MigProfile*, int>& demand);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_MIG_PLAN_H_
