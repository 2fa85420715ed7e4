#include "allocator/allocator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "allocator/internal/facts.h"
#include "allocator/mig_plan.h"
#include "fmt/format.h"

namespace gpuaas::allocator {
namespace {

using catalog::GpuModel;
using catalog::MigProfile;
using internal::Facts;
using internal::IsFull;
using internal::IsShare;
using internal::IsWhole;
using internal::LayoutFacts;
using internal::LayoutKey;
using internal::ShareRoom;

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

// One decision: the request, the working copy of the fleet with its reservations, the cycle
// state the plugins read, and the plan so far. Run() places every item through cycles (one
// device, or one planned MIG layout), each filtering and scoring with the profile's plugins.
class Decision {
 public:
  Decision(const FleetSnapshot& fleet, const Request& req, const Profile& profile, bool scan_fleet)
      : fleet_(fleet), req_(req), profile_(profile), work_(fleet) {
    if (scan_fleet) return;
    if (fleet.index.built_for == fleet.gpus.data() && fleet.index.size == fleet.gpus.size()) {
      index_ = &fleet.index;
    } else {
      own_index_ = IndexGpus(fleet.gpus);
      index_ = &own_index_;
    }
  }

  Outcome Run() {
    if (!PreFilter()) return std::move(out_);
    NumberNodes();
    std::set<const GpuModel*> mig_planned;
    for (size_t it = 0; it < req_.items.size(); ++it) {
      if (IsFull(req_.items[it])) {
        if (!PlaceWhole(it)) return std::move(out_);
      } else if (mig_planned.insert(models_[it][0]).second) {
        if (!PlaceMig(it)) return std::move(out_);
      }
    }
    out_.code = Code::kSuccess;
    return std::move(out_);
  }

 private:
  struct Device {
    size_t item = 0;
    int unit = 0;
  };
  // The best option a cycle's visit found, and what it turned away.
  struct Visit {
    bool found = false;
    size_t gpu = 0;
    Option option;
    int64_t score = std::numeric_limits<int64_t>::min();
    int considered = 0;
    std::map<std::string_view, int> rejected;  // by the reason's phrase
  };

  void Fail(Code code, std::string reason) { out_ = {code, {}, std::move(reason)}; }

  const SnapshotIndex::OfModel* OfModel(const GpuModel* m) const {
    if (index_ == nullptr) return nullptr;
    auto it = index_->models.find(m);
    return it == index_->models.end() ? nullptr : &it->second;
  }

  // PreFilter: every item must be possible on this fleet at all. Resolves each item's models
  // and MIG profile.
  bool PreFilter() {
    models_.resize(req_.items.size());
    for (size_t it = 0; it < req_.items.size(); ++it) {
      const RequestItem& item = req_.items[it];
      std::string unknown;
      if (!ModelsOf(fleet_, index_, item.model, models_[it], unknown)) {
        Fail(Code::kUnschedulableAndUnresolvable, fmt::format("unknown GPU model \"{}\"", unknown));
        return false;
      }
      const std::vector<const GpuModel*>& ms = models_[it];
      names_.push_back(ms.size() == 1 ? std::string(ms[0]->name) : item.model == "*" ? "(any model)" : item.model);
      const MigProfile* p = nullptr;
      if (!IsFull(item)) {
        if (ms.size() != 1) {
          Fail(Code::kUnschedulableAndUnresolvable,
               fmt::format("MIG profile \"{}\" of \"{}\": a MIG item names one GPU model", item.profile, item.model));
          return false;
        }
        p = catalog::FindProfile(*ms[0], item.profile);
        if (p == nullptr) {
          Fail(Code::kUnschedulableAndUnresolvable, fmt::format("{} has no MIG profile \"{}\"", ms[0]->name, item.profile));
          return false;
        }
      }
      if (item.share_milli != 0 && (!IsFull(item) || item.share_milli < 0 || item.share_milli >= kMilliGpu)) {
        Fail(Code::kUnschedulableAndUnresolvable,
             fmt::format("{}/{}: a share is 1 to 999 thousandths of a whole GPU, not {}", item.model, item.profile,
                         item.share_milli));
        return false;
      }
      if (item.count <= 0) {
        Fail(Code::kUnschedulableAndUnresolvable, fmt::format("{}/{}: count must be positive", item.model, item.profile));
        return false;
      }
      int64_t cap = 0;
      if (index_ == nullptr) {
        cap = FleetCapacity(fleet_, item.model, item.profile);
      } else {
        for (const GpuModel* m : ms) {
          if (const SnapshotIndex::OfModel* of = OfModel(m)) cap += static_cast<int64_t>(of->all.size());
        }
        cap *= p == nullptr ? 1 : p->max_count;
      }
      if (cap < item.count) {
        Fail(Code::kUnschedulableAndUnresolvable,
             fmt::format("{} x {}/{} is more than the whole fleet could hold ({})", item.count, names_.back(),
                         item.profile, cap));
        return false;
      }
      profiles_.push_back(p);
    }
    return true;
  }

