#include "cluster/kubernetes/driver.h"

#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "cluster/kubernetes/enforcement.h"
#include "cluster/kubernetes/mig_manager.h"
#include "cluster/kubernetes/nodes.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "fmt/format.h"

namespace gpuaas::cluster::kubernetes {
namespace {

constexpr std::string_view kGpuPodsByNode = "gpu-pods-by-node";

std::string NameOf(const std::string& object) { return MetadataField(object, "name"); }

// Every active pod's CPU and memory count against its node's room; the devices of those that
// hold some are marked in use. Other pods are not kept.
bool KeepPod(const PodGpus& pod) {
  return pod.Holds() || (pod.active && (pod.cpu_milli != 0 || pod.memory_bytes != 0));
}

// A ResourceClaim's JSON (text) with its gpu.nvidia.com devices only (a claim with none is not
// kept).
absl::StatusOr<ResourceClaim> ReadNvidiaClaim(const std::string& json) {
  absl::StatusOr<ResourceClaim> c = ReadResourceClaim(json);
  if (c.ok()) std::erase_if(c->devices, [](const ClaimDevice& d) { return d.driver != kNvidiaDraDriver; });
  return c;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KubernetesDriver>> KubernetesDriver::Make(std::string name, const ClientConfig& config,
                                                                         DriverOptions options) {
  // One client for writes and the nodes' watch, and one for each other watch.
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Make(config, options.timeouts);
    if (!c.ok()) return c.status();
    clients.push_back(std::move(*c));
  }
  return std::unique_ptr<KubernetesDriver>(new KubernetesDriver(std::move(name), std::move(options), std::move(clients[0]),
                                                                std::move(clients[1]), std::move(clients[2]),
                                                                std::move(clients[3])));
}

KubernetesDriver::KubernetesDriver(std::string name, DriverOptions options, std::unique_ptr<Client> client,
                                   std::unique_ptr<Client> pods_client, std::unique_ptr<Client> slices_client,
                                   std::unique_ptr<Client> claims_client)
    : name_(std::move(name)), options_(std::move(options)), client_(std::move(client)),
      pods_client_(std::move(pods_client)), slices_client_(std::move(slices_client)),
      claims_client_(std::move(claims_client)),
      nodes_([](const WatchedNode& n) { return n.name; }),
      pods_([](const PodGpus& p) { return p.key; }, KeepPod,
            {{std::string(kGpuPodsByNode),
              [](const PodGpus& p) { return p.Holds() ? std::vector<std::string>{p.node} : std::vector<std::string>{}; }}}),
      slices_([](const ResourceSlice& s) { return s.name; },
              [](const ResourceSlice& s) { return s.driver == kNvidiaDraDriver; }),
      claims_([](const ResourceClaim& c) { return c.key; }, [](const ResourceClaim& c) { return !c.devices.empty(); }) {
  nodes_reflector_ = std::make_unique<Reflector>(
      *client_, "/api/v1/nodes", [this](const ListResult& l) { ReplaceNodes(l); },
      [this](const WatchEvent& e) { ApplyNode(e); }, [this] { Changed(); }, options_.backoff);
  pods_reflector_ = std::make_unique<Reflector>(
      *pods_client_, "/api/v1/pods", [this](const ListResult& l) { ReplacePods(l); },
      [this](const WatchEvent& e) { ApplyPod(e); }, [this] { Changed(); }, options_.backoff);
  slices_reflector_ = std::make_unique<Reflector>(
      *slices_client_, std::string(kResourceSlices), [this](const ListResult& l) { ReplaceSlices(l); },
      [this](const WatchEvent& e) { ApplySlice(e); }, [this] { Changed(); }, options_.backoff);
  claims_reflector_ = std::make_unique<Reflector>(
      *claims_client_, std::string(kResourceClaims), [this](const ListResult& l) { ReplaceClaims(l); },
      [this](const WatchEvent& e) { ApplyClaim(e); }, [this] { Changed(); }, options_.backoff);
  MigManagerOptions mig;
  mig.config_namespace = options_.mig_config_namespace;
  mig.config_map = options_.mig_config_map;
  mig.pending_timeout = options_.mig_pending_timeout;
  mig.write_delay = options_.mig_write_delay;
  // The writer reads the nodes' cache alone (never mu_, which may be held while mig_ is called).
  mig_ = std::make_unique<MigManager>(
      name_, *client_, std::move(mig),
      [this](const std::string& node) -> std::optional<MigManager::NodeFacts> {
        Nodes::Ptr n = nodes_.Get(node);
        if (n == nullptr || n->kind != WatchedNode::Kind::kGpu) return std::nullopt;
        return MigManager::NodeFacts{NodeLabel(n->node, kMigConfigLabel), n->meta.resource_version};
      },
      writes_);
  enforcer_ = std::make_unique<Enforcer>(name_, *client_, options_.mig_config_namespace,
                                         options_.device_plugin_config_map, writes_);
}

KubernetesDriver::~KubernetesDriver() { Stop(); }

void KubernetesDriver::Start() {
  nodes_reflector_->Start();
  pods_reflector_->Start();
  slices_reflector_->Start();
  claims_reflector_->Start();
  mig_->Start();
}

void KubernetesDriver::Stop() {
  mig_->Stop();
  nodes_reflector_->Stop();
  pods_reflector_->Stop();
  slices_reflector_->Stop();
  claims_reflector_->Stop();
}

void KubernetesDriver::ReplacePods(const ListResult& list) {
  std::vector<PodGpus> pods;
  pods.reserve(list.items.size());
  for (const std::string& item : list.items) {
    absl::StatusOr<PodGpus> pod = ReadPod(item);
    if (pod.ok()) pods.push_back(std::move(*pod));
  }
  pods_.Replace(std::move(pods), list.resource_version);
  // The reflector tells (on_state) once the list is its synced state.
}

void KubernetesDriver::ApplyPod(const WatchEvent& event) {
  absl::StatusOr<PodGpus> pod = ReadPod(event.object);
  if (!pod.ok()) return;
  if (pods_.Apply(event.type, std::move(*pod)).changed()) Changed();
}

KubernetesDriver::WatchedNode KubernetesDriver::ReadWatchedNode(const std::string& json) const {
  return ReadNodeOnce(name_, json);
}

bool KubernetesDriver::NodeChanged(const Nodes::Change& change) const {
  const WatchedNode* before = change.before.get();
  const WatchedNode* after = change.after.get();
  auto is = [](const WatchedNode* n, WatchedNode::Kind kind) { return n != nullptr && n->kind == kind; };
  using enum WatchedNode::Kind;
  // A GPU node is reported: any change of what is reported of it, or of whether it is one.
  if (is(after, kGpu)) return !is(before, kGpu) || !(before->node == after->node);
  if (is(before, kGpu)) return true;
  // A bare node is reported only where ResourceSlices name its GPUs.
  const bool bare_changed = is(after, kBare) ? !is(before, kBare) || !(before->node == after->node) : is(before, kBare);
  const WatchedNode* any = after != nullptr ? after : before;
  return bare_changed && any != nullptr && slice_gpus_.contains(any->name);
}

void KubernetesDriver::ReplaceNodes(const ListResult& list) {
  std::vector<WatchedNode> nodes;
  nodes.reserve(list.items.size());
  for (const std::string& item : list.items) nodes.push_back(ReadWatchedNode(item));
  std::lock_guard<std::mutex> lock(mu_);
  for (const WatchedNode& n : nodes) {
    if (n.kind == WatchedNode::Kind::kGpu) mig_->ObserveNode(n.node, n.meta);
    if (n.kind == WatchedNode::Kind::kRefused) log::Warn("cluster {}: {}", name_, n.refused);
  }
  nodes_.Replace(std::move(nodes), list.resource_version);
  // The reflector tells (on_state) once the list is its synced state.
}

void KubernetesDriver::ApplyNode(const WatchEvent& event) {
  WatchedNode node = ReadWatchedNode(event.object);
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.type != kWatchDeleted && node.kind == WatchedNode::Kind::kGpu) mig_->ObserveNode(node.node, node.meta);
    const Nodes::Change change = nodes_.Apply(event.type, std::move(node));
    if (const WatchedNode* n = change.after.get(); n != nullptr && n->kind == WatchedNode::Kind::kRefused) {
      const WatchedNode* b = change.before.get();
      if (b == nullptr || b->kind != WatchedNode::Kind::kRefused || b->refused != n->refused) {
        log::Warn("cluster {}: {}", name_, n->refused);
      }
    }
    changed = NodeChanged(change);
  }
  if (changed) Changed();
}

