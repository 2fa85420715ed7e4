#include "allocator/allocator.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>

#include "allocator/mig_plan.h"
#include "fmt/format.h"

namespace gpuaas::allocator {
namespace {

using catalog::GpuModel;
using catalog::MigProfile;

bool IsFull(const RequestItem& item) { return item.profile == catalog::kFullProfile; }

// The working state of one Allocate call: the snapshot plus copies of the GPUs this request has
// reserved on. Unreserve is dropping the copies, so it undoes exactly what Reserve did.
class Overlay {
 public:
  explicit Overlay(const FleetSnapshot& base) : base_(base), marked_(base.gpus.size(), false) {}
  const GpuState& Get(size_t i) const { return marked_[i] ? changed_.at(i) : base_.gpus[i]; }
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
  // layouts of the models in use (hundreds to a few thousand each).
  thread_local std::unordered_map<const GpuModel*, std::unordered_map<uint64_t, LayoutFacts>> memo;
  auto& by_key = memo[&m];
  auto it = by_key.find(key);
  if (it != by_key.end()) return it->second;
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
  return by_key.emplace(key, std::move(f)).first->second;
}

// --- filters -------------------------------------------------------------------------------

class HealthFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "Health"; }
  std::string_view Filter(const Request&, const RequestItem&, const GpuState& g) const override {
    if (!g.healthy) return "are unhealthy";
    if (!g.schedulable) return "are on a cordoned node";
    return "";
  }
};

class ClusterFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "Cluster"; }
  std::string_view Filter(const Request& req, const RequestItem&, const GpuState& g) const override {
    return !req.cluster.empty() && g.cluster != req.cluster ? "are in another cluster" : "";
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
      case Action::kUseInstance: return 3'000'000'000'000;
      case Action::kCreateInstance:
      case Action::kUseGpu: return 2'000'000'000'000;
      case Action::kReconfigure: return 0;
    }
    return 0;
  }
};

// Pack MIG devices onto the fullest GPUs, and at the start slot that keeps the most room for
// large profiles; a reconfigured GPU is laid out to keep that room too.
class BestFitScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "BestFit"; }
  int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& g,
                const Option& o) const override {
    if (IsFull(item) || g.model == nullptr) return 0;
    const catalog::GpuModel& m = *g.model;
    const MigProfile* p = state.profile != nullptr ? state.profile : catalog::FindProfile(m, item.profile);
    uint64_t key = o.action == Action::kReconfigure ? 0 : LayoutKey(m, g);
    if (o.action != Action::kUseInstance) key |= Bit(m, p, o.start);
    const LayoutFacts& after = Facts(m, key);
    const int64_t remaining = m.compute_slices - after.used_compute;
    return -remaining * 1'000'000 + after.flexibility;
  }
};

// Keep a pool's devices together: prefer nodes that already hold some of them (NVLink and
// locality for multi-GPU work); for whole GPUs, prefer the fullest node that can still take the
// rest of the item, else the roomiest one.
class LocalityScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "Locality"; }
  int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& g,
                const Option&) const override {
    int64_t score = 0;
    if (auto n = state.devices_on_node.find(g.node); n != state.devices_on_node.end()) {
      score += 1'000'000'000 + n->second;
    }
    if (IsFull(item)) {
      auto f = state.free_full_on_node.find(g.node);
      const int free = f == state.free_full_on_node.end() ? 0 : f->second;
      score += free >= state.left ? 500'000'000 - free : free;
    }
    return score;
  }
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
    case Action::kReconfigure: return "Reconfigure";
  }
  return "Unknown";
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
      p->filters = {std::make_shared<HealthFilter>(), std::make_shared<ClusterFilter>()};
      p->scorers = {std::make_shared<TierScore>(), std::make_shared<BestFitScore>(),
                    std::make_shared<LocalityScore>()};
      return p;
    }();
    return kDefault;
  }
  return nullptr;
}

