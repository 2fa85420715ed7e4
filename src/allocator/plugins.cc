// The plugins of the allocator's framework (allocator.h): filters, scorers and the named
// profiles that combine them.
#include <algorithm>
#include <cmath>
#include <memory>

#include "allocator/allocator.h"
#include "allocator/internal/facts.h"

namespace gpuaas::allocator {
namespace {

using catalog::MigProfile;
using internal::Bit;
using internal::Facts;
using internal::IsFull;
using internal::IsShare;
using internal::IsWhole;
using internal::LayoutFacts;
using internal::LayoutKey;
using internal::ShareRoom;

// --- filters -------------------------------------------------------------------------------

class HealthFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "Health"; }
  std::string_view Filter(const CycleState&, const RequestItem&, const GpuState& g) const override {
    if (!g.healthy) return "are unhealthy";
    if (!g.schedulable) return "are on a cordoned node";
    return "";
  }
};

class ClusterFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "Cluster"; }
  std::string_view Filter(const CycleState& s, const RequestItem&, const GpuState& g) const override {
    return !s.request->cluster.empty() && g.cluster != s.request->cluster ? "are in another cluster" : "";
  }
};

// The node must have the CPU and memory the device's share of the item asks for (as the
// Kubernetes scheduler's NodeResourcesFit).
class NodeResourcesFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "NodeResources"; }
  bool Skip(const CycleState& s, const RequestItem& item) const override {
    return s.layout != nullptr ? s.layout->cpu_milli <= 0 && s.layout->memory_mib <= 0
                               : item.cpu_milli <= 0 && item.memory_mib <= 0;
  }
  std::string_view Filter(const CycleState& s, const RequestItem& item, const GpuState& g) const override {
    if (Skip(s, item)) return "";
    // A layout's devices together; otherwise the device's share of its item.
    const auto [cpu, memory] = s.layout != nullptr ? std::pair{s.layout->cpu_milli, s.layout->memory_mib}
                                                   : CycleState::Charge(item, s.unit);
    const auto [cpu_left, memory_left] = s.RoomLeft(g);
    if (cpu_left >= 0 && cpu_left < cpu) return "are on nodes without the CPU it asks for";
    if (memory_left >= 0 && memory_left < memory) return "are on nodes without the memory it asks for";
    return "";
  }
};

// A one-node item's devices share the node of its first one, which must be able to hold them all.
class SameNodeFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "SameNode"; }
  bool Skip(const CycleState&, const RequestItem& item) const override { return !item.one_node; }
  std::string_view Filter(const CycleState& s, const RequestItem& item, const GpuState&) const override {
    if (!item.one_node) return "";
    if (s.unit > 0) return static_cast<int64_t>(s.node) == s.item_node ? "" : "are on other nodes than the item's first device";
    if (IsWhole(item) && item.count > 1 && s.free_full_on_node[s.node] < item.count) {
      return "are on nodes without room for the whole item";
    }
    return "";
  }
};

// --- scorers -------------------------------------------------------------------------------

// Prefer what disturbs least: existing instances, then new instances in free slots or idle whole
// GPUs, and reconfiguration last. A layout goes on an idle GPU either way: one already in MIG
// mode is preferred, below every other score (no mode change), as the least of disturbances.
class TierScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "Tier"; }
  int64_t Score(const CycleState& s, const RequestItem&, const GpuState& g,
                const Option& o) const override {
    if (s.layout != nullptr) return g.mig_enabled ? 1 : 0;
    switch (o.action) {
      case Action::kUseInstance: return 3'000'000'000'000'000;
      case Action::kCreateInstance:
      case Action::kUseGpu:
      case Action::kShareGpu: return 2'000'000'000'000'000;
      case Action::kReconfigure: return 0;
    }
    return 0;
  }
};