  // Node numbers, from the snapshot's index where it has one for these GPUs (also when the
  // decision visits every GPU), else made for this call; the cycle state sized by them.
  void NumberNodes() {
    const bool has_index = fleet_.index.built_for == fleet_.gpus.data() && fleet_.index.size == fleet_.gpus.size();
    numbered_ = index_ != nullptr ? index_ : has_index ? &fleet_.index : nullptr;
    if (numbered_ == nullptr) {  // (only when visiting every GPU of an unindexed snapshot)
      own_index_ = IndexGpus(fleet_.gpus);
      numbered_ = &own_index_;
    }
    const uint32_t nodes = numbered_->nodes;
    state_.request = &req_;
    state_.fleet = &fleet_;
    state_.view = &work_;
    state_.node_first = &numbered_->node_first;
    state_.node_gpus = &numbered_->node_gpus;
    state_.node_value.assign(nodes, std::numeric_limits<double>::quiet_NaN());
    state_.devices_on_node.assign(nodes, 0);
    state_.free_full_on_node.assign(nodes, 0);
    state_.shared_room_on_node.assign(nodes, 0.0);
    state_.gpus_on_node.assign(nodes, 0.0);
    state_.node_memo.assign(nodes, -1);
  }
  uint32_t NodeOf(size_t gpu) const { return numbered_->node_of[gpu]; }

  // The GPUs worth visiting for a device of `item` (ascending positions, into visit_): from the
  // index, and every GPU this request has changed; with no index, or `every`, all of them.
  void Candidates(const RequestItem& item, const std::vector<const GpuModel*>& ms, const MigProfile* p,
                  bool existing_only, bool every) {
    visit_.clear();
    if (index_ == nullptr || every) {
      for (size_t i = 0; i < work_.size(); ++i) visit_.push_back(static_cast<uint32_t>(i));
      return;
    }
    std::vector<const std::vector<uint32_t>*>& lists = lists_;
    lists.clear();
    for (const GpuModel* m : ms) {
      const SnapshotIndex::OfModel* of = OfModel(m);
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
      for (const std::vector<uint32_t>* l : lists) visit_.insert(visit_.end(), l->begin(), l->end());
      for (const auto& [i, g] : work_.changed()) {
        if (Allowed(ms, g.model) && std::find(visit_.begin(), visit_.end(), static_cast<uint32_t>(i)) == visit_.end()) {
          visit_.push_back(static_cast<uint32_t>(i));
        }
      }
      return;
    }
    if (lists.size() == 1) {
      visit_ = *lists[0];
    } else if (lists.size() == 2) {
      const std::vector<uint32_t>&a = *lists[0], &b = *lists[1];
      visit_.resize(a.size() + b.size());
      visit_.erase(std::set_union(a.begin(), a.end(), b.begin(), b.end(), visit_.begin()), visit_.end());
    }
    const size_t indexed = visit_.size();
    for (const auto& [i, g] : work_.changed()) {
      if (Allowed(ms, g.model)) visit_.push_back(static_cast<uint32_t>(i));
    }
    if (visit_.size() > indexed) {  // the request's own GPUs, few: sorted in
      std::sort(visit_.begin() + static_cast<std::ptrdiff_t>(indexed), visit_.end());
      std::inplace_merge(visit_.begin(), visit_.begin() + static_cast<std::ptrdiff_t>(indexed), visit_.end());
      visit_.erase(std::unique(visit_.begin(), visit_.end()), visit_.end());
    }
  }

  // GPUs of the models `ms` per node that could become a whole GPU now (free whole GPUs and
  // idle MIG GPUs, healthy and schedulable), and shared GPUs' room in GPUs' worth, from a
  // whole-GPU item's candidates, which stay in visit_.
  void CountFreeFull(const std::vector<const GpuModel*>& ms) {
    std::fill(state_.free_full_on_node.begin(), state_.free_full_on_node.end(), 0);
    std::fill(state_.shared_room_on_node.begin(), state_.shared_room_on_node.end(), 0.0);
    Candidates(RequestItem{.model = "", .profile = std::string(catalog::kFullProfile), .count = 1, .share_milli = 1},
               ms, nullptr, false, false);
    for (const uint32_t i : visit_) {
      const GpuState& g = work_.Get(i);
      if (!Allowed(ms, g.model) || !g.healthy || !g.schedulable) continue;
      if (g.Idle()) {
        ++state_.free_full_on_node[NodeOf(i)];
      } else if (!g.shares.empty()) {
        state_.shared_room_on_node[NodeOf(i)] += static_cast<double>(ShareRoom(g)) / kMilliGpu;
      }
    }
  }

