#include "controller/pod_runs.h"

#include <algorithm>
#include <set>
#include <utility>

#include "allocator/snapshot.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/inventory.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

// The index of the open runs of pods, by cluster.
constexpr std::string_view kOpenRuns = "open-pod-runs";

// The run's name: the pod's, made a valid object name, and the store's revision.
std::string RunName(const std::string& pod, int64_t revision) {
  std::string base = pod;
  std::replace(base.begin(), base.end(), '/', '.');
  if (base.size() > 200) base.resize(200);
  while (!base.empty() && (base.back() == '.' || base.back() == '-')) base.pop_back();
  return fmt::format("{}-{}", base, revision);
}

}  // namespace

std::vector<std::vector<std::string>> Holders(const model::GpuCapacity* g) {
  std::vector<std::vector<std::string>> out;
  if (g == nullptr) return out;
  out.push_back(g->status.pods);
  for (const model::MigInstance& mi : g->status.mig_instances) out.push_back(mi.pods);
  return out;
}

std::vector<PodRun> PodRuns(const std::vector<const model::GpuCapacity*>& gpus,
                            const std::vector<const model::GpuPool*>& pools, std::vector<std::string>* unpooled) {
  std::map<std::string, const model::GpuPool*> owner;  // device key -> pool
  for (const model::GpuPool* p : pools) {
    for (const model::AllocatedDevice& d : p->status.allocation) owner[allocator::DeviceKey(d.gpu_uuid, d.profile, d.start)] = p;
  }
  struct Held {
    std::string node;
    std::vector<model::WorkloadDevice> devices;
    std::map<const model::GpuPool*, int> by_pool;
  };
  std::map<std::string, Held> pods;
  auto hold = [&](const std::vector<std::string>& holders, const model::GpuCapacity& g, model::WorkloadDevice d,
                  const std::string& key) {
    auto o = owner.find(key);
    for (const std::string& pod : holders) {
      Held& h = pods[pod];
      h.node = g.spec.node;
      h.devices.push_back(d);
      if (o != owner.end()) ++h.by_pool[o->second];
    }
  };
  for (const model::GpuCapacity* g : gpus) {
    hold(g->status.pods, *g, {g->spec.uuid, ""}, g->spec.uuid);
    for (const model::MigInstance& mi : g->status.mig_instances) {
      hold(mi.pods, *g, {g->spec.uuid, mi.uuid}, allocator::DeviceKey(g->spec.uuid, "mig", mi.start));
    }
  }
  std::vector<PodRun> out;
  for (auto& [pod, h] : pods) {
    // A pod's namespace is its project (docs/kubernetes.md): another project's pool holding the
    // device does not make the pod its run.
    const std::string_view ns = std::string_view(pod).substr(0, pod.find('/'));
    const model::GpuPool* best = nullptr;
    int most = 0;
    for (const auto& [p, n] : h.by_pool) {
      if (p->metadata.ns != ns) continue;
      if (n > most || (n == most && best != nullptr && p->metadata.name < best->metadata.name)) best = p, most = n;
    }
    if (best == nullptr) {
      if (unpooled != nullptr) unpooled->push_back(pod);
      continue;
    }
    std::sort(h.devices.begin(), h.devices.end(), [](const model::WorkloadDevice& a, const model::WorkloadDevice& b) {
      return std::tie(a.gpu_uuid, a.instance_uuid) < std::tie(b.gpu_uuid, b.instance_uuid);
    });
    out.push_back({pod, h.node, best->metadata.name, best->metadata.ns, std::move(h.devices)});
  }
  return out;
}

PodRunController::PodRunController(store::Store& store, runtime::Manager& manager, cluster::Registry& registry)
    : store_(store),
      manager_(manager),
      gpus_(manager.informers().For<model::GpuCapacity>()),
      pools_(manager.informers().For<model::GpuPool>()),
      profiles_(manager.informers().For<model::Profile>()) {
  runtime::WorkQueue& q = manager.Add("podruns", *this);
  gpus_.AddIndex("cluster", [](const model::GpuCapacity& g) { return std::vector<std::string>{g.spec.cluster}; });
  // Only a change of who holds a device matters (not health, not MIG state).
  gpus_.OnChange([&q](const model::GpuCapacity* before, const model::GpuCapacity* after) {
    if (Holders(before) != Holders(after)) q.Add((after ? after : before)->spec.cluster);
  });
  pools_.OnChange([&q](const model::GpuPool* before, const model::GpuPool* after) {
    if (before != nullptr && after != nullptr && before->status.allocation == after->status.allocation) return;
    std::set<std::string> clusters;
    for (const model::GpuPool* p : {before, after}) {
      if (p == nullptr) continue;
      for (const model::AllocatedDevice& d : p->status.allocation) clusters.insert(d.cluster);
    }
    for (const std::string& c : clusters) q.Add(c);
  });
  subscription_ = registry.Subscribe([&q](const std::string& name, cluster::ClusterDriver*) { q.Add(name); });
  // The open runs of each cluster, to find their projects without reading every Profile; a new
  // one asks for a look once the informer has it, so that none is missed.
  profiles_.AddIndex(std::string(kOpenRuns), [](const model::Profile& p) {
    auto c = p.metadata.labels.find(std::string(kLabelCluster));
    return c == p.metadata.labels.end() || p.spec.end ? std::vector<std::string>{} : std::vector<std::string>{c->second};
  });
  profiles_.OnChange([&q](const model::Profile* before, const model::Profile* after) {
    if (before != nullptr || after == nullptr) return;
    if (auto c = after->metadata.labels.find(std::string(kLabelCluster)); c != after->metadata.labels.end()) q.Add(c->second);
  });
}