int64_t FleetCapacity(const FleetSnapshot& fleet, const std::string& model, const std::string& profile) {
  const GpuModel* m = catalog::FindModel(model);
  if (m == nullptr) return 0;
  int per_gpu = 1;
  if (profile != catalog::kFullProfile) {
    const MigProfile* p = catalog::FindProfile(*m, profile);
    if (p == nullptr) return 0;
    per_gpu = p->max_count;
  }
  int64_t gpus = 0;
  for (const GpuState& g : fleet.gpus) gpus += g.model == m ? 1 : 0;
  return gpus * per_gpu;
}

namespace {

// Why a GPU offers nothing for the item (for the explanation), given it passed the filters.
std::string_view NoRoomReason(const GpuState& g, bool full) {
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

// The options GPU `g` offers for one device of `item` (after the filters passed).
// (Into `out`, reused between GPUs: a decision visits many.)
void Options(const GpuState& g, const RequestItem& item, const MigProfile* p, std::vector<Option>& out) {
  out.clear();
  if (IsFull(item)) {
    if (!g.mig_enabled) {
      if (g.owner.empty() && !g.busy) out.push_back({Action::kUseGpu, 0, 0});
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
  } else if (g.owner.empty() && !g.busy) {
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
    g.owner = req.pool;
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
  for (const RequestItem& item : req.items) {
    const GpuModel* m = catalog::FindModel(item.model);
    if (m == nullptr) {
      return {Code::kUnschedulableAndUnresolvable, {},
              fmt::format("unknown GPU model \"{}\"", item.model)};
    }
    const MigProfile* p = nullptr;
    if (!IsFull(item)) {
      p = catalog::FindProfile(*m, item.profile);
      if (p == nullptr) {
        return {Code::kUnschedulableAndUnresolvable, {},
                fmt::format("{} has no MIG profile \"{}\"", m->name, item.profile)};
      }
    }
    if (item.count <= 0) {
      return {Code::kUnschedulableAndUnresolvable, {},
              fmt::format("{}/{}: count must be positive", item.model, item.profile)};
    }
    int64_t cap = 0;
    if (index == nullptr) {
      cap = FleetCapacity(fleet, item.model, item.profile);
    } else if (const SnapshotIndex::OfModel* of = of_model(m)) {
      cap = static_cast<int64_t>(of->all.size()) * (IsFull(item) ? 1 : catalog::FindProfile(*m, item.profile)->max_count);
    }
    if (cap < item.count) {
      return {Code::kUnschedulableAndUnresolvable, {},
              fmt::format("{} x {}/{} is more than the whole fleet could hold ({})", item.count,
                          m->name, item.profile, cap)};
    }
    profiles.push_back(p);
  }

  Overlay work(fleet);
  CycleState state;
  state.request = &req;
  // One device of item `it` (the `unit`-th) on the best GPU, by the filters and scores; with
  // `existing_only`, only as a free instance that exists or a new one in free slots. False (and
  // the failure in `out` unless `existing_only`) when no GPU offers it.
  // The GPUs worth visiting for a device of `item` (ascending positions): from the index, and
  // every GPU this request has changed; with no index, or `every`, all of them.
  std::vector<uint32_t> visit;
  auto candidates = [&](const RequestItem& item, const MigProfile* p, bool existing_only, bool every) {
    visit.clear();
    const GpuModel* m = catalog::FindModel(item.model);
    const SnapshotIndex::OfModel* of = of_model(m);
    if (index == nullptr || every) {
      if (of != nullptr && !every) {
        visit = of->all;
      } else {
        for (size_t i = 0; i < work.size(); ++i) visit.push_back(static_cast<uint32_t>(i));
      }
      return;
    }
    if (of != nullptr) {
      // The index's lists are ascending: merged, not sorted.
      auto merge = [&](const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
        visit.resize(a.size() + b.size());
        visit.erase(std::set_union(a.begin(), a.end(), b.begin(), b.end(), visit.begin()), visit.end());
      };
      if (IsFull(item)) {
        merge(of->whole_free, of->idle_mig);
      } else if (existing_only) {
        const auto at = static_cast<size_t>(p - m->profiles.data());
        merge(of->free_instance[at], of->free_slots[at]);
      } else {
        visit = of->all;
      }
    }
    const size_t indexed = visit.size();
    for (const auto& [i, g] : work.changed()) {
      if (g.model == m) visit.push_back(static_cast<uint32_t>(i));
    }
    if (visit.size() > indexed) {  // the request's own GPUs, few: sorted in
      std::sort(visit.begin() + static_cast<std::ptrdiff_t>(indexed), visit.end());
      std::inplace_merge(visit.begin(), visit.begin() + static_cast<std::ptrdiff_t>(indexed), visit.end());
      visit.erase(std::unique(visit.begin(), visit.end()), visit.end());
    }
  };
  std::function<bool(size_t, int, bool, bool)> place = [&](size_t it, int unit, bool existing_only, bool every) -> bool {
    const RequestItem& item = req.items[it];
    const GpuModel* m = catalog::FindModel(item.model);
    const MigProfile* p = profiles[it];
    state.left = item.count - unit;
    state.profile = p;
    std::map<std::string_view, int> rejected;
    int considered = 0;
    size_t best_gpu = 0;
    Option best_option;
    int64_t best_score = std::numeric_limits<int64_t>::min();
    bool found = false;
    candidates(item, p, existing_only, every);
    std::vector<Option> options;
    for (const uint32_t i : visit) {
      const GpuState& g = work.Get(i);
      if (g.model != m) continue;
      ++considered;
      std::string_view why;
      for (const auto& f : profile.filters) {
        why = f->Filter(req, item, g);
        if (!why.empty()) break;
      }
      if (!why.empty()) {
        ++rejected[why];
        continue;
      }
      Options(g, item, p, options);
      if (existing_only) {
        // Free slots count as existing room on GPUs in use; an idle GPU's are planned anew.
        const bool idle = g.Idle();
        std::erase_if(options, [idle](const Option& o) {
          return o.action != Action::kUseInstance && (o.action != Action::kCreateInstance || idle);
        });
      }
      if (options.empty()) {
        ++rejected[NoRoomReason(g, IsFull(item))];
        continue;
      }
      for (const Option& o : options) {
        int64_t score = 0;
        for (const auto& sc : profile.scorers) score += sc->Score(state, item, g, o);
        if (score > best_score) {
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
      for (const auto& [why, n] : rejected) detail += fmt::format("{}{} {}", detail.empty() ? "" : ", ", n, why);
      out.code = Code::kUnschedulable;
      out.reason = fmt::format("no {} GPU can take {} {}/{} of this pool ({} of {} wanted placed so far); of {}: {}",
                               m->name, IsFull(item) ? "another whole GPU" : "another", m->name, item.profile, unit,
                               item.count, Plural(considered, fmt::format("{} GPU", m->name)),
                               detail.empty() ? "none" : detail);
      out.plan = {};
      return false;  // Unreserve: the overlay is dropped with everything reserved on it
    }
    Placement placement;
    placement.item = it;
    Reserve(work.Mutable(best_gpu), req, item, p, best_option, out.plan, placement);
    // Keyed by the snapshot's own string: `placement` moves on.
    const std::string_view node = work.Get(best_gpu).node;
    ++state.devices_on_node[node];
    if (placement.action == Action::kUseGpu) --state.free_full_on_node[node];
    out.plan.placements.push_back(std::move(placement));
    return true;
  };

  std::set<const GpuModel*> mig_planned;
  for (size_t it = 0; it < req.items.size(); ++it) {
    const RequestItem& item = req.items[it];
    const GpuModel* m = catalog::FindModel(item.model);
    if (IsFull(item)) {
      // Free whole GPUs per node, counted once per item and kept current as units are reserved.
      state.free_full_on_node.clear();
      candidates(item, nullptr, false, false);
      for (const uint32_t i : visit) {
        const GpuState& g = work.Get(i);
        if (g.model == m && !g.mig_enabled && g.owner.empty() && !g.busy && g.healthy) {
          ++state.free_full_on_node[g.node];
        }
      }
      for (int unit = 0; unit < item.count; ++unit) {
        if (!place(it, unit, false, false)) return out;
      }
      continue;
    }
    // Every MIG item of the model at once: first existing instances and free slots (no GPU is
    // reconfigured for what fits without), then the rest on the fewest idle GPUs (mig_plan.h).
    if (!mig_planned.insert(m).second) continue;
    state.free_full_on_node.clear();
    std::map<const MigProfile*, std::vector<size_t>> rest;  // profile -> the item of each device left
    for (size_t j = it; j < req.items.size(); ++j) {
      if (IsFull(req.items[j]) || catalog::FindModel(req.items[j].model) != m) continue;
      for (int unit = 0; unit < req.items[j].count; ++unit) {
        if (!place(j, unit, true, false)) rest[profiles[j]].push_back(j);
      }
    }
    if (rest.empty()) continue;
    std::map<const MigProfile*, int> demand;
    for (const auto& [p, owners] : rest) demand[p] = static_cast<int>(owners.size());
    const std::vector<catalog::Layout> layouts = PackInstances(*m, demand);
    // Idle GPUs of the model that the filters let through, each offering a new layout.
    std::vector<size_t> idle;
    candidates(RequestItem{item.model, std::string(catalog::kFullProfile), 1}, nullptr, false, false);
    for (const uint32_t i : visit) {
      const GpuState& g = work.Get(i);
      if (g.model != m || !g.Idle() || !m->mig_capable) continue;
      bool passes = true;
      for (const auto& f : profile.filters) passes = passes && f->Filter(req, req.items[rest.begin()->second.front()], g).empty();
      if (passes) idle.push_back(i);
    }
    if (layouts.empty() || idle.size() < layouts.size()) {
      // Not enough idle GPUs for the plan: device by device, which says what stands in the way.
      std::map<size_t, int> placed;  // item -> its devices placed so far
      for (const auto& [p, owners] : rest) {
        for (size_t j : owners) placed[j] = req.items[j].count;
      }
      for (const auto& [p, owners] : rest) {
        for (size_t j : owners) --placed[j];
      }
      for (const auto& [p, owners] : rest) {
        for (size_t j : owners) {
          if (!place(j, placed[j]++, false, false)) return out;
        }
      }
      continue;
    }
    for (const catalog::Layout& layout : layouts) {
      // The GPU next to this pool's devices, then one already in MIG mode (no mode change).
      size_t best = idle.size();
      int64_t best_score = std::numeric_limits<int64_t>::min();
      for (size_t k = 0; k < idle.size(); ++k) {
        const GpuState& g = work.Get(idle[k]);
        auto n = state.devices_on_node.find(g.node);
        const int64_t score = (n == state.devices_on_node.end() ? 0 : 1'000 + n->second) * 10 + (g.mig_enabled ? 1 : 0);
        if (score > best_score) best_score = score, best = k;
      }
      const size_t gpu = idle[best];
      idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(best));
      // A GPU in MIG mode with no instances takes the new ones as they are; any other is
      // reconfigured (its mode changed, or its unused instances destroyed).
      bool first = !(work.Get(gpu).mig_enabled && work.Get(gpu).instances.empty());
      for (const catalog::Instance& inst : layout) {
        std::vector<size_t>& owners = rest[inst.profile];
        const size_t j = owners.back();
        owners.pop_back();
        Placement placement;
        placement.item = j;
        Reserve(work.Mutable(gpu), req, req.items[j], inst.profile,
                {first ? Action::kReconfigure : Action::kCreateInstance, inst.start, 0}, out.plan, placement);
        first = false;
        ++state.devices_on_node[work.Get(gpu).node];
        out.plan.placements.push_back(std::move(placement));
      }
    }
  }
  out.code = Code::kSuccess;
  return out;
}

void ApplyPlan(FleetSnapshot& fleet, const Request& req, const Plan& plan) {
  std::unordered_map<std::string, GpuState*> by_uuid;
  for (GpuState& g : fleet.gpus) by_uuid[g.uuid] = &g;
  for (const auto& [uuid, change] : plan.gpu_changes) {
    GpuState& g = *by_uuid.at(uuid);
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
    GpuState& g = *by_uuid.at(p.gpu_uuid);
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