  // A new cycle for device `unit` of item `it`, or for `layout` (whose first device that is):
  // the cycle state set, its memos cleared, and the plugins that take part chosen (those that
  // do not Skip it).
  void BeginCycle(size_t it, int unit, const LayoutDemand* layout) {
    const RequestItem& item = req_.items[it];
    state_.unit = unit;
    state_.left = item.count - unit;
    state_.profile = profiles_[it];
    state_.layout = layout;
    std::fill(state_.node_memo.begin(), state_.node_memo.end(), int8_t{-1});
    std::fill(state_.node_value.begin(), state_.node_value.end(), std::numeric_limits<double>::quiet_NaN());
    state_.memo.clear();
    filters_.clear();
    scorers_.clear();
    for (const auto& f : profile_.filters) {
      if (!f->Skip(state_, item)) filters_.push_back(f.get());
    }
    for (const auto& sc : profile_.scorers) {
      if (!sc->Skip(state_, item)) scorers_.push_back(sc.get());
    }
  }

  // Filter: the first reason a plugin rejects GPU `g` (at position `i`) for, empty when every
  // one lets it through.
  std::string_view Filter(const RequestItem& item, size_t i, const GpuState& g) {
    state_.node = NodeOf(i);
    for (const FilterPlugin* f : filters_) {
      if (std::string_view why = f->Filter(state_, item, g); !why.empty()) return why;
    }
    return {};
  }

  // Score: the plugins' sum for option `o` of GPU `g` (at position `i`), kept in `v` when it is the best so far
  // (the first GPU in the snapshot's order among equals, whatever order they are visited in).
  void Score(const RequestItem& item, size_t i, const GpuState& g, const Option& o, Visit& v) const {
    int64_t score = 0;
    for (const ScorePlugin* sc : scorers_) score += sc->Score(state_, item, g, o);
    if (score > v.score || (score == v.score && i < v.gpu)) {
      v.score = score;
      v.gpu = i;
      v.option = o;
      v.found = true;
    }
  }

  // One device cycle's visit: every candidate GPU filtered, the options of those let through
  // scored. With `existing_only`, only free instances that exist and new ones in free slots of
  // GPUs in use.
  Visit VisitDevice(size_t it, int unit, bool existing_only, bool every) {
    const RequestItem& item = req_.items[it];
    const MigProfile* p = profiles_[it];
    Candidates(item, models_[it], p, existing_only, every);
    BeginCycle(it, unit, nullptr);
    Visit v;
    OptionList options;
    for (const uint32_t i : visit_) {
      const GpuState& g = work_.Get(i);
      if (!Allowed(models_[it], g.model)) continue;
      ++v.considered;
      if (const std::string_view why = Filter(item, i, g); !why.empty()) {
        ++v.rejected[why];
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
        ++v.rejected[NoRoomReason(g, item, req_.pool)];
        continue;
      }
      for (const Option& o : options) Score(item, i, g, o, v);
    }
    return v;
  }

  // Places device `unit` of item `it` on the best GPU; false when none offers it (with the
  // explanation in out_ unless `existing_only`). A visit of the index's candidates that finds
  // nothing is repeated over every GPU of the model, which says why.
  bool PlaceDevice(size_t it, int unit, bool existing_only) {
    Visit v;
    for (const bool every : {false, true}) {
      if (every && index_ == nullptr) break;  // the first visit saw every GPU already
      v = VisitDevice(it, unit, existing_only, every);
      if (v.found) break;
      if (existing_only) return false;
    }
    if (!v.found) {
      Explain(it, unit, v);
      return false;  // Unreserve: the overlay is dropped with everything reserved on it
    }
    const RequestItem& item = req_.items[it];
    const uint32_t node = NodeOf(v.gpu);
    if (work_.Get(v.gpu).Idle()) {
      --state_.free_full_on_node[node];
      if (IsShare(item)) state_.shared_room_on_node[node] += static_cast<double>(kMilliGpu - item.share_milli) / kMilliGpu;
    } else if (IsShare(item)) {
      state_.shared_room_on_node[node] -= static_cast<double>(item.share_milli) / kMilliGpu;
    }
    Book(v.gpu, it, unit, profiles_[it], v.option);
    return true;
  }