bool KubernetesDriver::SlicesChanged() {
  std::vector<ResourceSlice> all;
  for (const WatchCache<ResourceSlice>::Ptr& slice : slices_.List()) all.push_back(*slice);
  std::map<std::string, std::vector<ObservedGpu>> gpus = GpusFromSlices(all);
  slice_uuids_ = DeviceUuids(all);
  slice_products_.clear();
  for (const ResourceSlice& sl : all) {
    for (const SliceDevice& d : sl.devices) {
      if (d.type == "gpu" && !d.product.empty() && !sl.node.empty()) slice_products_.emplace(sl.node, d.product);
    }
  }
  if (gpus == slice_gpus_) return false;
  slice_gpus_ = std::move(gpus);
  return true;
}

void KubernetesDriver::ReplaceClaims(const ListResult& list) {
  std::vector<ResourceClaim> claims;
  for (const std::string& item : list.items) {
    absl::StatusOr<ResourceClaim> c = ReadNvidiaClaim(item);
    if (!c.ok()) {
      log::Warn("cluster {}: ResourceClaim {} ignored: {}", name_, NameOf(item), c.status().ToString());
      continue;
    }
    claims.push_back(std::move(*c));
  }
  claims_.Replace(std::move(claims), list.resource_version);
}

void KubernetesDriver::ApplyClaim(const WatchEvent& event) {
  absl::StatusOr<ResourceClaim> c = ReadNvidiaClaim(event.object);
  if (!c.ok()) {
    log::Warn("cluster {}: ResourceClaim {} ignored: {}", name_, NameOf(event.object), c.status().ToString());
    return;
  }
  if (claims_.Apply(event.type, std::move(*c)).changed()) Changed();
}

