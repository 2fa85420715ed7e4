// What the allocator's framework and its plugins both ask of an item and a GPU: the kind of
// device an item wants, a shared GPU's room, and the facts of a MIG layout (worked out once per
// distinct layout). Internal to the allocator.
#ifndef GPUAAS_ALLOCATOR_INTERNAL_FACTS_H_
#define GPUAAS_ALLOCATOR_INTERNAL_FACTS_H_

#include <cstdint>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/snapshot.h"
#include "catalog/catalog.h"

namespace gpuaas::allocator::internal {

// Whole GPUs and shares of them (which take a GPU with MIG disabled, as whole GPUs do).
inline bool IsFull(const RequestItem& item) { return item.profile == catalog::kFullProfile; }
inline bool IsShare(const RequestItem& item) { return IsFull(item) && item.share_milli > 0; }
inline bool IsWhole(const RequestItem& item) { return IsFull(item) && item.share_milli == 0; }

// What a whole GPU with MIG disabled has left for shares, in thousandths; 0 when it is held
// whole or runs work.
int32_t ShareRoom(const GpuState& g);

// What the allocator asks of a MIG layout, computed once per distinct layout: layouts repeat
// across a fleet, and these questions are asked for every GPU of every decision.
struct LayoutFacts {
  int used_compute = 0;
  // Free start slots per profile (indexed like GpuModel::profiles).
  std::vector<std::vector<int>> free_starts;
  // How many (profile, start) placements the GPU could still take, weighted by compute slices:
  // how much room for large profiles the layout keeps.
  int64_t flexibility = 0;
};

// A layout as a bit set of (profile index, start) pairs; models have at most 8 profiles and
// 8 memory slices, so 64 bits hold any layout.
uint64_t Bit(const catalog::GpuModel& m, const catalog::MigProfile* p, int start);
uint64_t LayoutKey(const catalog::GpuModel& m, const GpuState& g);
uint64_t LayoutKey(const catalog::GpuModel& m, const catalog::Layout& layout);
// The facts of the layout `key` of model `m` (memoised per thread).
const LayoutFacts& Facts(const catalog::GpuModel& m, uint64_t key);

}  // namespace gpuaas::allocator::internal

#endif  // GPUAAS_ALLOCATOR_INTERNAL_FACTS_H_