  void Explain(size_t it, int unit, const Visit& v) {
    const RequestItem& item = req_.items[it];
    std::string detail;
    for (const auto& [why, n] : v.rejected) detail += fmt::format("{}{}", detail.empty() ? "" : ", ", Counted(n, why));
    const std::string& name = names_[it];
    const std::string what = IsShare(item)  ? fmt::format("another share of {}/1000 of a {} GPU", item.share_milli, name)
                             : IsFull(item) ? fmt::format("another whole GPU {}/{}", name, item.profile)
                                            : fmt::format("another {}/{}", name, item.profile);
    Fail(Code::kUnschedulable,
         fmt::format("{} x {}/{} do not fit now: {} of them would, and a pool gets all its devices at once or waits; "
                     "no {} GPU can take {}; of {}: {}",
                     item.count, name, item.profile, unit, name, what,
                     Plural(v.considered, fmt::format("{} GPU", name)), detail.empty() ? "none" : detail));
  }

  // Reserve: device `unit` of item `it` on GPU `gpu` as option `o`, in the working copy, the
  // plan and the cycle state.
  void Book(size_t gpu, size_t it, int unit, const MigProfile* p, const Option& o) {
    const RequestItem& item = req_.items[it];
    Placement placement;
    placement.item = it;
    Reserve(work_.Mutable(gpu), req_, item, p, o, out_.plan, placement);
    const GpuState& g = work_.Get(gpu);
    const uint32_t node = NodeOf(gpu);
    ++state_.devices_on_node[node];
    state_.gpus_on_node[node] += IsShare(item)                        ? static_cast<double>(item.share_milli) / kMilliGpu
                                 : IsFull(item) || g.model == nullptr ? 1.0
                                                                      : static_cast<double>(catalog::FindProfile(*g.model, item.profile)->compute_slices) /
                                                                            g.model->compute_slices;
    if (unit == 0) state_.item_node = node;
    const auto [cpu, memory] = CycleState::Charge(item, unit);
    placement.cpu_milli = cpu;
    placement.memory_mib = memory;
    if ((cpu > 0 || memory > 0) && g.node_room >= 0) {
      auto& t = state_.taken_on_node[g.node_room];
      t.first += cpu;
      t.second += memory;
    }
    out_.plan.placements.push_back(std::move(placement));
  }

  // A whole-GPU or share item, device by device.
  bool PlaceWhole(size_t it) {
    CountFreeFull(models_[it]);
    for (int unit = 0; unit < req_.items[it].count; ++unit) {
      if (!PlaceDevice(it, unit, false)) return false;
    }
    return true;
  }

  // Every MIG item of item `it`'s model at once: first existing instances and free slots (no
  // GPU is reconfigured for what fits without), then the rest as layouts on the fewest idle GPUs
  // (mig_plan.h), and device by device where no such plan fits.
  bool PlaceMig(size_t it) {
    const GpuModel* m = models_[it][0];
    const std::vector<const GpuModel*>& only_m = models_[it];
    // Items that ask for CPU or memory are scored by how many idle GPUs they strand.
    bool asks = false;
    for (size_t j = it; j < req_.items.size(); ++j) {
      asks = asks || (!IsFull(req_.items[j]) && models_[j][0] == m &&
                      (req_.items[j].cpu_milli > 0 || req_.items[j].memory_mib > 0));
    }
    if (asks) CountFreeFull(only_m);
    std::map<const MigProfile*, std::vector<Device>> rest;  // profile -> the devices left
    bool one_node = false;  // an item whose devices must share a node goes device by device
    for (size_t j = it; j < req_.items.size(); ++j) {
      if (IsFull(req_.items[j]) || models_[j][0] != m) continue;
      for (int unit = 0; unit < req_.items[j].count; ++unit) {
        if (PlaceDevice(j, unit, true)) continue;
        rest[profiles_[j]].push_back({j, unit});
        one_node = one_node || (req_.items[j].one_node && req_.items[j].count > 1);
      }
    }
    if (rest.empty()) return true;
    CountFreeFull(only_m);  // (what is left to place goes on idle GPUs, whole or device by device)
    if (!one_node && PlaceLayouts(*m, rest)) return true;
    // No plan on idle GPUs: device by device, which also says what stands in the way.
    for (const auto& [p, devices] : rest) {
      for (const Device& d : devices) {
        if (!PlaceDevice(d.item, d.unit, false)) return false;
      }
    }
    return true;
  }

