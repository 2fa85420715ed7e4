#include "controller/pool_allocation.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "allocator/snapshot.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::GpuPool;
using model::MigLayout;
using Owners = std::map<std::string, std::string>;  // DeviceKey -> PoolKey

// The GPUs that could hold `deficit`, with their nodes and desired layouts, shared with the
// informers (the snapshot copies what it keeps).
struct Candidates {
  std::vector<std::shared_ptr<const model::GpuCapacity>> gpu_objs;
  std::vector<std::shared_ptr<const model::NodeCapacity>> node_objs;
  std::set<std::string> names;  // of the GPUs and their layouts: the lower-case UUIDs
  std::map<std::string, std::shared_ptr<const MigLayout>> layouts;  // by name
};

Candidates CandidatesFor(const GpuPool& pool, const std::vector<model::PoolItem>& deficit,
                         const AllocationInformers& inf) {
  Candidates c;
  std::set<std::string> models;
  for (const model::PoolItem& i : deficit) models.insert(i.model);
  for (const std::string& m : models) {
    std::vector<std::shared_ptr<const model::GpuCapacity>> of =
        inf.gpus.ByIndex(kGpusByModel, pool.spec.cluster.empty() ? m : pool.spec.cluster + "/" + m);
    c.gpu_objs.insert(c.gpu_objs.end(), std::make_move_iterator(of.begin()), std::make_move_iterator(of.end()));
  }
  std::set<std::string_view> node_names;
  for (const auto& g : c.gpu_objs) {
    if (node_names.insert(g->spec.node).second) {
      if (auto n = inf.nodes.Get("", g->spec.node)) c.node_objs.push_back(std::move(n));
    }
    std::string name = ToLower(g->spec.uuid);
    if (auto l = inf.layouts.Get("", name)) c.layouts.emplace(name, std::move(l));
    c.names.insert(std::move(name));
  }
  return c;
}

// Who owns the devices of the candidate GPUs, besides `pool`: the live pools indexed on them as
// of revision `seen`, then every pool written since, read in `tx`.
absl::StatusOr<Owners> OwnersOf(store::Txn& tx, const GpuPool& pool, const Candidates& c,
                                                            const AllocationInformers& inf, int64_t seen) {
  const std::string self = allocator::PoolKey(pool);
  std::map<std::string, std::shared_ptr<const GpuPool>> by_key;
  for (const auto& g : c.gpu_objs) {
    for (auto& p : inf.pools.ByIndex(kPoolsByGpu, g->spec.uuid)) by_key.emplace(allocator::PoolKey(*p), std::move(p));
  }
  ASSIGN_OR_RETURN(std::vector<store::Key> moved, tx.ChangedKeys(GpuPool::kKind, seen));
  for (const store::Key& k : moved) {
    ASSIGN_OR_RETURN(std::optional<GpuPool> fresh, store::GetObject<GpuPool>(tx, k.ns, k.name));
    const std::string pk = runtime::ObjectKey(k.ns, k.name);
    if (!fresh) {
      by_key.erase(pk);
    } else {
      by_key[pk] = std::make_shared<const GpuPool>(std::move(*fresh));
    }
  }
  by_key.erase(self);
  std::vector<const GpuPool*> others;
  others.reserve(by_key.size());
  for (const auto& [k, p] : by_key) others.push_back(p.get());
  Owners owners = allocator::DeviceOwners(others);
  // The pool's own devices count as its own, so that a replacement does not take them twice.
  for (const model::AllocatedDevice& d : pool.status.allocation) {
    owners[allocator::DeviceKey(d.gpu_uuid, d.profile, d.start)] = self;
  }
  return owners;
}