void KubernetesDriver::ReplaceSlices(const ListResult& list) {
  std::vector<ResourceSlice> slices;
  for (const std::string& item : list.items) {
    absl::StatusOr<ResourceSlice> s = ReadResourceSlice(item);
    if (s.ok()) slices.push_back(std::move(*s));
  }
  std::lock_guard<std::mutex> lock(mu_);
  slices_.Replace(std::move(slices), list.resource_version);
  SlicesChanged();  // the reflector tells (on_state) once the list is its synced state
}

void KubernetesDriver::ApplySlice(const WatchEvent& event) {
  absl::StatusOr<ResourceSlice> s = ReadResourceSlice(event.object);
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) {
      slices_.Apply(event.type, std::move(*s));
    } else {
      const std::string name = NameOf(event.object);
      if (event.type != kWatchDeleted) log::Warn("cluster {}: ResourceSlice {} ignored: {}", name_, name, s.status().ToString());
      slices_.Delete(name);
    }
    changed = SlicesChanged();
  }
  if (changed) Changed();
}

const std::vector<ObservedGpu>& KubernetesDriver::GpusOf(const ObservedNode& node) const {
  auto it = slice_gpus_.find(node.name);
  return it == slice_gpus_.end() ? node.gpus : it->second;
}

void KubernetesDriver::Changed() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f = on_change_;
  }
  if (f) f();
}

