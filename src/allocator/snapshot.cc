#include "allocator/snapshot.h"

#include <algorithm>
#include <tuple>

#include "fmt/format.h"

namespace gpuaas::allocator {

bool GpuState::Idle() const {
  if (!owner.empty() || busy || !shares.empty()) return false;
  return std::none_of(instances.begin(), instances.end(),
                      [](const InstanceState& i) { return !i.owner.empty() || i.busy; });
}

int32_t GpuState::SharedMilli() const {
  int32_t sum = 0;
  for (const GpuShare& s : shares) sum += s.milli;
  return sum;
}

catalog::Layout GpuState::Layout() const {
  catalog::Layout l;
  for (const InstanceState& i : instances) l.push_back({i.profile, i.start});
  catalog::SortLayout(l);
  return l;
}

FleetSnapshot BuildSnapshot(std::span<const model::GpuCapacity> gpus,
                            std::span<const model::NodeCapacity> nodes,
                            const std::map<std::string, std::string>& owners,
                            const std::set<std::string>& busy) {
  std::vector<const model::GpuCapacity*> g;
  g.reserve(gpus.size());
  for (const model::GpuCapacity& x : gpus) g.push_back(&x);
  std::vector<const model::NodeCapacity*> n;
  n.reserve(nodes.size());
  for (const model::NodeCapacity& x : nodes) n.push_back(&x);
  return BuildSnapshot(g, n, owners, busy);
}

namespace {

// The snapshot, not yet indexed (its builders index it once they are done changing it).
FleetSnapshot Unindexed(std::span<const model::GpuCapacity* const> gpus, std::span<const model::NodeCapacity* const> nodes,
                        const std::map<std::string, std::string>& owners, const std::set<std::string>& busy) {
  std::map<std::string_view, bool> schedulable;
  std::map<std::string_view, int32_t> room_of;
  FleetSnapshot f;
  f.nodes.reserve(nodes.size());
  for (const model::NodeCapacity* n : nodes) {
    schedulable[n->metadata.name] = n->spec.schedulable;
    NodeRoom room;
    room.name = n->metadata.name;
    // (What pods request is never below zero, whatever a stored object says.)
    if (n->spec.cpu_cores > 0) {
      room.cpu_free_milli = std::max<int64_t>(0, n->spec.cpu_cores * 1000 - std::max<int64_t>(0, n->status.pod_cpu_milli));
    }
    if (n->spec.memory_bytes > 0) {
      room.memory_free_mib = std::max<int64_t>(0, (n->spec.memory_bytes - std::max<int64_t>(0, n->status.pod_memory_bytes)) >> 20);
    }
    if (n->spec.gpu_count > 0) {
      const auto per = static_cast<double>(n->spec.gpu_count);
      if (n->spec.cpu_cores > 0) room.cpu_share_milli = static_cast<double>(n->spec.cpu_cores * 1000) / per;
      if (n->spec.memory_bytes > 0) room.memory_share_mib = static_cast<double>(n->spec.memory_bytes >> 20) / per;
    }
    room_of[n->metadata.name] = static_cast<int32_t>(f.nodes.size());
    f.nodes.push_back(std::move(room));
  }
  auto owner_of = [&](const std::string& uuid) {
    auto it = owners.find(uuid);
    return it == owners.end() ? std::string() : it->second;
  };
  f.gpus.reserve(gpus.size());
  for (const model::GpuCapacity* gp : gpus) {
    const model::GpuCapacity& g = *gp;
    GpuState s;
    s.uuid = g.spec.uuid;
    s.cluster = g.spec.cluster;
    s.node = g.spec.node;
    s.index = static_cast<int>(g.spec.index);
    s.model = catalog::FindModel(g.spec.model);
    s.healthy = g.status.health != model::Health::kUnhealthy;
    auto sch = schedulable.find(g.spec.node);
    s.schedulable = sch == schedulable.end() || sch->second;
    if (auto r = room_of.find(g.spec.node); r != room_of.end()) s.node_room = r->second;
    s.mig_enabled = g.status.mig_mode == model::MigMode::kEnabled;
    s.owner = owner_of(g.spec.uuid);
    s.busy = busy.count(g.spec.uuid) > 0 || g.status.allocated;
    for (const model::MigInstance& m : g.status.mig_instances) {
      const catalog::MigProfile* p = s.model ? catalog::FindProfile(*s.model, m.profile) : nullptr;
      if (p == nullptr) {
        s.model = nullptr;  // a layout we cannot reason about: never touch this GPU
        continue;
      }
      s.instances.push_back({p, static_cast<int>(m.start), m.uuid, owner_of(m.uuid),
                             busy.count(m.uuid) > 0 || m.allocated});
    }
    // The same for instances that cannot be on one GPU together (overlapping, out of range, too
    // many): what a cluster reports is not trusted to be a legal layout.
    if (s.model != nullptr && !s.instances.empty() && !catalog::ValidateLayout(*s.model, s.Layout()).ok()) {
      s.model = nullptr;
    }
    f.gpus.push_back(std::move(s));
  }
  std::sort(f.gpus.begin(), f.gpus.end(), [](const GpuState& a, const GpuState& b) {
    return std::tie(a.cluster, a.node, a.index) < std::tie(b.cluster, b.node, b.index);
  });
  return f;
}

}  // namespace

FleetSnapshot BuildSnapshot(std::span<const model::GpuCapacity* const> gpus,
                            std::span<const model::NodeCapacity* const> nodes,
                            const std::map<std::string, std::string>& owners,
                            const std::set<std::string>& busy) {
  FleetSnapshot f = Unindexed(gpus, nodes, owners, busy);
  f.Reindex();
  return f;
}

namespace {

// Numbers nodes as they come: a name is looked up only where it changes, since snapshots are
// sorted by node. (Node names are NodeCapacity names, unique across clusters; a hand-made
// snapshot may reuse one in two clusters, which the cluster then tells apart.)
class NodeNumbering {
 public:
  explicit NodeNumbering(size_t gpus) { seen_.reserve(gpus / 4 + 1); }
  uint32_t Next(const GpuState& g) {
    if (prev_ != nullptr && g.node == prev_->node && g.cluster == prev_->cluster) return last_;
    prev_ = &g;
    last_ = seen_.try_emplace(Key{g.node, g.cluster}, static_cast<uint32_t>(seen_.size())).first->second;
    return last_;
  }
  uint32_t count() const { return static_cast<uint32_t>(seen_.size()); }