  // The devices in `rest` as the MIG plan's layouts, each on the idle GPU a layout cycle finds
  // best, among the candidates CountFreeFull left in visit_. False, with `rest` as it was, when
  // the plan needs more idle GPUs than the filters let through; false with the devices not yet
  // placed in `rest` when no GPU takes a layout.
  bool PlaceLayouts(const GpuModel& m, std::map<const MigProfile*, std::vector<Device>>& rest) {
    if (!m.mig_capable) return false;
    std::map<const MigProfile*, int> demand;
    for (const auto& [p, devices] : rest) demand[p] = static_cast<int>(devices.size());
    const std::vector<catalog::Layout> layouts = PackInstances(m, demand);
    if (layouts.empty()) return false;
    // Idle GPUs of the model that the filters let through for the first device left.
    const Device& first_left = rest.begin()->second.front();
    BeginCycle(first_left.item, first_left.unit, nullptr);
    std::vector<size_t> idle;
    for (const uint32_t i : visit_) {
      const GpuState& g = work_.Get(i);
      if (g.model == &m && g.Idle() && Filter(req_.items[first_left.item], i, g).empty()) idle.push_back(i);
    }
    if (idle.size() < layouts.size()) return false;
    for (const catalog::Layout& layout : layouts) {
      std::vector<Device> devices;  // one per instance of the layout
      LayoutDemand need{&layout, 0, 0, 0};
      int compute = 0;
      for (const catalog::Instance& inst : layout) {
        devices.push_back(rest[inst.profile].back());
        rest[inst.profile].pop_back();
        const auto [c, mem] = CycleState::Charge(req_.items[devices.back().item], devices.back().unit);
        need.cpu_milli += c;
        need.memory_mib += mem;
        compute += inst.profile->compute_slices;
      }
      need.gpus = static_cast<double>(compute) / m.compute_slices;
      // The layout cycle: every idle GPU left is an option, taking the whole layout.
      const RequestItem& item = req_.items[devices.front().item];
      BeginCycle(devices.front().item, devices.front().unit, &need);
      Visit v;
      for (const size_t i : idle) {
        const GpuState& g = work_.Get(i);
        if (!Filter(item, i, g).empty()) continue;
        // A GPU in MIG mode with no instances takes the new ones as they are; any other is
        // reconfigured (its mode changed, or its unused instances destroyed).
        Score(item, i, g, {g.mig_enabled && g.instances.empty() ? Action::kCreateInstance : Action::kReconfigure, 0, 0}, v);
      }
      state_.layout = nullptr;
      if (!v.found) {  // no idle GPU's node has room for the layout: device by device
        for (size_t k = layout.size(); k-- > 0;) rest[layout[k].profile].push_back(devices[k]);
        return false;
      }
      idle.erase(std::find(idle.begin(), idle.end(), v.gpu));
      --state_.free_full_on_node[NodeOf(v.gpu)];
      Action action = v.option.action;
      for (size_t k = 0; k < layout.size(); ++k) {
        Book(v.gpu, devices[k].item, devices[k].unit, layout[k].profile, {action, layout[k].start, 0});
        action = Action::kCreateInstance;  // the first instance reconfigured the GPU
      }
    }
    rest.clear();
    return true;
  }

  const FleetSnapshot& fleet_;
  const Request& req_;
  const Profile& profile_;
  Overlay work_;
  SnapshotIndex own_index_;
  const SnapshotIndex* index_ = nullptr;     // null: every GPU is visited
  const SnapshotIndex* numbered_ = nullptr;  // the node numbers
  std::vector<std::vector<const GpuModel*>> models_;  // per item, the models it allows
  std::vector<const MigProfile*> profiles_;           // per item, its MIG profile (null: whole GPUs)
  std::vector<std::string> names_;                    // per item, the model(s) as messages name them
  CycleState state_;
  std::vector<const FilterPlugin*> filters_;  // the cycle's (those that do not Skip it)
  std::vector<const ScorePlugin*> scorers_;
  std::vector<uint32_t> visit_;  // the cycle's candidate GPUs
  std::vector<const std::vector<uint32_t>*> lists_;  // (Candidates' index lists, kept between calls)
  Outcome out_;
};

}  // namespace

Outcome Allocate(const FleetSnapshot& fleet, const Request& req, const Profile& profile, bool scan_fleet) {
  return Decision(fleet, req, profile, scan_fleet).Run();
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
