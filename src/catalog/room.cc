#include "catalog/room.h"

#include <algorithm>

namespace gpuaas::catalog {

std::vector<int> OpenSlots(const GpuModel& model, std::span<const Instance> used) {
  std::vector<bool> open(static_cast<size_t>(std::max(model.memory_slices, 0)), false);
  for (const MigProfile& p : model.profiles) {
    for (int start : FreeStarts(model, used, p)) {
      for (int s = start; s < start + p.memory_slices && s < model.memory_slices; ++s) {
        open[static_cast<size_t>(s)] = true;
      }
    }
  }
  std::vector<int> out;
  for (size_t s = 0; s < open.size(); ++s) {
    if (open[s]) out.push_back(static_cast<int>(s));
  }
  return out;
}

int FitsMore(const GpuModel& model, std::span<const Instance> used, const MigProfile& profile) {
  Layout grown(used.begin(), used.end());
  int n = 0;
  for (;;) {
    // FreeStarts is empty for a profile of another model and for an illegal layout.
    const std::vector<int> starts = FreeStarts(model, grown, profile);
    if (starts.empty()) return n;
    grown.push_back({&profile, starts.front()});
    ++n;
  }
}

}  // namespace gpuaas::catalog
