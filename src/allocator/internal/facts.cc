#include "allocator/internal/facts.h"

#include <array>
#include <unordered_map>

namespace gpuaas::allocator::internal {

int32_t ShareRoom(const GpuState& g) {
  if (g.mig_enabled || !g.owner.empty() || g.busy) return 0;
  return kMilliGpu - g.SharedMilli();
}

uint64_t Bit(const catalog::GpuModel& m, const catalog::MigProfile* p, int start) {
  return uint64_t{1} << ((p - m.profiles.data()) * 8 + start);
}

uint64_t LayoutKey(const catalog::GpuModel& m, const GpuState& g) {
  uint64_t key = 0;
  for (const InstanceState& i : g.instances) key |= Bit(m, i.profile, i.start);
  return key;
}

uint64_t LayoutKey(const catalog::GpuModel& m, const catalog::Layout& layout) {
  uint64_t key = 0;
  for (const catalog::Instance& i : layout) key |= Bit(m, i.profile, i.start);
  return key;
}

const LayoutFacts& Facts(const catalog::GpuModel& m, uint64_t key) {
  // Per thread, so that concurrent decisions need no lock; bounded by the number of legal
  // layouts of the models in use (hundreds to a few thousand each). A fleet repeats few layouts
  // and a decision asks about the same ones GPU after GPU: the last four answers are looked at
  // before the map (its entries never move).
  struct Recent {
    const catalog::GpuModel* model = nullptr;
    uint64_t key = 0;
    const LayoutFacts* facts = nullptr;
  };
  thread_local std::array<Recent, 4> recent{};
  thread_local size_t next = 0;
  for (const Recent& r : recent) {
    if (r.model == &m && r.key == key) return *r.facts;
  }
  thread_local std::unordered_map<const catalog::GpuModel*, std::unordered_map<uint64_t, LayoutFacts>> memo;
  auto& by_key = memo[&m];
  auto it = by_key.find(key);
  if (it != by_key.end()) {
    recent[next++ % recent.size()] = {&m, key, &it->second};
    return it->second;
  }
  catalog::Layout layout;
  for (size_t p = 0; p < m.profiles.size(); ++p) {
    for (int s = 0; s < 8; ++s) {
      if (key & (uint64_t{1} << (p * 8 + s))) layout.push_back({&m.profiles[p], s});
    }
  }
  LayoutFacts f;
  for (const catalog::Instance& i : layout) f.used_compute += i.profile->compute_slices;
  f.free_starts.resize(m.profiles.size());
  for (size_t p = 0; p < m.profiles.size(); ++p) {
    f.free_starts[p] = catalog::FreeStarts(m, layout, m.profiles[p]);
    f.flexibility += static_cast<int64_t>(f.free_starts[p].size()) * m.profiles[p].compute_slices;
  }
  const LayoutFacts& made = by_key.emplace(key, std::move(f)).first->second;
  recent[next++ % recent.size()] = {&m, key, &made};
  return made;
}

}  // namespace gpuaas::allocator::internal