absl::StatusOr<ObservedCluster> KubernetesDriver::Observe() {
  for (const auto& [what, s] : {std::pair{"nodes", nodes_reflector_->stats()}, std::pair{"pods", pods_reflector_->stats()}}) {
    if (!s.synced) {
      return absl::UnavailableError(s.last_error.empty() ? fmt::format("{} not listed yet", what)
                                                         : fmt::format("{} not listed yet: {}", what, s.last_error));
    }
    if (!s.last_error.empty()) return absl::UnavailableError(s.last_error);
  }
  // ResourceSlices where the API server serves them (Kubernetes 1.34 and later); a cluster that
  // does not (404), or does not let gpuaas read them (403), has its GPUs from labels alone.
  for (const auto& [what, s] : {std::pair{"resourceslices", slices_reflector_->stats()},
                                std::pair{"resourceclaims", claims_reflector_->stats()}}) {
    if (!s.synced && s.last_code != absl::StatusCode::kNotFound && s.last_code != absl::StatusCode::kPermissionDenied) {
      return absl::UnavailableError(s.last_error.empty() ? fmt::format("{} not listed yet", what)
                                                         : fmt::format("{} not listed yet: {}", what, s.last_error));
    }
  }
  ObservedCluster c;
  c.name = name_;
  c.display_name = options_.display_name.empty() ? name_ : options_.display_name;
  c.region = options_.region;
  c.driver = "kubernetes";
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<Pods::Ptr> pods = pods_.List();
  std::map<std::string, std::vector<const PodGpus*>> held;  // node -> its GPU pods
  std::set<std::string_view> holding;                       // their keys
  HeldDevices exact;  // pod -> the devices its DRA claims were given
  std::map<std::string_view, std::pair<int64_t, int64_t>> requested;  // node -> (CPU milli, memory bytes)
  for (const Pods::Ptr& pod : pods) {
    if (pod->active && (pod->cpu_milli != 0 || pod->memory_bytes != 0)) {
      auto& sum = requested[pod->node];
      sum.first += pod->cpu_milli;
      sum.second += pod->memory_bytes;
    }
    if (!pod->Holds()) continue;
    held[pod->node].push_back(pod.get());
    holding.insert(pod->key);
    for (const std::string& claim : pod->claims) {
      WatchCache<ResourceClaim>::Ptr cl = claims_.Get(claim);
      if (cl == nullptr) continue;
      for (const ClaimDevice& d : cl->devices) {
        if (auto u = slice_uuids_.find(d.pool + "/" + d.device); u != slice_uuids_.end()) exact[pod->key].push_back(u->second);
      }
    }
  }
  std::erase_if(sticky_, [&](const auto& kv) { return !holding.contains(kv.first); });
  auto add_requests = [&](ObservedNode& out) {
    if (auto r = requested.find(out.name); r != requested.end()) {
      out.pod_cpu_milli = r->second.first;
      out.pod_memory_bytes = r->second.second;
    }
  };
  const std::vector<Nodes::Ptr> nodes = nodes_.List();
  c.nodes.reserve(nodes.size());
  for (const Nodes::Ptr& n : nodes) {
    if (n->kind != WatchedNode::Kind::kGpu) continue;
    const ObservedNode& node = n->node;
    c.nodes.push_back(node);
    ObservedNode& out = c.nodes.back();
    add_requests(out);
    if (auto sg = slice_gpus_.find(n->name); sg != slice_gpus_.end()) {
      // The DRA driver names the devices: real UUIDs and placements replace the derived ones.
      std::vector<ObservedGpu> gpus = sg->second;
      for (ObservedGpu& g : gpus) {
        if (g.memory_mib == 0 && static_cast<size_t>(g.index) < node.gpus.size()) {
          g.memory_mib = node.gpus[static_cast<size_t>(g.index)].memory_mib;
        }
      }
      out.gpus = std::move(gpus);
    } else {
      mig_->ShowApplied(out);
    }
    if (auto h = held.find(n->name); h != held.end()) MarkHeld(h->second, exact, device_projects_, sticky_, out);
  }
  // Nodes whose GPUs only the DRA driver names (no GFD labels): the slices are their GPUs.
  for (const auto& [n, gpus] : slice_gpus_) {
    Nodes::Ptr bare = nodes_.Get(n);
    if (bare == nullptr || bare->kind != WatchedNode::Kind::kBare) continue;
    c.nodes.push_back(bare->node);
    ObservedNode& out = c.nodes.back();
    add_requests(out);
    out.gpus = gpus;
    if (auto p = slice_products_.find(n); p != slice_products_.end()) out.gpu_product = p->second;
    if (auto h = held.find(n); h != held.end()) MarkHeld(h->second, exact, device_projects_, sticky_, out);
  }
  return c;
}