absl::StatusOr<runtime::Result> PodRunController::Reconcile(const std::string& cluster) {
  const std::vector<runtime::Informer<model::GpuCapacity>::Ptr> held = gpus_.ByIndex("cluster", cluster);
  const std::vector<runtime::Informer<model::GpuPool>::Ptr> all_pools = pools_.List();
  std::vector<const model::GpuCapacity*> gpus;
  for (const auto& g : held) gpus.push_back(g.get());
  std::vector<const model::GpuPool*> pools;
  for (const auto& p : all_pools) {
    if (!model::PoolIsLive(*p)) continue;
    pools.push_back(p.get());
  }
  std::vector<std::string> unpooled;
  const std::vector<PodRun> runs = PodRuns(gpus, pools, &unpooled);
  std::set<std::string> projects;  // where this cluster's open runs are, and new ones go
  for (const PodRun& r : runs) projects.insert(r.project);
  for (const auto& p : profiles_.ByIndex(kOpenRuns, cluster)) projects.insert(p->metadata.ns);

  PodRunStats delta;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    delta = PodRunStats{};
    const Time now = manager_.clock().Now();
    std::vector<model::Profile> profiles;
    for (const std::string& project : projects) {
      ASSIGN_OR_RETURN(std::vector<model::Profile> in_project, store::ListObjects<model::Profile>(tx, project));
      for (model::Profile& p : in_project) profiles.push_back(std::move(p));
    }
    std::set<size_t> kept;  // runs that an open Profile already records
    for (model::Profile& p : profiles) {
      auto c = p.metadata.labels.find(std::string(kLabelCluster));
      if (c == p.metadata.labels.end() || c->second != cluster || p.spec.end) continue;
      size_t i = 0;
      for (; i < runs.size(); ++i) {
        const PodRun& r = runs[i];
        if (r.pod == p.spec.pod && r.pool == p.spec.pool && r.project == p.spec.project &&
            r.devices == p.spec.devices && !kept.contains(i)) {
          break;
        }
      }
      if (i < runs.size()) {
        kept.insert(i);
        continue;
      }
      p.spec.end = now;  // the pod is gone from these devices
      RETURN_IF_ERROR(store::UpdateObject(tx, p));
      ++delta.ended;
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      if (kept.contains(i)) continue;
      const PodRun& r = runs[i];
      model::Profile prof;
      prof.metadata.name = RunName(r.pod, tx.revision());
      prof.metadata.ns = r.project;
      prof.metadata.labels = {{std::string(kLabelCluster), cluster}, {std::string(kLabelNode), r.node}};
      prof.spec = {r.pod, r.pool, r.project, r.devices, now, std::nullopt};
      RETURN_IF_ERROR(store::CreateObject(tx, prof, now));
      ++delta.started;
    }
    return absl::OkStatus();
  }));
  std::lock_guard<std::mutex> lock(mu_);
  stats_.started += delta.started;
  stats_.ended += delta.ended;
  int64_t& before = unpooled_[cluster];
  if (static_cast<int64_t>(unpooled.size()) != before && !unpooled.empty()) {
    log::Warn("cluster {}: {} pod(s) on GPUs that no pool holds, e.g. {}", cluster, unpooled.size(), unpooled.front());
  }
  stats_.unpooled += static_cast<int64_t>(unpooled.size()) - before;
  before = static_cast<int64_t>(unpooled.size());
  if (delta.started + delta.ended > 0) {
    log::Info("cluster {}: {} pod run(s) started, {} ended", cluster, delta.started, delta.ended);
  }
  return runtime::Result::Done();
}

PodRunStats PodRunController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace gpuaas::controller