 private:
  using Key = std::pair<std::string_view, std::string_view>;  // (node, cluster)
  struct Hash {
    size_t operator()(const Key& k) const {
      return std::hash<std::string_view>()(k.first) * 31 + std::hash<std::string_view>()(k.second);
    }
  };
  std::unordered_map<Key, uint32_t, Hash> seen_;
  const GpuState* prev_ = nullptr;
  uint32_t last_ = 0;
};

}  // namespace

uint32_t NumberNodes(const std::vector<GpuState>& gpus, std::vector<uint32_t>& node_of) {
  node_of.resize(gpus.size());
  NodeNumbering numbering(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) node_of[i] = numbering.Next(gpus[i]);
  return numbering.count();
}

SnapshotIndex IndexGpus(const std::vector<GpuState>& gpus) {
  SnapshotIndex index;
  index.built_for = gpus.data();
  index.size = gpus.size();
  // Nodes numbered in order, as a sorted snapshot has them; one that is not sorted is numbered
  // again by name afterwards.
  index.node_of.resize(gpus.size());
  uint32_t nodes = 0;
  bool sorted = true;
  // Free slots depend on the layout only: asked once per distinct layout of a model.
  std::unordered_map<const catalog::GpuModel*, std::unordered_map<uint64_t, std::vector<bool>>> slots_memo;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuState& g = gpus[i];
    if (i == 0) {
      nodes = 1;
    } else if (const GpuState& prev = gpus[i - 1]; g.node != prev.node || g.cluster != prev.cluster) {
      sorted = sorted && std::tie(prev.cluster, prev.node) < std::tie(g.cluster, g.node);
      ++nodes;
    }
    index.node_of[i] = nodes - 1;
    if (g.model == nullptr) continue;
    const catalog::GpuModel& m = *g.model;
    SnapshotIndex::OfModel& of = index.models[&m];
    if (of.free_instance.size() != m.profiles.size()) {
      of.free_instance.resize(m.profiles.size());
      of.free_slots.resize(m.profiles.size());
    }
    const auto at = static_cast<uint32_t>(i);
    of.all.push_back(at);
    if (!g.mig_enabled) {
      if (g.owner.empty() && !g.busy) (g.shares.empty() ? of.whole_free : of.shared).push_back(at);
      continue;
    }
    std::vector<bool> seen(m.profiles.size(), false);
    for (const InstanceState& inst : g.instances) {
      const auto p = static_cast<size_t>(inst.profile - m.profiles.data());
      if (inst.owner.empty() && !inst.busy && !seen[p]) {
        seen[p] = true;
        of.free_instance[p].push_back(at);
      }
    }
    if (g.Idle()) {
      of.idle_mig.push_back(at);
      continue;
    }
    uint64_t key = 0;
    for (const InstanceState& inst : g.instances) {
      key |= uint64_t{1} << ((inst.profile - m.profiles.data()) * 8 + inst.start);
    }
    auto [it, added] = slots_memo[&m].try_emplace(key);
    if (added) {
      const catalog::Layout layout = g.Layout();
      it->second.resize(m.profiles.size());
      for (size_t p = 0; p < m.profiles.size(); ++p) it->second[p] = !catalog::FreeStarts(m, layout, m.profiles[p]).empty();
    }
    for (size_t p = 0; p < m.profiles.size(); ++p) {
      if (it->second[p]) of.free_slots[p].push_back(at);
    }
  }
  index.nodes = sorted ? nodes : NumberNodes(gpus, index.node_of);
  index.node_first.assign(index.nodes + 1, 0);
  for (uint32_t n : index.node_of) ++index.node_first[n + 1];
  for (uint32_t n = 0; n < index.nodes; ++n) index.node_first[n + 1] += index.node_first[n];
  index.node_gpus.resize(gpus.size());
  std::vector<uint32_t> next(index.node_first.begin(), index.node_first.end() - 1);
  for (size_t i = 0; i < gpus.size(); ++i) index.node_gpus[next[index.node_of[i]]++] = static_cast<uint32_t>(i);
  return index;
}