// Avoid stranding GPUs behind a node's exhausted CPU and memory. For a pool (which asks for no
// CPU or memory itself): a device whose node cannot give each of this request's devices there
// its share of CPU and memory scores below every one that can (within its tier); a whole GPU
// counts the rest of its item with it, as far as the node could hold it. For an item that asks
// for CPU and memory (a pod's; the NodeResources filter holds it to them): the node whose idle
// GPUs lose the least more of their share, as gpuaas's trace policy (packing.h) ranks nodes.
class StrandingScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "Stranding"; }
  bool Skip(const CycleState& state, const RequestItem&) const override {
    return state.fleet == nullptr || state.fleet->nodes.empty();  // no node's room is known
  }
  int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& g,
                const Option&) const override {
    if (g.node_room < 0 || g.model == nullptr) return 0;
    if (const LayoutDemand* l = state.layout) {  // a whole layout, on an idle GPU
      if (l->cpu_milli > 0 || l->memory_mib > 0) {
        return -std::llround(state.StrandGrowth(g, 1, l->cpu_milli, l->memory_mib) * 1000) * 1'000'000;
      }
      return state.Starves(g, l->gpus) ? kStarves : 0;
    }
    auto free_here = [&] { return state.free_full_on_node[state.node]; };
    if (item.cpu_milli > 0 || item.memory_mib > 0) {
      // What the item asks is taken: the GPUs' worth its node strands the least more of.
      const auto [cpu, memory] = CycleState::Charge(item, state.unit);
      const double idle_taken = IsWhole(item)   ? std::max(1, std::min(state.left, free_here()))
                                : IsShare(item) ? static_cast<double>(item.share_milli) / kMilliGpu
                                                : (g.Idle() ? 1 : 0);
      return -std::llround(state.StrandGrowth(g, idle_taken, cpu, memory) * 1000) * 1'000'000;
    }
    // Within a device's cycle the verdict depends on the node alone: asked once per node.
    int8_t& known = state.node_memo[state.node];
    if (known < 0) {
      double gpus = 1.0;
      if (state.profile != nullptr) {
        gpus = static_cast<double>(state.profile->compute_slices) / g.model->compute_slices;
      } else if (IsShare(item)) {
        gpus = static_cast<double>(item.share_milli) / kMilliGpu;
      } else {  // whole GPUs go together: the rest of the item, as far as the node holds it
        gpus = std::max(1, std::min(state.left, free_here()));
      }
      known = state.Starves(g, gpus) ? 1 : 0;
    }
    return known == 1 ? kStarves : 0;
  }

 private:
  static constexpr int64_t kStarves = -500'000'000'000;
};

// Pack MIG devices onto the fullest GPUs, and at the start slot that keeps the most room for
// large profiles; a reconfigured GPU is laid out to keep that room too. With `shares`, a share
// goes to the shared GPU with the least room that holds it.
class BestFitScore final : public ScorePlugin {
 public:
  explicit BestFitScore(bool shares) : shares_(shares) {}
  std::string_view Name() const override { return "BestFit"; }
  int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& g,
                const Option& o) const override {
    if (state.layout != nullptr) return 0;  // every option of a layout cycle takes the same layout
    if (IsShare(item)) return shares_ && o.action == Action::kShareGpu ? -int64_t{ShareRoom(g) - item.share_milli} * 1000 : 0;
    if (IsFull(item) || g.model == nullptr) return 0;
    const catalog::GpuModel& m = *g.model;
    const MigProfile* p = state.profile != nullptr ? state.profile : catalog::FindProfile(m, item.profile);
    uint64_t key = o.action == Action::kReconfigure ? 0 : LayoutKey(m, g);
    if (o.action != Action::kUseInstance) key |= Bit(m, p, o.start);
    const LayoutFacts& after = Facts(m, key);
    const int64_t remaining = m.compute_slices - after.used_compute;
    return -remaining * 1'000'000 + after.flexibility;
  }

 private:
  bool shares_;
};

// Keep a pool's devices together: prefer nodes that already hold some of them (NVLink and
// locality for multi-GPU work); for whole GPUs, prefer the fullest node that can still take the
// rest of the item, else the roomiest one; a MIG device or layout that needs an idle GPU takes
// it on the node with the fewest GPUs that could still become whole ones (for a layout in steps
// of two, so that Tier's preference for a GPU in MIG mode only breaks ties between such nodes).
class LocalityScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "Locality"; }
  int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& g,
                const Option& o) const override {
    int64_t score = 0;
    if (const int n = state.devices_on_node[state.node]; n > 0) score += 1'000'000'000 + n;
    const bool takes_idle = IsWhole(item) || state.layout != nullptr || o.action == Action::kReconfigure ||
                            ((o.action == Action::kCreateInstance || o.action == Action::kShareGpu) && g.Idle());
    if (!takes_idle) return score;
    const int free = state.free_full_on_node[state.node];
    if (IsWhole(item)) {
      score += free >= state.left ? 500'000'000 - free : free;
    } else if (state.layout != nullptr) {
      score -= 2 * free;
    } else {
      score -= free;  // a MIG device or a share that takes an idle GPU: on the fullest node
    }
    return score;
  }
};

