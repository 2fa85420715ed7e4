// What a MIG GPU's free memory slices can still take, by the catalogue's placement rules: which
// free slices some profile could still cover (open) and which none can (stranded), and how many
// more instances of each profile alone fit. The dashboard draws a GPU from these answers, so
// that the rules live here only. Layer 2 of docs/architecture.md, beside catalog.h: pure
// functions of a model and a layout, no I/O, thread-safe.
#ifndef GPUAAS_CATALOG_ROOM_H_
#define GPUAAS_CATALOG_ROOM_H_

#include <span>
#include <vector>

#include "catalog/catalog.h"

namespace gpuaas::catalog {

// The memory slices of a GPU of `model` laid out as `used` that an instance of some profile
// could still cover: the profile could start now at a legal start slot whose run of slices
// includes the slice. Ascending; a slice an instance of `used` holds is never open, and a free
// slice not listed is stranded. Empty when `used` is not a legal layout of `model` (an unknown
// profile, overlapping instances: nothing can be added to it) and for models without MIG.
std::vector<int> OpenSlots(const GpuModel& model, std::span<const Instance> used);

// How many more instances of `profile` (a profile of `model`) alone fit on a GPU of `model` laid
// out as `used`: each placed at its lowest free start, which is the most for one profile (its
// placements are runs of equal length). Counts compute slices, the profile's maximum count and
// the one +me instance a GPU holds. 0 when none fits, when `used` is not a legal layout of
// `model`, or when `profile` is not one of `model`'s.
int FitsMore(const GpuModel& model, std::span<const Instance> used, const MigProfile& profile);

}  // namespace gpuaas::catalog

#endif  // GPUAAS_CATALOG_ROOM_H_