absl::Status KubernetesDriver::EnforceProjectDevices(const std::string& project, const std::set<std::string>& uuids) {
  bool changed = false;
  DeviceTaintRules want;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(device_projects_, [&](const auto& kv) {
      const bool drop = kv.second == project && !uuids.contains(kv.first);
      changed = changed || drop;
      return drop;
    });
    for (const std::string& u : uuids) {
      auto [it, added] = device_projects_.try_emplace(u, project);
      if (!added && it->second != project) it->second = project, added = true;
      changed = changed || added;
    }
    changed = changed && !pods_.IndexValues(kGpuPodsByNode).empty();  // only where a guess could move
    want = ProjectDeviceTaintRules(project, uuids, slice_uuids_);
  }
  if (changed) Changed();
  if (!slices_reflector_->stats().synced) return absl::OkStatus();  // no DRA here
  return enforcer_->ProjectDeviceTaints(project, want);
}

bool KubernetesDriver::Watch(std::function<void()> on_change) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_change_ = on_change;
  }
  // A list that completed before anyone listened is news to the listener.
  if (on_change && nodes_reflector_->stats().synced) on_change();
  return true;
}

absl::Status KubernetesDriver::ApplyMigLayout(const std::string& node, const std::string& gpu_uuid, bool mig_enabled,
                                              const std::vector<ObservedMigInstance>& instances) {
  std::unique_lock<std::mutex> lock(mu_);
  Nodes::Ptr n = nodes_.Get(node);
  if (n == nullptr || n->kind != WatchedNode::Kind::kGpu) {
    return absl::NotFoundError(fmt::format("cluster {}: no GPU node {}", name_, node));
  }
  if (std::vector<Pods::Ptr> running = pods_.ByIndex(kGpuPodsByNode, node); !running.empty()) {
    lock.unlock();  // the cordon is a write
    return mig_->RefuseWhilePodsRun(node, n->meta, running.front()->key);
  }
  return mig_->Ask(node, GpusOf(n->node), gpu_uuid, mig_enabled, instances);
}

ClusterDriver::MigState KubernetesDriver::NodeMigState(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);  // the node and what mig_ saw of it, together
  Nodes::Ptr n = nodes_.Get(node);
  return mig_->State(node, n != nullptr && n->kind == WatchedNode::Kind::kGpu ? &n->node : nullptr);
}

absl::Status KubernetesDriver::EnforceProjectQuota(const std::string& project,
                                                   const std::map<std::string, int64_t>& devices) {
  return enforcer_->ProjectQuota(project, devices);
}

std::map<std::string, std::string> KubernetesDriver::refused_nodes() const {
  std::map<std::string, std::string> out;
  for (const Nodes::Ptr& n : nodes_.List()) {
    if (n->kind == WatchedNode::Kind::kRefused) out.emplace(n->name, n->refused);
  }
  return out;
}

absl::Status KubernetesDriver::TellPodsOfReclaim(const std::vector<std::string>& pods,
                                                 std::chrono::system_clock::time_point deadline) {
  return enforcer_->ReclaimDeadline(pods, FormatTime(deadline));
}

absl::Status KubernetesDriver::RemovePods(const std::vector<std::string>& pods) { return enforcer_->RemovePods(pods); }

absl::Status KubernetesDriver::EnforceNodeOwners(const std::map<std::string, NodeOwner>& owners) {
  NodeOwnerPlan plan;
  for (const Nodes::Ptr& n : nodes_.List()) {
    if (n->kind == WatchedNode::Kind::kGpu) PlanNodeOwner(n->node, n->meta, owners, plan);
  }
  return enforcer_->NodeOwners(plan);
}

absl::StatusOr<std::unique_ptr<KubernetesDriver>> DriverFromKubeconfig(std::string name, std::string_view kubeconfig,
                                                                        std::string_view context, DriverOptions options) {
  absl::StatusOr<ClientConfig> config = ParseSelfContainedKubeconfig(kubeconfig, context);
  if (!config.ok()) return absl::InvalidArgumentError(fmt::format("spec.kubeconfig: {}", config.status().message()));
  absl::StatusOr<std::unique_ptr<KubernetesDriver>> d = KubernetesDriver::Make(std::move(name), *config, std::move(options));
  if (!d.ok()) return absl::InvalidArgumentError(fmt::format("spec.kubeconfig: {}", d.status().message()));
  return d;
}

}  // namespace gpuaas::cluster::kubernetes