void FleetSnapshot::Reindex() { index = IndexGpus(gpus); }

std::string DeviceKey(std::string_view gpu_uuid, std::string_view profile, int64_t start) {
  if (profile == catalog::kFullProfile) return std::string(gpu_uuid);
  return fmt::format("{}@{}", gpu_uuid, start);
}

std::string PoolKey(const model::GpuPool& pool) { return pool.metadata.ns + "/" + pool.metadata.name; }

std::map<std::string, std::string> DeviceOwners(std::span<const model::GpuPool* const> pools) {
  std::map<std::string, std::string> owners;
  for (const model::GpuPool* p : pools) {
    if (!model::PoolIsLive(*p)) continue;
    for (const model::AllocatedDevice& d : p->status.allocation) {
      owners[DeviceKey(d.gpu_uuid, d.profile, d.start)] = PoolKey(*p);
    }
  }
  return owners;
}

FleetSnapshot BuildPoolSnapshot(std::span<const model::GpuCapacity* const> gpus,
                                std::span<const model::NodeCapacity* const> nodes,
                                std::span<const model::MigLayout* const> layouts,
                                const std::map<std::string, std::string>& owners) {
  std::map<std::string_view, const model::MigLayout*> desired;
  for (const model::MigLayout* l : layouts) desired[l->spec.gpu_uuid] = l;
  FleetSnapshot fleet = Unindexed(gpus, nodes, {}, {});
  for (GpuState& g : fleet.gpus) {
    if (auto d = desired.find(g.uuid); d != desired.end() && g.model != nullptr) {
      std::vector<InstanceState> insts;
      for (const model::MigLayout::Instance& i : d->second->spec.instances) {
        const catalog::MigProfile* p = catalog::FindProfile(*g.model, i.profile);
        if (p == nullptr) continue;
        InstanceState st{p, static_cast<int>(i.start), "", "", false};
        for (const InstanceState& o : g.instances) {
          if (o.profile == p && o.start == i.start) st = o;
        }
        insts.push_back(st);
      }
      g.mig_enabled = d->second->spec.mig_enabled;
      g.instances = std::move(insts);
    }
    if (auto o = owners.find(g.uuid); o != owners.end() && !g.mig_enabled) g.owner = o->second;
    for (InstanceState& i : g.instances) {
      if (auto o = owners.find(DeviceKey(g.uuid, "mig", i.start)); o != owners.end()) i.owner = o->second;
    }
  }
  fleet.Reindex();
  return fleet;
}

}  // namespace gpuaas::allocator
