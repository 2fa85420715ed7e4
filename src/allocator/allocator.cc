#include "allocator/allocator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "allocator/mig_plan.h"
#include "fmt/format.h"

namespace gpuaas::allocator {
namespace {

using catalog::GpuModel;
using catalog::MigProfile;

// Whole GPUs and shares of them (which take a GPU with MIG disabled, as whole GPUs do).
bool IsFull(const RequestItem& item) { return item.profile == catalog::kFullProfile; }
bool IsShare(const RequestItem& item) { return IsFull(item) && item.share_milli > 0; }
bool IsWhole(const RequestItem& item) { return IsFull(item) && item.share_milli == 0; }

// What a whole GPU with MIG disabled has left for shares, in thousandths; 0 when it is held
// whole or runs work.
int32_t ShareRoom(const GpuState& g) {
  if (g.mig_enabled || !g.owner.empty() || g.busy) return 0;
  return kMilliGpu - g.SharedMilli();
}

// The working state of one Allocate call: the snapshot plus copies of the GPUs this request has
// reserved on. Unreserve is dropping the copies, so it undoes exactly what Reserve did.
class Overlay final : public GpuView {
 public:
  explicit Overlay(const FleetSnapshot& base) : base_(base), marked_(base.gpus.size(), false) {}
  const GpuState& Get(size_t i) const override { return marked_[i] ? changed_.at(i) : base_.gpus[i]; }
  GpuState& Mutable(size_t i) {
    auto it = changed_.find(i);
    if (it == changed_.end()) it = changed_.emplace(i, base_.gpus[i]).first;
    marked_[i] = true;
    return it->second;
  }
  const std::unordered_map<size_t, GpuState>& changed() const { return changed_; }
  size_t size() const { return base_.gpus.size(); }

