#include "allocator/mig_plan.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gpuaas::allocator {
namespace {

using catalog::GpuModel;
using catalog::MigProfile;

// Counts per profile (indexed like GpuModel::profiles); models have at most 8 profiles.
using Counts = std::array<uint8_t, 8>;

uint64_t Key(const Counts& c) {
  uint64_t k = 0;
  for (size_t i = 0; i < c.size(); ++i) k |= uint64_t{c[i]} << (8 * i);
  return k;
}

// A GPU's worth of instances: the count vector of a maximal layout, and that layout.
struct Move {
  Counts counts;
  catalog::Layout layout;
};

// The distinct count vectors of the model's maximal layouts, computed once per model.
const std::vector<Move>& Moves(const GpuModel& m) {
  static std::mutex mu;
  static std::unordered_map<const GpuModel*, std::vector<Move>> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto it = memo.find(&m);
  if (it != memo.end()) return it->second;
  std::vector<Move> moves;
  for (const catalog::Layout& layout : catalog::MaximalLayouts(m)) {
    Counts c{};
    for (const catalog::Instance& i : layout) ++c[static_cast<size_t>(i.profile - m.profiles.data())];
    if (std::none_of(moves.begin(), moves.end(), [&](const Move& mv) { return mv.counts == c; })) {
      moves.push_back({c, layout});
    }
  }
  return memo.emplace(&m, std::move(moves)).first->second;
}

}  // namespace

std::vector<catalog::Layout> PackInstances(const GpuModel& m, const std::map<const MigProfile*, int>& demand) {
  Counts want{};
  int total = 0;
  for (const auto& [p, n] : demand) {
    if (p == nullptr || n <= 0 || n > 255 || p < m.profiles.data() || p >= m.profiles.data() + m.profiles.size()) {
      return {};
    }
    want[static_cast<size_t>(p - m.profiles.data())] = static_cast<uint8_t>(n);
    total += n;
  }
  if (total == 0) return {};
  const std::vector<Move>& moves = Moves(m);
  // Breadth-first from what is asked to nothing left; each state remembers the move into it.
  struct Seen {
    uint64_t from;
    size_t move;
  };
  std::unordered_map<uint64_t, Seen> seen;
  std::deque<Counts> queue = {want};
  seen[Key(want)] = {Key(want), 0};
  const Counts none{};
  bool done = false;
  while (!queue.empty() && !done) {
    const Counts at = queue.front();
    queue.pop_front();
    for (size_t mv = 0; mv < moves.size(); ++mv) {
      Counts next = at;
      bool helps = false;
      for (size_t i = 0; i < next.size(); ++i) {
        const uint8_t take = std::min(next[i], moves[mv].counts[i]);
        helps = helps || take > 0;
        next[i] = static_cast<uint8_t>(next[i] - take);
      }
      if (!helps) continue;
      auto [it, added] = seen.try_emplace(Key(next), Seen{Key(at), mv});
      if (!added) continue;
      if (next == none) {
        done = true;
        break;
      }
      queue.push_back(next);
    }
  }
  if (!done) return {};  // a profile no layout holds (cannot happen for the model's own)
  // Walk back: each step is one GPU holding what that move took.
  std::vector<catalog::Layout> out;
  uint64_t at = Key(none);
  while (at != Key(want)) {
    const Seen& s = seen.at(at);
    Counts before{};
    for (size_t i = 0; i < before.size(); ++i) before[i] = static_cast<uint8_t>((s.from >> (8 * i)) & 0xff);
    std::vector<std::string> names;
    Counts took{};
    for (size_t i = 0; i < m.profiles.size(); ++i) {
      took[i] = std::min(before[i], moves[s.move].counts[i]);
      for (int k = 0; k < took[i]; ++k) names.emplace_back(m.profiles[i].name);
    }
    absl::StatusOr<catalog::Layout> placed = catalog::PlaceProfiles(m, names);
    if (!placed.ok()) {
      // The maximal layout itself, less what is not needed: legal, as any part of it is.
      placed = catalog::Layout{};
      for (const catalog::Instance& inst : moves[s.move].layout) {
        uint8_t& left = took[static_cast<size_t>(inst.profile - m.profiles.data())];
        if (left == 0) continue;
        --left;
        placed->push_back(inst);
      }
    }
    out.push_back(std::move(*placed));
    at = s.from;
  }
  auto used = [](const catalog::Layout& l) {
    int n = 0;
    for (const catalog::Instance& i : l) n += i.profile->memory_slices;
    return n;
  };
  std::stable_sort(out.begin(), out.end(), [&](const catalog::Layout& a, const catalog::Layout& b) { return used(a) > used(b); });
  return out;
}

}  // namespace gpuaas::allocator