// The plan builds on the desired layouts the informer showed: one of a candidate GPU changed
// since (by a pool written meanwhile) would be overwritten without its instances.
absl::Status CheckLayoutsUnchanged(store::Txn& tx, const Candidates& c, int64_t seen) {
  ASSIGN_OR_RETURN(std::vector<store::Key> relaid, tx.ChangedKeys(MigLayout::kKind, seen));
  for (const store::Key& k : relaid) {
    if (!c.names.contains(k.name)) continue;
    ASSIGN_OR_RETURN(std::optional<MigLayout> now_l, store::GetObject<MigLayout>(tx, "", k.name));
    auto seen_l = c.layouts.find(k.name);
    const bool had = seen_l != c.layouts.end();
    if ((now_l.has_value() != had) || (now_l && now_l->spec != seen_l->second->spec)) {
      return absl::AbortedError(fmt::format("the desired MIG layout of {} changed meanwhile", k.name));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteLayouts(store::Txn& tx, const allocator::FleetSnapshot& fleet, const allocator::Plan& plan,
                          Time now) {
  for (const auto& [uuid, change] : plan.gpu_changes) {
    const std::string& wanted = uuid;  // clang 14 cannot capture a structured binding
    const allocator::GpuState& g = *std::find_if(fleet.gpus.begin(), fleet.gpus.end(),
                                                 [&](const allocator::GpuState& x) { return x.uuid == wanted; });
    RETURN_IF_ERROR(WriteLayout(tx, now, g.cluster, g.node, uuid, change.mig_enabled, change.layout));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteLayout(store::Txn& tx, Time now, const std::string& cluster, const std::string& node,
                         const std::string& gpu_uuid, bool mig_enabled, const catalog::Layout& layout) {
  MigLayout l;
  l.metadata.name = ToLower(gpu_uuid);
  l.metadata.labels = {{"gpuaas.io/cluster", cluster}};
  l.spec = {cluster, node, gpu_uuid, mig_enabled, {}};
  for (const catalog::Instance& i : layout) l.spec.instances.push_back({std::string(i.profile->name), i.start});
  ASSIGN_OR_RETURN(std::optional<MigLayout> old, store::GetObject<MigLayout>(tx, "", l.metadata.name));
  if (!old) return store::CreateObject(tx, l, now);
  // A new spec is a new generation; its status stays the MIG controller's to move on.
  l.metadata = old->metadata;
  l.status = old->status;
  return store::UpdateObject(tx, l);
}

void AddAllocationIndexes(AllocationInformers& informers) {
  informers.pools.AddIndex(std::string(kPoolsByGpu), [](const GpuPool& p) {
    std::vector<std::string> out;
    if (!model::PoolIsLive(p)) return out;
    for (const model::AllocatedDevice& d : p.status.allocation) out.push_back(d.gpu_uuid);
    return out;
  });
  informers.gpus.AddIndex(std::string(kGpusByModel), [](const model::GpuCapacity& g) {
    return std::vector<std::string>{g.spec.model, g.spec.cluster + "/" + g.spec.model};
  });
}

absl::StatusOr<allocator::Outcome> AllocateDeficit(store::Txn& tx, const GpuPool& pool,
                                                   const std::vector<model::PoolItem>& deficit,
                                                   const AllocationInformers& informers, int64_t seen,
                                                   const allocator::Profile& profile, Time now) {
  const Candidates c = CandidatesFor(pool, deficit, informers);
  ASSIGN_OR_RETURN(const Owners owners, OwnersOf(tx, pool, c, informers, seen));

  std::vector<const model::GpuCapacity*> gpus;
  gpus.reserve(c.gpu_objs.size());
  for (const auto& g : c.gpu_objs) gpus.push_back(g.get());
  std::vector<const model::NodeCapacity*> nodes;
  for (const auto& n : c.node_objs) nodes.push_back(n.get());
  std::vector<const MigLayout*> layouts;
  for (const auto& [name, l] : c.layouts) layouts.push_back(l.get());
  allocator::FleetSnapshot fleet = allocator::BuildPoolSnapshot(gpus, nodes, layouts, owners);

  allocator::Request req{allocator::PoolKey(pool), pool.spec.cluster, {}};
  for (const model::PoolItem& i : deficit) req.items.push_back({i.model, i.profile, static_cast<int>(i.count)});
  allocator::Outcome out = allocator::Allocate(fleet, req, profile);
  if (out.code != allocator::Code::kSuccess) return out;
  // Dedication: no device may have another owner.
  for (const allocator::Placement& p : out.plan.placements) {
    const std::string dk = allocator::DeviceKey(p.gpu_uuid, p.profile, p.start);
    if (auto o = owners.find(dk); o != owners.end()) {
      return absl::AbortedError(fmt::format("device {} is held by pool {}", dk, o->second));
    }
  }
  RETURN_IF_ERROR(CheckLayoutsUnchanged(tx, c, seen));
  RETURN_IF_ERROR(WriteLayouts(tx, fleet, out.plan, now));
  return out;
}

}  // namespace gpuaas::controller