 private:
  const FleetSnapshot& base_;
  std::unordered_map<size_t, GpuState> changed_;
  std::vector<bool> marked_;  // which GPUs are in changed_ (a lookup a GPU visited is too dear)
};

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
uint64_t Bit(const GpuModel& m, const MigProfile* p, int start) {
  return uint64_t{1} << ((p - m.profiles.data()) * 8 + start);
}

uint64_t LayoutKey(const GpuModel& m, const GpuState& g) {
  uint64_t key = 0;
  for (const InstanceState& i : g.instances) key |= Bit(m, i.profile, i.start);
  return key;
}

const LayoutFacts& Facts(const GpuModel& m, uint64_t key) {
  // Per thread, so that concurrent decisions need no lock; bounded by the number of legal
  // layouts of the models in use (hundreds to a few thousand each). A fleet repeats few layouts
  // and a decision asks about the same ones GPU after GPU: the last four answers are looked at
  // before the map (its entries never move).
  struct Recent {
    const GpuModel* model = nullptr;
    uint64_t key = 0;
    const LayoutFacts* facts = nullptr;
  };
  thread_local std::array<Recent, 4> recent{};
  thread_local size_t next = 0;
  for (const Recent& r : recent) {
    if (r.model == &m && r.key == key) return *r.facts;
  }
  thread_local std::unordered_map<const GpuModel*, std::unordered_map<uint64_t, LayoutFacts>> memo;
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
  bool Skip(const CycleState&, const RequestItem& item) const override { return item.cpu_milli <= 0 && item.memory_mib <= 0; }
  std::string_view Filter(const CycleState& s, const RequestItem& item, const GpuState& g) const override {
    if (item.cpu_milli <= 0 && item.memory_mib <= 0) return "";
    const auto [cpu, memory] = CycleState::Charge(item, s.unit);
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
// GPUs, and reconfiguration last.
class TierScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "Tier"; }
  int64_t Score(const CycleState&, const RequestItem&, const GpuState&,
                const Option& o) const override {
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
    return known == 1 ? -500'000'000'000 : 0;
  }
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
// rest of the item, else the roomiest one; a MIG device that needs an idle GPU takes it on the
// node with the fewest GPUs that could still become whole ones.
class LocalityScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "Locality"; }
  int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& g,
                const Option& o) const override {
    int64_t score = 0;
    if (const int n = state.devices_on_node[state.node]; n > 0) score += 1'000'000'000 + n;
    const bool takes_idle = IsWhole(item) || o.action == Action::kReconfigure ||
                            ((o.action == Action::kCreateInstance || o.action == Action::kShareGpu) && g.Idle());
    if (!takes_idle) return score;
    const int free = state.free_full_on_node[state.node];
    if (IsWhole(item)) {
      score += free >= state.left ? 500'000'000 - free : free;
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

std::string Plural(int64_t n, std::string_view what) {
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

}  // namespace

std::string_view ToString(Action a) {
  switch (a) {
    case Action::kUseInstance: return "UseInstance";
    case Action::kCreateInstance: return "CreateInstance";
    case Action::kUseGpu: return "UseGpu";
    case Action::kShareGpu: return "ShareGpu";
    case Action::kReconfigure: return "Reconfigure";
  }
  return "Unknown";
}

std::pair<int64_t, int64_t> CycleState::Charge(const RequestItem& item, int unit) {
  if (item.count <= 0) return {0, 0};
  if (item.one_node) return unit == 0 ? std::pair{item.cpu_milli, item.memory_mib} : std::pair<int64_t, int64_t>{0, 0};
  auto part = [&](int64_t total) { return total * (unit + 1) / item.count - total * unit / item.count; };
  return {part(item.cpu_milli), part(item.memory_mib)};
}

std::pair<int64_t, int64_t> CycleState::RoomLeft(const GpuState& g) const {
  if (fleet == nullptr || g.node_room < 0 || static_cast<size_t>(g.node_room) >= fleet->nodes.size()) return {-1, -1};
  const NodeRoom& room = fleet->nodes[static_cast<size_t>(g.node_room)];
  int64_t cpu = room.cpu_free_milli, memory = room.memory_free_mib;
  if (auto t = taken_on_node.find(g.node_room); t != taken_on_node.end()) {
    if (cpu >= 0) cpu = std::max<int64_t>(0, cpu - t->second.first);
    if (memory >= 0) memory = std::max<int64_t>(0, memory - t->second.second);
  }
  return {cpu, memory};
}

bool CycleState::Starves(const GpuState& g, double gpus) const {
  if (fleet == nullptr || g.node_room < 0 || static_cast<size_t>(g.node_room) >= fleet->nodes.size()) return false;
  const NodeRoom& room = fleet->nodes[static_cast<size_t>(g.node_room)];
  const double worth = gpus + gpus_on_node[node];
  const auto [cpu_left, memory_left] = RoomLeft(g);
  auto short_of = [worth](int64_t have, double share) {
    return have >= 0 && share > 0 && static_cast<double>(have) < worth * share;
  };
  return short_of(cpu_left, room.cpu_share_milli) || short_of(memory_left, room.memory_share_mib);
}

double StrandedGpus(const NodeRoom& room, double free_gpus, int64_t cpu_left, int64_t memory_left) {
  double s = 0;
  if (cpu_left >= 0 && room.cpu_share_milli > 0) {
    s = std::max(s, free_gpus - static_cast<double>(cpu_left) / room.cpu_share_milli);
  }
  if (memory_left >= 0 && room.memory_share_mib > 0) {
    s = std::max(s, free_gpus - static_cast<double>(memory_left) / room.memory_share_mib);
  }
  return s;
}

double CycleState::StrandGrowth(const GpuState& g, double idle_taken, int64_t cpu, int64_t memory) const {
  if (fleet == nullptr || g.node_room < 0 || static_cast<size_t>(g.node_room) >= fleet->nodes.size()) return 0;
  const NodeRoom& room = fleet->nodes[static_cast<size_t>(g.node_room)];
  const auto [cpu_left, memory_left] = RoomLeft(g);
  const double free = free_full_on_node[node] + shared_room_on_node[node];
  return StrandedGpus(room, std::max(0.0, free - idle_taken), cpu_left < 0 ? -1 : std::max<int64_t>(0, cpu_left - cpu),
                      memory_left < 0 ? -1 : std::max<int64_t>(0, memory_left - memory)) -
         StrandedGpus(room, free, cpu_left, memory_left);
}

std::span<const uint32_t> CycleState::NodeGpus() const {
  if (node_first == nullptr || node_gpus == nullptr || node + 1 >= node_first->size()) return {};
  return {node_gpus->data() + (*node_first)[node], (*node_first)[node + 1] - (*node_first)[node]};
}

int Plan::ReconfiguredGpus() const {
  int n = 0;
  for (const auto& [uuid, c] : gpu_changes) n += c.reconfigure ? 1 : 0;
  return n;
}

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

namespace {

// The GPU models `names` allows (RequestItem::model): models the fleet's GPUs carry, and
// catalogue models, by name; "*" is every model of the fleet. False
// (with the name in `unknown`) when a name is neither.
bool ModelsOf(const FleetSnapshot& fleet, const SnapshotIndex* index, std::string_view names,
              std::vector<const GpuModel*>& out, std::string& unknown) {
  out.clear();
  std::vector<const GpuModel*> fleet_models;
  auto in_fleet = [&]() -> const std::vector<const GpuModel*>& {
    if (!fleet_models.empty()) return fleet_models;
    if (index != nullptr) {
      for (const auto& [m, of] : index->models) fleet_models.push_back(m);
    } else {
      for (const GpuState& g : fleet.gpus) {
        if (g.model != nullptr && std::find(fleet_models.begin(), fleet_models.end(), g.model) == fleet_models.end()) {
          fleet_models.push_back(g.model);
        }
      }
    }
    return fleet_models;
  };
  if (names == "*") {
    out = in_fleet();
    return true;
  }
  size_t pos = 0;
  while (pos <= names.size()) {
    const size_t bar = std::min(names.find('|', pos), names.size());
    const std::string_view name = names.substr(pos, bar - pos);
    pos = bar + 1;
    // The fleet's own model of that exact name first (a simulated cluster's, which may share a
    // name with a catalogue model), then the catalogue's.
    const GpuModel* m = nullptr;
    for (const GpuModel* f : in_fleet()) {
      if (f->name == name) m = f;
    }
    if (m == nullptr) m = catalog::FindModel(name);
    if (m == nullptr) {
      unknown = std::string(name);
      return false;
    }
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  }
  return true;
}

bool Allowed(const std::vector<const GpuModel*>& models, const GpuModel* m) {
  return m != nullptr && std::find(models.begin(), models.end(), m) != models.end();
}

}  // namespace

int64_t FleetCapacity(const FleetSnapshot& fleet, const std::string& model, const std::string& profile) {
  std::vector<const GpuModel*> models;
  std::string unknown;
  if (!ModelsOf(fleet, nullptr, model, models, unknown) || models.empty()) return 0;
  int per_gpu = 1;
  if (profile != catalog::kFullProfile) {
    const MigProfile* p = models.size() == 1 ? catalog::FindProfile(*models[0], profile) : nullptr;
    if (p == nullptr) return 0;
    per_gpu = p->max_count;
  }
  int64_t gpus = 0;
  for (const GpuState& g : fleet.gpus) gpus += Allowed(models, g.model) ? 1 : 0;
  return gpus * per_gpu;
}

namespace {

// Why a GPU offers nothing for the item (for the explanation), given it passed the filters: a
// plural phrase, as "N GPUs <phrase>" reads (Counted makes it agree with one).
std::string_view NoRoomReason(const GpuState& g, const RequestItem& item, std::string_view pool) {
  // A decision places a pool's devices one at a time: the GPUs it has taken so far (and the
  // pool's own devices, when it is replacing some) are this pool's, not another's.
  const bool own = !pool.empty() && (g.owner == pool ||
                   std::any_of(g.instances.begin(), g.instances.end(), [&](const InstanceState& i) { return i.owner == pool; }) ||
                   std::any_of(g.shares.begin(), g.shares.end(), [&](const GpuShare& sh) { return sh.owner == pool; }));
  if (own) return "are taken by this pool's other devices";
  const bool full = IsFull(item);
  if (full && !g.mig_enabled && !g.shares.empty() && g.owner.empty() && !g.busy) {
    return IsShare(item) ? "are shared and have too little left for the share" : "are shared by others";
  }
  const bool runs = g.busy || std::any_of(g.instances.begin(), g.instances.end(),
                                          [](const InstanceState& i) { return i.busy; });
  if (full) {
    if (!g.mig_enabled) return runs ? "are whole GPUs that run workloads" : "are allocated to other pools";
    return runs ? "have MIG instances that run workloads" : "have MIG instances allocated to pools";
  }
  if (!g.mig_enabled) return runs ? "are whole GPUs that run workloads" : "are whole GPUs allocated to pools";
  return runs ? "have no free slot and could take it only after reconfiguration, but run workloads"
              : "have no free slot and could take it only after reconfiguration, but hold other pools' devices";
}

// "N <phrase>" with the verb of a plural phrase made to agree with one ("1 is unhealthy").
std::string Counted(int n, std::string_view phrase) {
  if (n == 1) {
    if (phrase.rfind("are ", 0) == 0) return fmt::format("1 is {}", phrase.substr(4));
    if (phrase.rfind("have ", 0) == 0) return fmt::format("1 has {}", phrase.substr(5));
  }
  return fmt::format("{} {}", n, phrase);
}

// The options of one GPU, kept inline: a decision asks every GPU it visits. At most one per
// instance and one per start slot (8 memory slices each) on a legal layout, which is all a
// snapshot holds (BuildSnapshot sets a GPU whose reported layout is not legal aside); past its
// room a list offers no more.
class OptionList {
 public:
  void clear() { n_ = 0; }
  void push_back(const Option& o) {
    if (n_ < v_.size()) v_[n_++] = o;
  }
  bool empty() const { return n_ == 0; }
  const Option* begin() const { return v_.data(); }
  const Option* end() const { return v_.data() + n_; }
  template <class Pred>
  void erase_if(Pred pred) {
    n_ = static_cast<size_t>(std::remove_if(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(n_), pred) - v_.begin());
  }

 private:
  std::array<Option, 24> v_{};
  size_t n_ = 0;
};

// The options GPU `g` offers for one device of `item` (after the filters passed).
// (Into `out`, reused between GPUs: a decision visits many.)
void Options(const GpuState& g, const RequestItem& item, const MigProfile* p, OptionList& out) {
  out.clear();
  if (IsFull(item)) {
    if (!g.mig_enabled) {
      if (IsShare(item)) {
        if (ShareRoom(g) >= item.share_milli) out.push_back({Action::kShareGpu, 0, 0});
      } else if (g.owner.empty() && !g.busy && g.shares.empty()) {
        out.push_back({Action::kUseGpu, 0, 0});
      }
    } else if (g.Idle()) {
      out.push_back({Action::kReconfigure, 0, 0});
    }
    return;
  }
  if (!g.model->mig_capable) return;
  if (g.mig_enabled) {
    for (size_t i = 0; i < g.instances.size(); ++i) {
      const InstanceState& inst = g.instances[i];
      if (inst.profile == p && inst.owner.empty() && !inst.busy) {
        out.push_back({Action::kUseInstance, inst.start, i});
      }
    }
    const LayoutFacts& facts = Facts(*g.model, LayoutKey(*g.model, g));
    for (int s : facts.free_starts[static_cast<size_t>(p - g.model->profiles.data())]) {
      out.push_back({Action::kCreateInstance, s, 0});
    }
    if (out.empty() && g.Idle()) {
      for (int s : p->starts) out.push_back({Action::kReconfigure, s, 0});
    }
  } else if (g.Idle()) {
    for (int s : p->starts) out.push_back({Action::kReconfigure, s, 0});
  }
}

void Reserve(GpuState& g, const Request& req, const RequestItem& item, const MigProfile* p,
             const Option& o, Plan& plan, Placement& out) {
  out.cluster = g.cluster;
  out.node = g.node;
  out.gpu_uuid = g.uuid;
  out.profile = item.profile;
  out.action = o.action;
  out.start = o.start;
  if (IsFull(item)) {
    if (o.action == Action::kReconfigure) {
      g.mig_enabled = false;
      g.instances.clear();
      plan.gpu_changes[g.uuid] = {{}, false, true};
    }
    if (IsShare(item)) {
      g.shares.push_back({req.pool, item.share_milli});
      out.share_milli = item.share_milli;
    } else {
      g.owner = req.pool;
    }
    return;
  }
  bool reconfigure = o.action == Action::kReconfigure;
  switch (o.action) {
    case Action::kUseInstance:
      g.instances[o.instance].owner = req.pool;
      out.instance_uuid = g.instances[o.instance].uuid;
      return;
    case Action::kReconfigure:
      g.mig_enabled = true;
      g.instances.clear();
      [[fallthrough]];
    case Action::kCreateInstance:
      g.instances.push_back({p, o.start, "", req.pool, false});
      break;
    case Action::kUseGpu:
    case Action::kShareGpu:
      return;
  }
  Plan::GpuChange& change = plan.gpu_changes[g.uuid];
  change.layout = g.Layout();
  change.mig_enabled = true;
  change.reconfigure = change.reconfigure || reconfigure;
}

}  // namespace

Outcome Allocate(const FleetSnapshot& fleet, const Request& req, const Profile& profile, bool scan_fleet) {
  Outcome out;
  SnapshotIndex own;
  const SnapshotIndex* index = nullptr;
  if (!scan_fleet) {
    if (fleet.index.built_for == fleet.gpus.data() && fleet.index.size == fleet.gpus.size()) {
      index = &fleet.index;
    } else {
      own = IndexGpus(fleet.gpus);
      index = &own;
    }
  }
  auto of_model = [&](const GpuModel* m) -> const SnapshotIndex::OfModel* {
    if (index == nullptr) return nullptr;
    auto it = index->models.find(m);
    return it == index->models.end() ? nullptr : &it->second;
  };
  // PreFilter: every item must be possible on this fleet at all.
  std::vector<const MigProfile*> profiles;
  std::vector<std::vector<const GpuModel*>> models(req.items.size());  // per item, what it allows
  std::vector<std::string> names;  // per item, the model(s) as messages name them
  for (size_t it = 0; it < req.items.size(); ++it) {
    const RequestItem& item = req.items[it];
    std::string unknown;
    if (!ModelsOf(fleet, index, item.model, models[it], unknown)) {
      return {Code::kUnschedulableAndUnresolvable, {}, fmt::format("unknown GPU model \"{}\"", unknown)};
    }
    const std::vector<const GpuModel*>& ms = models[it];
    names.push_back(ms.size() == 1 ? std::string(ms[0]->name) : item.model == "*" ? "(any model)" : item.model);
    const MigProfile* p = nullptr;
    if (!IsFull(item)) {
      if (ms.size() != 1) {
        return {Code::kUnschedulableAndUnresolvable, {},
                fmt::format("MIG profile \"{}\" of \"{}\": a MIG item names one GPU model", item.profile, item.model)};
      }
      p = catalog::FindProfile(*ms[0], item.profile);
      if (p == nullptr) {
        return {Code::kUnschedulableAndUnresolvable, {},
                fmt::format("{} has no MIG profile \"{}\"", ms[0]->name, item.profile)};
      }
    }
    if (item.share_milli != 0 && (!IsFull(item) || item.share_milli < 0 || item.share_milli >= kMilliGpu)) {
      return {Code::kUnschedulableAndUnresolvable, {},
              fmt::format("{}/{}: a share is 1 to 999 thousandths of a whole GPU, not {}", item.model, item.profile,
                          item.share_milli)};
    }
    if (item.count <= 0) {
      return {Code::kUnschedulableAndUnresolvable, {},
              fmt::format("{}/{}: count must be positive", item.model, item.profile)};
    }
    int64_t cap = 0;
    if (index == nullptr) {
      cap = FleetCapacity(fleet, item.model, item.profile);
    } else {
      for (const GpuModel* m : ms) {
        if (const SnapshotIndex::OfModel* of = of_model(m)) cap += static_cast<int64_t>(of->all.size());
      }
      cap *= p == nullptr ? 1 : p->max_count;
    }
    if (cap < item.count) {
      return {Code::kUnschedulableAndUnresolvable, {},
              fmt::format("{} x {}/{} is more than the whole fleet could hold ({})", item.count,
                          names.back(), item.profile, cap)};
    }
    profiles.push_back(p);
  }

  Overlay work(fleet);
  // Node numbers, from the snapshot's index where it has one for these GPUs (also when the
  // decision visits every GPU), else made for this call.
  const bool has_index = fleet.index.built_for == fleet.gpus.data() && fleet.index.size == fleet.gpus.size();
  const SnapshotIndex* numbered = index != nullptr ? index : has_index ? &fleet.index : nullptr;
  if (numbered == nullptr) {  // (only when visiting every GPU of an unindexed snapshot)
    own = IndexGpus(fleet.gpus);
    numbered = &own;
  }
  const uint32_t nodes = numbered->nodes;
  const std::vector<uint32_t>& node_of = numbered->node_of;
  CycleState state;
  state.request = &req;
  state.fleet = &fleet;
  state.view = &work;
  state.node_first = &numbered->node_first;
  state.node_gpus = &numbered->node_gpus;
  state.node_value.assign(nodes, std::numeric_limits<double>::quiet_NaN());
  state.devices_on_node.assign(nodes, 0);
  state.free_full_on_node.assign(nodes, 0);
  state.shared_room_on_node.assign(nodes, 0.0);
  state.gpus_on_node.assign(nodes, 0.0);
  state.node_memo.assign(nodes, -1);
  // One device of item `it` (the `unit`-th) on the best GPU, by the filters and scores; with
  // `existing_only`, only as a free instance that exists or a new one in free slots. False (and
  // the failure in `out` unless `existing_only`) when no GPU offers it.
  // The GPUs worth visiting for a device of `item` (ascending positions): from the index, and
  // every GPU this request has changed; with no index, or `every`, all of them.
  std::vector<uint32_t> visit;
  std::vector<const std::vector<uint32_t>*> lists;
  auto candidates = [&](const RequestItem& item, const std::vector<const GpuModel*>& ms, const MigProfile* p,
                        bool existing_only, bool every) {
    visit.clear();
    if (index == nullptr || every) {
      for (size_t i = 0; i < work.size(); ++i) visit.push_back(static_cast<uint32_t>(i));
      return;
    }
    lists.clear();
    for (const GpuModel* m : ms) {
      const SnapshotIndex::OfModel* of = of_model(m);
      if (of == nullptr) continue;
      if (IsFull(item)) {
        lists.push_back(&of->whole_free);
        lists.push_back(&of->idle_mig);
        if (IsShare(item)) lists.push_back(&of->shared);
      } else if (existing_only) {
        const auto at = static_cast<size_t>(p - m->profiles.data());
        lists.push_back(&of->free_instance[at]);
        lists.push_back(&of->free_slots[at]);
      } else {
        lists.push_back(&of->all);
      }
    }
    // The index's lists are ascending: two (of one model) are merged. More are whole-GPU and
    // share lists of several models, which no GPU is in twice: joined unsorted (a decision
    // breaks ties by position, not by the order of its visit), the request's own GPUs added.
    if (lists.size() > 2) {
      for (const std::vector<uint32_t>* l : lists) visit.insert(visit.end(), l->begin(), l->end());
      for (const auto& [i, g] : work.changed()) {
        if (Allowed(ms, g.model) && std::find(visit.begin(), visit.end(), static_cast<uint32_t>(i)) == visit.end()) {
          visit.push_back(static_cast<uint32_t>(i));
        }
      }
      return;
    }
    if (lists.size() == 1) {
      visit = *lists[0];
    } else if (lists.size() == 2) {
      const std::vector<uint32_t>&a = *lists[0], &b = *lists[1];
      visit.resize(a.size() + b.size());
      visit.erase(std::set_union(a.begin(), a.end(), b.begin(), b.end(), visit.begin()), visit.end());
    }
    const size_t indexed = visit.size();
    for (const auto& [i, g] : work.changed()) {
      if (Allowed(ms, g.model)) visit.push_back(static_cast<uint32_t>(i));
    }
    if (visit.size() > indexed) {  // the request's own GPUs, few: sorted in
      std::sort(visit.begin() + static_cast<std::ptrdiff_t>(indexed), visit.end());
      std::inplace_merge(visit.begin(), visit.begin() + static_cast<std::ptrdiff_t>(indexed), visit.end());
      visit.erase(std::unique(visit.begin(), visit.end()), visit.end());
    }
  };
  // Books device `unit` of `item`, just reserved on the GPU at position `i`, in the cycle state
  // and the placement.
  auto Taken = [&](size_t i, const RequestItem& item, int unit, Placement& placement) {
    const GpuState& g = work.Get(i);
    const uint32_t node = node_of[i];
    ++state.devices_on_node[node];
    state.gpus_on_node[node] += IsShare(item)                     ? static_cast<double>(item.share_milli) / kMilliGpu
                                : IsFull(item) || g.model == nullptr ? 1.0
                                                                     : static_cast<double>(catalog::FindProfile(*g.model, item.profile)->compute_slices) /
                                                                           g.model->compute_slices;
    if (unit == 0) state.item_node = node;
    const auto [cpu, memory] = CycleState::Charge(item, unit);
    placement.cpu_milli = cpu;
    placement.memory_mib = memory;
    if ((cpu > 0 || memory > 0) && g.node_room >= 0) {
      auto& t = state.taken_on_node[g.node_room];
      t.first += cpu;
      t.second += memory;
    }
  };
  std::function<bool(size_t, int, bool, bool)> place = [&](size_t it, int unit, bool existing_only, bool every) -> bool {
    const RequestItem& item = req.items[it];
    const std::vector<const GpuModel*>& ms = models[it];
    const MigProfile* p = profiles[it];
    state.unit = unit;
    state.left = item.count - unit;
    state.profile = p;
    std::map<std::string_view, int> rejected;
    int considered = 0;
    size_t best_gpu = 0;
    Option best_option;
    int64_t best_score = std::numeric_limits<int64_t>::min();
    bool found = false;
    candidates(item, ms, p, existing_only, every);
    std::fill(state.node_memo.begin(), state.node_memo.end(), int8_t{-1});
    std::fill(state.node_value.begin(), state.node_value.end(), std::numeric_limits<double>::quiet_NaN());
    state.memo.clear();
    OptionList options;
    std::vector<const FilterPlugin*> filters;
    std::vector<const ScorePlugin*> scorers;
    for (const auto& f : profile.filters) {
      if (!f->Skip(state, item)) filters.push_back(f.get());
    }
    for (const auto& sc : profile.scorers) {
      if (!sc->Skip(state, item)) scorers.push_back(sc.get());
    }
    for (const uint32_t i : visit) {
      const GpuState& g = work.Get(i);
      if (!Allowed(ms, g.model)) continue;
      ++considered;
      state.node = node_of[i];
      std::string_view why;
      for (const FilterPlugin* f : filters) {
        why = f->Filter(state, item, g);
        if (!why.empty()) break;
      }
      if (!why.empty()) {
        ++rejected[why];
        continue;
      }
      Options(g, item, p, options);
      if (existing_only) {
        // Free slots count as existing room on GPUs in use; an idle GPU's are planned anew.
        int idle = -1;  // asked only where it matters
        options.erase_if([&](const Option& o) {
          if (o.action == Action::kUseInstance) return false;
          if (o.action != Action::kCreateInstance) return true;
          if (idle < 0) idle = g.Idle() ? 1 : 0;
          return idle == 1;
        });
      }
      if (options.empty()) {
        ++rejected[NoRoomReason(g, item, req.pool)];
        continue;
      }
      for (const Option& o : options) {
        int64_t score = 0;
        for (const ScorePlugin* sc : scorers) score += sc->Score(state, item, g, o);
        // The best score; the first GPU in the snapshot's order among equals, whatever order
        // the GPUs are visited in.
        if (score > best_score || (score == best_score && i < best_gpu)) {
          best_score = score;
          best_gpu = i;
          best_option = o;
          found = true;
        }
      }
    }
    if (!found) {
      if (existing_only) return false;
      // Why, from every GPU of the model (the index left out those that could not serve).
      if (index != nullptr && !every) return place(it, unit, existing_only, true);
      std::string detail;
      for (const auto& [why, n] : rejected) detail += fmt::format("{}{}", detail.empty() ? "" : ", ", Counted(n, why));
      out.code = Code::kUnschedulable;
      const std::string& name = names[it];
      const std::string what = IsShare(item)  ? fmt::format("another share of {}/1000 of a {} GPU", item.share_milli, name)
                               : IsFull(item) ? fmt::format("another whole GPU {}/{}", name, item.profile)
                                              : fmt::format("another {}/{}", name, item.profile);
      out.reason = fmt::format(
          "{} x {}/{} do not fit now: {} of them would, and a pool gets all its devices at once or waits; no {} GPU "
          "can take {}; of {}: {}",
          item.count, name, item.profile, unit, name, what, Plural(considered, fmt::format("{} GPU", name)),
          detail.empty() ? "none" : detail);
      out.plan = {};
      return false;  // Unreserve: the overlay is dropped with everything reserved on it
    }
    Placement placement;
    placement.item = it;
    if (work.Get(best_gpu).Idle()) {
      --state.free_full_on_node[node_of[best_gpu]];
      if (IsShare(item)) state.shared_room_on_node[node_of[best_gpu]] += static_cast<double>(kMilliGpu - item.share_milli) / kMilliGpu;
    } else if (IsShare(item)) {
      state.shared_room_on_node[node_of[best_gpu]] -= static_cast<double>(item.share_milli) / kMilliGpu;
    }
    Reserve(work.Mutable(best_gpu), req, item, p, best_option, out.plan, placement);
    Taken(best_gpu, item, unit, placement);
    out.plan.placements.push_back(std::move(placement));
    return true;
  };

  // GPUs of model `m` per node that could become a whole GPU now (free whole GPUs and idle MIG
  // GPUs, healthy and schedulable), from a whole-GPU item's candidates, which stay in `visit`.
  // (Shared GPUs' room is counted too, in GPUs' worth: whole GPUs and shares are candidates.)
  auto count_free_full = [&](const std::vector<const GpuModel*>& ms) {
    std::fill(state.free_full_on_node.begin(), state.free_full_on_node.end(), 0);
    std::fill(state.shared_room_on_node.begin(), state.shared_room_on_node.end(), 0.0);
    candidates(RequestItem{.model = "", .profile = std::string(catalog::kFullProfile), .count = 1, .share_milli = 1}, ms, nullptr, false, false);
    for (const uint32_t i : visit) {
      const GpuState& g = work.Get(i);
      if (!Allowed(ms, g.model) || !g.healthy || !g.schedulable) continue;
      if (g.Idle()) {
        ++state.free_full_on_node[node_of[i]];
      } else if (!g.shares.empty()) {
        state.shared_room_on_node[node_of[i]] += static_cast<double>(ShareRoom(g)) / kMilliGpu;
      }
    }
  };

  std::set<const GpuModel*> mig_planned;
  for (size_t it = 0; it < req.items.size(); ++it) {
    const RequestItem& item = req.items[it];
    if (IsFull(item)) {
      count_free_full(models[it]);
      for (int unit = 0; unit < item.count; ++unit) {
        if (!place(it, unit, false, false)) return out;
      }
      continue;
    }
    // Every MIG item of the model at once: first existing instances and free slots (no GPU is
    // reconfigured for what fits without), then the rest on the fewest idle GPUs (mig_plan.h).
    const GpuModel* m = models[it][0];
    const std::vector<const GpuModel*>& only_m = models[it];
    if (!mig_planned.insert(m).second) continue;
    // Items that ask for CPU or memory are scored by how many idle GPUs they strand.
    bool asks = false;
    for (size_t j = it; j < req.items.size(); ++j) {
      asks = asks || (!IsFull(req.items[j]) && models[j][0] == m &&
                      (req.items[j].cpu_milli > 0 || req.items[j].memory_mib > 0));
    }
    if (asks) count_free_full(only_m);
    struct Device {
      size_t item = 0;
      int unit = 0;
    };
    std::map<const MigProfile*, std::vector<Device>> rest;  // profile -> the devices left
    bool one_node = false;  // an item whose devices must share a node goes device by device
    for (size_t j = it; j < req.items.size(); ++j) {
      if (IsFull(req.items[j]) || models[j][0] != m) continue;
      for (int unit = 0; unit < req.items[j].count; ++unit) {
        if (place(j, unit, true, false)) continue;
        rest[profiles[j]].push_back({j, unit});
        one_node = one_node || (req.items[j].one_node && req.items[j].count > 1);
      }
    }
    if (rest.empty()) continue;
    std::map<const MigProfile*, int> demand;
    for (const auto& [p, devices] : rest) demand[p] = static_cast<int>(devices.size());
    const std::vector<catalog::Layout> layouts = PackInstances(*m, demand);
    // Idle GPUs of the model that the filters let through, each offering a new layout.
    count_free_full(only_m);
    std::vector<size_t> idle;
    const Device& first_left = rest.begin()->second.front();
    state.unit = first_left.unit;
    for (const uint32_t i : visit) {
      const GpuState& g = work.Get(i);
      if (g.model != m || !g.Idle() || !m->mig_capable) continue;
      state.node = node_of[i];
      bool passes = true;
      for (const auto& f : profile.filters) passes = passes && f->Filter(state, req.items[first_left.item], g).empty();
      if (passes) idle.push_back(i);
    }
    bool planned = !one_node && !layouts.empty() && idle.size() >= layouts.size();
    for (size_t l = 0; planned && l < layouts.size(); ++l) {
      const catalog::Layout& layout = layouts[l];
      std::vector<Device> devices;  // one per instance of the layout
      int64_t cpu = 0, memory = 0;
      for (const catalog::Instance& inst : layout) {
        devices.push_back(rest[inst.profile].back());
        rest[inst.profile].pop_back();
        const auto [c, mem] = CycleState::Charge(req.items[devices.back().item], devices.back().unit);
        cpu += c;
        memory += mem;
      }
      // The GPU whose node strands the least (StrandingScore); then the GPU next to this pool's
      // devices; then on the node with the fewest GPUs that could still become whole ones (roomy
      // nodes stay for whole-GPU work); then one already in MIG mode (no mode change). Its node
      // must have the layout's CPU and memory when the items ask for them.
      int compute = 0;
      for (const catalog::Instance& inst : layout) compute += inst.profile->compute_slices;
      const double worth = static_cast<double>(compute) / m->compute_slices;
      size_t best = idle.size();
      std::tuple<int64_t, int64_t, int, int> best_key{};
      for (size_t k = 0; k < idle.size(); ++k) {
        const GpuState& g = work.Get(idle[k]);
        state.node = node_of[idle[k]];
        if (cpu > 0 || memory > 0) {
          const auto [cpu_left, memory_left] = state.RoomLeft(g);
          if ((cpu_left >= 0 && cpu_left < cpu) || (memory_left >= 0 && memory_left < memory)) continue;
        }
        const int here = state.devices_on_node[state.node];
        // As StrandingScore: pods' items strand the least; pools' devices are fed.
        const int64_t strand = cpu > 0 || memory > 0 ? -std::llround(state.StrandGrowth(g, 1, cpu, memory) * 1000)
                                                     : (state.Starves(g, worth) ? -1 : 0);
        const std::tuple<int64_t, int64_t, int, int> key{strand, here == 0 ? 0 : 1'000'000 + here,
                                                         -state.free_full_on_node[state.node], g.mig_enabled ? 1 : 0};
        if (best == idle.size() || key > best_key) best_key = key, best = k;
      }
      if (best == idle.size()) {  // no idle GPU's node has room for the layout: device by device
        for (size_t k = layout.size(); k-- > 0;) rest[layout[k].profile].push_back(devices[k]);
        planned = false;
        break;
      }
      const size_t gpu = idle[best];
      idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(best));
      --state.free_full_on_node[node_of[gpu]];
      // A GPU in MIG mode with no instances takes the new ones as they are; any other is
      // reconfigured (its mode changed, or its unused instances destroyed).
      bool first = !(work.Get(gpu).mig_enabled && work.Get(gpu).instances.empty());
      for (size_t k = 0; k < layout.size(); ++k) {
        const Device& d = devices[k];
        Placement placement;
        placement.item = d.item;
        Reserve(work.Mutable(gpu), req, req.items[d.item], layout[k].profile,
                {first ? Action::kReconfigure : Action::kCreateInstance, layout[k].start, 0}, out.plan, placement);
        first = false;
        Taken(gpu, req.items[d.item], d.unit, placement);
        out.plan.placements.push_back(std::move(placement));
      }
    }
    if (planned) continue;
    // No plan on idle GPUs: device by device, which also says what stands in the way.
    for (const auto& [p, devices] : rest) {
      for (const Device& d : devices) {
        if (!place(d.item, d.unit, false, false)) return out;
      }
    }
  }
  out.code = Code::kSuccess;
  return out;
}

void ApplyPlan(FleetSnapshot& fleet, const Request& req, const Plan& plan) {
  // The plan's GPUs, few, found in one pass (a map of every GPU would cost more than the rest).
  std::unordered_map<std::string_view, GpuState*> by_uuid;
  for (const Placement& p : plan.placements) by_uuid.emplace(p.gpu_uuid, nullptr);
  for (const auto& [uuid, change] : plan.gpu_changes) by_uuid.emplace(uuid, nullptr);
  size_t found = 0;
  for (GpuState& g : fleet.gpus) {
    if (found == by_uuid.size()) break;
    if (auto it = by_uuid.find(g.uuid); it != by_uuid.end() && it->second == nullptr) it->second = &g, ++found;
  }
  auto gpu = [&](const std::string& uuid) -> GpuState& {
    GpuState* g = by_uuid.at(uuid);
    if (g == nullptr) throw std::out_of_range("ApplyPlan: no GPU " + uuid + " in the snapshot");
    return *g;
  };
  for (const auto& [uuid, change] : plan.gpu_changes) {
    GpuState& g = gpu(uuid);
    if (!change.mig_enabled) {
      g.mig_enabled = false;
      g.instances.clear();
      continue;
    }
    // Keep the instances that stay (same profile and start), create the new ones free.
    std::vector<InstanceState> next;
    for (const catalog::Instance& inst : change.layout) {
      auto same = std::find_if(g.instances.begin(), g.instances.end(), [&](const InstanceState& s) {
        return s.profile == inst.profile && s.start == inst.start;
      });
      if (same != g.instances.end() && !change.reconfigure) {
        next.push_back(*same);
      } else {
        next.push_back({inst.profile, inst.start,
                        fmt::format("MIG-{}-{}", uuid.substr(std::min<size_t>(4, uuid.size())), inst.start), "", false});
      }
    }
    g.mig_enabled = true;
    g.instances = std::move(next);
  }
  for (const Placement& p : plan.placements) {
    GpuState& g = gpu(p.gpu_uuid);
    if (p.share_milli > 0) {
      g.shares.push_back({req.pool, p.share_milli});
      continue;
    }
    if (p.profile == catalog::kFullProfile) {
      g.owner = req.pool;
      continue;
    }
    for (InstanceState& inst : g.instances) {
      if (inst.start == p.start && inst.profile->name == p.profile) inst.owner = req.pool;
    }
  }
  fleet.Reindex();
}

void ReleasePool(FleetSnapshot& fleet, const std::string& pool) {
  for (GpuState& g : fleet.gpus) {
    if (g.owner == pool) {
      g.owner.clear();
      g.busy = false;
    }
    std::erase_if(g.shares, [&](const GpuShare& s) { return s.owner == pool; });
    for (InstanceState& i : g.instances) {
      if (i.owner == pool) {
        i.owner.clear();
        i.busy = false;
      }
    }
  }
  fleet.Reindex();
}

}  // namespace gpuaas::allocator