// FGD (Weng et al., "Beware of Fragmentation", USENIX ATC'23): a whole GPU or a share goes
// where the fragmentation of its node against the expected workload grows least (packing.h:
// NodeFragmentation, FragmentationScore). The node is seen as the trace policies see one: the
// thousandths each of its GPUs has left for shares, and the CPU and memory it has left. A
// whole-GPU item that keeps to one node is weighed whole at its first device.
class FragmentationPlugin final : public ScorePlugin {
 public:
  explicit FragmentationPlugin(TypicalPods typical) : typical_(std::move(typical)) {}
  std::string_view Name() const override { return "Fragmentation"; }
  bool Skip(const CycleState& s, const RequestItem& item) const override {
    return !IsFull(item) || s.view == nullptr || s.node_first == nullptr || typical_.empty();
  }
  int64_t Score(const CycleState& s, const RequestItem& item, const GpuState& g, const Option&) const override {
    if (g.model == nullptr) return 0;
    NodeState before;
    const auto [cpu_left, memory_left] = s.RoomLeft(g);
    before.cpu_left = cpu_left < 0 ? kUnknown : cpu_left;
    before.memory_left = memory_left < 0 ? kUnknown : memory_left;
    int at = -1;
    for (const uint32_t pos : s.NodeGpus()) {
      if (before.gpus == kMaxGpusPerNode) break;
      const GpuState& x = s.view->Get(pos);
      if (&x == &g) at = before.gpus;
      int32_t left = 0;
      if (x.healthy && x.model != nullptr) left = x.mig_enabled ? (x.Idle() ? kMilliGpu : 0) : ShareRoom(x);
      before.gpu_left[static_cast<size_t>(before.gpus++)] = left;
    }
    if (at < 0) return 0;  // past the 16 GPUs a node is seen with
    // The node's GPUs are interchangeable for the measure: the score depends on the node and
    // what the GPU at hand has left.
    const uint64_t key = (uint64_t{s.node} << 16) | static_cast<uint64_t>(before.gpu_left[static_cast<size_t>(at)]);
    if (auto it = s.memo.find(key); it != s.memo.end()) return it->second;
    double& frag_before = s.node_value[s.node];
    if (std::isnan(frag_before)) frag_before = NodeFragmentation(g.model->name, before, typical_);
    NodeState after = before;
    const auto [cpu, memory] = CycleState::Charge(item, s.unit);
    after.cpu_left -= cpu;
    after.memory_left -= memory;
    if (IsShare(item)) {
      after.gpu_left[static_cast<size_t>(at)] -= item.share_milli;
    } else {
      after.gpu_left[static_cast<size_t>(at)] = 0;
      int more = item.one_node && s.unit == 0 ? s.left - 1 : 0;  // the rest of the item, here too
      for (int k = 0; k < after.gpus && more > 0; ++k) {
        if (k != at && after.gpu_left[static_cast<size_t>(k)] == kMilliGpu) after.gpu_left[static_cast<size_t>(k)] = 0, --more;
      }
    }
    const int64_t score = allocator::FragmentationScore(frag_before, NodeFragmentation(g.model->name, after, typical_)) * 1'000'000'000'000;
    s.memo.emplace(key, score);
    return score;
  }

 private:
  static constexpr int64_t kUnknown = int64_t{1} << 50;  // room nobody reported: no limit
  TypicalPods typical_;
};

}  // namespace

std::shared_ptr<const Profile> ProfileByName(std::string_view name) {
  if (name == "default") {
    static const std::shared_ptr<const Profile> kDefault = [] {
      auto p = std::make_shared<Profile>();
      p->filters = {std::make_shared<HealthFilter>(), std::make_shared<ClusterFilter>(),
                    std::make_shared<NodeResourcesFilter>(), std::make_shared<SameNodeFilter>()};
      p->scorers = {std::make_shared<TierScore>(), std::make_shared<StrandingScore>(),
                    std::make_shared<BestFitScore>(true), std::make_shared<LocalityScore>()};
      return p;
    }();
    return kDefault;
  }
  return nullptr;
}

std::shared_ptr<const Profile> FragmentationAwareProfile(TypicalPods typical) {
  auto p = std::make_shared<Profile>(*ProfileByName("default"));
  // FGD decides which node a whole GPU or share goes to: Locality's packing of whole GPUs onto
  // the fullest node works against it (docs/packing.md, "gpuaas: the pool allocator").
  std::erase_if(p->scorers, [](const auto& sc) { return sc->Name() == "Locality"; });
  // Among GPUs FGD and the stranding key find equal, a share takes the first in the fleet's
  // order, as FGD's own rule does, not the tightest: best fit there costs allocation on the
  // lists where nearly every pod shares a GPU (docs/packing.md).
  for (auto& sc : p->scorers) {
    if (sc->Name() == "BestFit") sc = std::make_shared<BestFitScore>(false);
  }
  p->scorers.insert(p->scorers.begin() + 1, FragmentationScorer(std::move(typical)));
  return p;
}

std::shared_ptr<const ScorePlugin> FragmentationScorer(TypicalPods typical) {
  return std::make_shared<FragmentationPlugin>(std::move(typical));
}

}  // namespace gpuaas::allocator
