#include "cluster/kubernetes/driver.h"

#include <algorithm>
#include <set>

#include "catalog/catalog.h"
#include "cluster/kubernetes/nodes.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "model/pool.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

std::string NameOf(const std::string& object) { return MetadataField(object, "name"); }

std::map<std::string, int64_t> Counts(const std::vector<ObservedMigInstance>& instances) {
  std::map<std::string, int64_t> out;
  for (const ObservedMigInstance& mi : instances) ++out[mi.profile];
  return out;
}

// The MIG devices per profile the wanted layouts add up to (what GFD's labels will count).
std::map<std::string, int64_t> Totals(const std::map<int, GpuMigSpec>& want) {
  std::map<std::string, int64_t> out;
  for (const auto& [i, spec] : want) {
    if (!spec.enabled) continue;
    for (const auto& [p, n] : spec.devices) out[p] += n;
  }
  return out;
}

std::map<std::string, int64_t> Totals(const ObservedNode& node) {
  std::map<std::string, int64_t> out;
  for (const ObservedGpu& g : node.gpus) {
    for (const ObservedMigInstance& mi : g.mig_instances) ++out[mi.profile];
  }
  return out;
}

std::string Label(const ObservedNode& node, const std::string& key) {
  auto it = node.labels.find(key);
  return it == node.labels.end() ? "" : it->second;
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
      claims_client_(std::move(claims_client)) {
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
}

KubernetesDriver::~KubernetesDriver() { Stop(); }

void KubernetesDriver::Start() {
  nodes_reflector_->Start();
  pods_reflector_->Start();
  slices_reflector_->Start();
  claims_reflector_->Start();
  mig_writer_ = std::thread([this] { WriteMigConfigs(); });
}

void KubernetesDriver::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  mig_cv_.notify_all();
  if (mig_writer_.joinable()) mig_writer_.join();
  nodes_reflector_->Stop();
  pods_reflector_->Stop();
  slices_reflector_->Stop();
  claims_reflector_->Stop();
}

bool KubernetesDriver::PutPod(const std::string& json, bool deleted) {
  absl::StatusOr<PodGpus> pod = ReadPod(json);
  if (!pod.ok()) return false;
  // Every active pod's CPU and memory count against its node's room.
  bool requests_changed = false;
  if (deleted || !pod->active || (pod->cpu_milli == 0 && pod->memory_bytes == 0)) {
    requests_changed = pod_requests_.erase(pod->key) > 0;
  } else {
    PodRequest r{pod->node, pod->cpu_milli, pod->memory_bytes};
    auto [at, added] = pod_requests_.try_emplace(pod->key, r);
    requests_changed = added || !(at->second == r);
    at->second = std::move(r);
  }
  auto it = pods_.find(pod->key);
  if (deleted || !pod->Holds()) {
    if (it == pods_.end()) return requests_changed;
    pods_.erase(it);
    return true;
  }
  if (it != pods_.end() && it->second == *pod) return requests_changed;
  pods_[pod->key] = std::move(*pod);
  return true;
}

void KubernetesDriver::ReplacePods(const ListResult& list) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_.clear();
  pod_requests_.clear();
  for (const std::string& item : list.items) PutPod(item, false);
  // The reflector tells (on_state) once the list is its synced state.
}

void KubernetesDriver::ApplyPod(const WatchEvent& event) {
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changed = PutPod(event.object, event.type == "DELETED");
  }
  if (changed) Changed();
}

bool KubernetesDriver::PutNode(const std::string& json) {
  const std::string node = NameOf(json);
  absl::StatusOr<ObservedNode> read = ReadNode(name_, json);
  if (!read.ok()) {
    node_meta_.erase(node);
    bool changed = nodes_.erase(node) > 0;
    if (absl::IsNotFound(read.status())) {
      refused_.erase(node);
      // No GPU labels: kept bare, for when NVIDIA's DRA driver names GPUs there.
      absl::StatusOr<ObservedNode> bare = ReadBareNode(json);
      if (!bare.ok()) return changed;
      auto b = bare_nodes_.find(node);
      const bool differs = b == bare_nodes_.end() || !(b->second == *bare);
      bare_nodes_[node] = std::move(*bare);
      return changed || (differs && slice_gpus_.contains(node));
    }
    const std::string why(read.status().message());
    auto [it, added] = refused_.try_emplace(node, why);
    if (added || it->second != why) {
      it->second = why;
      log::Warn("cluster {}: {}", name_, why);
    }
    return changed;
  }
  refused_.erase(read->name);
  bare_nodes_.erase(read->name);
  {
    const nlohmann::json n = nlohmann::json::parse(json, nullptr, false);
    NodeMeta& meta = node_meta_[read->name];
    meta.resource_version = MetadataField(json, "resourceVersion");
    const nlohmann::json* taints = n.is_object() && n.contains("spec") && n["spec"].is_object() && n["spec"].contains("taints")
                                       ? &n["spec"]["taints"]
                                       : nullptr;
    meta.taints = taints != nullptr && taints->is_array() ? taints->dump() : "[]";
    meta.unschedulable = n.is_object() && n.contains("spec") && n["spec"].is_object() &&
                         n["spec"].value("unschedulable", false);
    meta.cordoned_for_mig = n.is_object() && n.contains("metadata") && n["metadata"].contains("annotations") &&
                            n["metadata"]["annotations"].is_object() &&
                            n["metadata"]["annotations"].contains(std::string(kCordonAnnotation));
  }
  // Every state the MIG manager passes through is seen here, however briefly it lasts: a
  // `failed` or `success` counts as the answer to gpuaas's config only after it was seen working.
  if (auto m = mig_.find(read->name); m != mig_.end() && !m->second.config.empty() &&
                                      Label(*read, "nvidia.com/mig.config") == m->second.config) {
    NodeMig& mig = m->second;
    const std::string state = Label(*read, "nvidia.com/mig.config.state");
    if (state == "pending" || state == "rebooting") mig.progressed = true;
    if (state == "success" && (mig.progressed || Totals(mig.want) == Totals(*read))) {
      mig.applied = mig.want;
      mig.applied_placements = mig.placements;
    }
    // Done with the node, either way: one gpuaas cordoned for the change is given back.
    if ((state == "success" || state == "failed") && mig.progressed && node_meta_[read->name].cordoned_for_mig &&
        !mig.dirty) {
      mig.uncordon = true;
      mig_cv_.notify_all();
    }
  }
  auto it = nodes_.find(read->name);
  if (it != nodes_.end() && it->second == *read) return false;
  nodes_[read->name] = std::move(*read);
  return true;
}

void KubernetesDriver::ReplaceNodes(const ListResult& list) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_.clear();
    bare_nodes_.clear();
    node_meta_.clear();
    refused_.clear();
    for (const std::string& item : list.items) PutNode(item);
  }
  // The reflector tells (on_state) once the list is its synced state.
}

void KubernetesDriver::ApplyNode(const WatchEvent& event) {
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.type == "DELETED") {
      const std::string node = NameOf(event.object);
      refused_.erase(node);
      node_meta_.erase(node);
      changed = nodes_.erase(node) > 0 || (bare_nodes_.erase(node) > 0 && slice_gpus_.contains(node));
    } else {
      changed = PutNode(event.object);
    }
  }
  if (changed) Changed();
}

bool KubernetesDriver::SlicesChanged() {
  std::vector<ResourceSlice> all;
  all.reserve(slices_.size());
  for (const auto& [name, slice] : slices_) all.push_back(slice);
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

bool KubernetesDriver::PutClaim(const std::string& json, bool deleted) {
  absl::StatusOr<ResourceClaim> c = ReadResourceClaim(json);
  if (!c.ok()) {
    log::Warn("cluster {}: ResourceClaim {} ignored: {}", name_, NameOf(json), c.status().ToString());
    return false;
  }
  std::erase_if(c->devices, [](const ClaimDevice& d) { return d.driver != kNvidiaDraDriver; });
  auto it = claims_.find(c->key);
  if (deleted || c->devices.empty()) {
    if (it == claims_.end()) return false;
    claims_.erase(it);
    return true;
  }
  if (it != claims_.end() && it->second == *c) return false;
  claims_[c->key] = std::move(*c);
  return true;
}

void KubernetesDriver::ReplaceClaims(const ListResult& list) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_.clear();
  for (const std::string& item : list.items) PutClaim(item, false);
}

void KubernetesDriver::ApplyClaim(const WatchEvent& event) {
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changed = PutClaim(event.object, event.type == "DELETED");
  }
  if (changed) Changed();
}

void KubernetesDriver::ReplaceSlices(const ListResult& list) {
  std::lock_guard<std::mutex> lock(mu_);
  slices_.clear();
  for (const std::string& item : list.items) {
    absl::StatusOr<ResourceSlice> s = ReadResourceSlice(item);
    if (s.ok() && s->driver == kNvidiaDraDriver) slices_[s->name] = std::move(*s);
  }
  SlicesChanged();  // the reflector tells (on_state) once the list is its synced state
}

void KubernetesDriver::ApplySlice(const WatchEvent& event) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string name = NameOf(event.object);
    absl::StatusOr<ResourceSlice> s = ReadResourceSlice(event.object);
    if (event.type == "DELETED" || !s.ok() || s->driver != kNvidiaDraDriver) {
      if (!s.ok() && event.type != "DELETED") log::Warn("cluster {}: ResourceSlice {} ignored: {}", name_, name, s.status().ToString());
      slices_.erase(name);
    } else {
      slices_[name] = std::move(*s);
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
  std::map<std::string, std::vector<const PodGpus*>> held;  // node -> its GPU pods
  HeldDevices exact;  // pod -> the devices its DRA claims were given
  for (const auto& [key, pod] : pods_) {
    held[pod.node].push_back(&pod);
    for (const std::string& claim : pod.claims) {
      auto cl = claims_.find(claim);
      if (cl == claims_.end()) continue;
      for (const ClaimDevice& d : cl->second.devices) {
        if (auto u = slice_uuids_.find(d.pool + "/" + d.device); u != slice_uuids_.end()) exact[key].push_back(u->second);
      }
    }
  }
  std::erase_if(sticky_, [this](const auto& kv) { return !pods_.contains(kv.first); });
  std::map<std::string_view, std::pair<int64_t, int64_t>> requested;  // node -> (CPU milli, memory bytes)
  for (const auto& [key, r] : pod_requests_) {
    auto& sum = requested[r.node];
    sum.first += r.cpu_milli;
    sum.second += r.memory_bytes;
  }
  auto add_requests = [&](ObservedNode& out) {
    if (auto r = requested.find(out.name); r != requested.end()) {
      out.pod_cpu_milli = r->second.first;
      out.pod_memory_bytes = r->second.second;
    }
  };
  c.nodes.reserve(nodes_.size());
  for (const auto& [n, node] : nodes_) {
    c.nodes.push_back(node);
    ObservedNode& out = c.nodes.back();
    add_requests(out);
    if (auto sg = slice_gpus_.find(n); sg != slice_gpus_.end()) {
      // The DRA driver names the devices: real UUIDs and placements replace the derived ones.
      std::vector<ObservedGpu> gpus = sg->second;
      for (ObservedGpu& g : gpus) {
        if (g.memory_mib == 0 && static_cast<size_t>(g.index) < node.gpus.size()) {
          g.memory_mib = node.gpus[static_cast<size_t>(g.index)].memory_mib;
        }
      }
      out.gpus = std::move(gpus);
    } else if (auto m = mig_.find(n); m != mig_.end() && !m->second.applied.empty() &&
                                      Totals(m->second.applied) == Totals(node)) {
      // Labels count MIG devices; while they count what the MIG manager last applied for
      // gpuaas, the placements are the ones asked for.
      const NodeMig& mig = m->second;
      for (ObservedGpu& g : out.gpus) {
        auto want = mig.applied.find(g.index);
        if (want == mig.applied.end()) continue;
        g.mig_enabled = want->second.enabled;
        g.mig_instances.clear();
        auto placed = mig.applied_placements.find(g.index);
        const std::vector<ObservedMigInstance> none;
        for (const ObservedMigInstance& mi : placed == mig.applied_placements.end() ? none : placed->second) {
          ObservedMigInstance inst = mi;
          const catalog::GpuModel* model = catalog::ModelFromProduct(node.gpu_product).value_or(nullptr);
          const catalog::MigProfile* p = model ? catalog::FindProfile(*model, mi.profile) : nullptr;
          inst.size = p ? p->memory_slices : mi.size;
          inst.uuid = "MIG-" + StableUuid(fmt::format("{}/{}/{}", g.uuid, mi.profile, mi.start));
          inst.in_use = false;
          g.mig_instances.push_back(inst);
        }
      }
    }
    if (auto h = held.find(n); h != held.end()) MarkHeld(h->second, exact, device_projects_, sticky_, out);
  }
  // Nodes whose GPUs only the DRA driver names (no GFD labels): the slices are their GPUs.
  for (const auto& [n, gpus] : slice_gpus_) {
    auto bare = bare_nodes_.find(n);
    if (bare == bare_nodes_.end() || nodes_.contains(n)) continue;
    c.nodes.push_back(bare->second);
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
  std::set<std::string> want;  // rule names
  std::map<std::string, std::pair<std::string, std::string>> where;  // rule name -> (pool, device)
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
    changed = changed && !pods_.empty();  // only where a guess could move
    for (const auto& [name, uuid] : slice_uuids_) {
      if (!uuids.contains(uuid)) continue;
      const size_t slash = name.find('/');
      const std::string pool = name.substr(0, slash), device = name.substr(slash + 1);
      const std::string rule = DeviceTaintRuleName(project, pool, device);
      want.insert(rule);
      where[rule] = {pool, device};
    }
  }
  if (changed) Changed();
  if (!slices_reflector_->stats().synced) return absl::OkStatus();  // no DRA here
  absl::StatusOr<std::string> listed = client_->Get(std::string(kDeviceTaintRules));
  if (absl::IsNotFound(listed.status())) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!std::exchange(said_no_device_taints_, true)) {
      log::Warn("cluster {}: DeviceTaintRules are not served (the DRADeviceTaints feature is off): pools' DRA "
                "devices are not fenced by device taints",
                name_);
    }
    return absl::OkStatus();
  }
  if (!listed.ok()) return listed.status();
  std::set<std::string> have;
  const nlohmann::json list = nlohmann::json::parse(*listed, nullptr, false);
  if (list.is_object() && list.contains("items") && list["items"].is_array()) {
    for (const nlohmann::json& item : list["items"]) {
      const nlohmann::json meta = item.is_object() ? item.value("metadata", nlohmann::json::object()) : nlohmann::json::object();
      const nlohmann::json labels = meta.is_object() ? meta.value("labels", nlohmann::json::object()) : nlohmann::json::object();
      if (labels.is_object() && labels.value(std::string(kProjectTaintKey), "") == project && meta["name"].is_string()) {
        have.insert(meta["name"].get<std::string>());
      }
    }
  }
  for (const std::string& rule : want) {
    if (have.contains(rule)) continue;
    const auto& [pool, device] = where[rule];
    absl::StatusOr<std::string> made = client_->Send("POST", std::string(kDeviceTaintRules), DeviceTaintRule(project, pool, device));
    if (!made.ok() && !absl::IsAborted(made.status())) return made.status();  // 409: made meanwhile
    if (made.ok()) ++writes_;
  }
  for (const std::string& rule : have) {
    if (want.contains(rule)) continue;
    absl::StatusOr<std::string> gone = client_->Send("DELETE", std::string(kDeviceTaintRules) + "/" + rule, "");
    if (!gone.ok() && !absl::IsNotFound(gone.status())) return gone.status();
    if (gone.ok()) ++writes_;
  }
  if (want != have) log::Info("cluster {}: {} device(s) tainted for project {}", name_, want.size(), project);
  return absl::OkStatus();
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
  auto n = nodes_.find(node);
  if (n == nodes_.end()) return absl::NotFoundError(fmt::format("cluster {}: no GPU node {}", name_, node));
  for (const auto& [key, pod] : pods_) {
    if (pod.node != node) continue;
    // The MIG manager would stop them: cordon the node so that no new ones start, and wait.
    const NodeMeta meta = node_meta_[node];
    const std::string running = key;
    lock.unlock();
    if (!meta.unschedulable) {
      const nlohmann::json patch = {
          {"metadata", {{"resourceVersion", meta.resource_version}, {"annotations", {{std::string(kCordonAnnotation), "true"}}}}},
          {"spec", {{"unschedulable", true}}}};
      absl::StatusOr<std::string> done =
          client_->Send("PATCH", "/api/v1/nodes/" + node, patch.dump(), "application/merge-patch+json");
      if (!done.ok()) return done.status();
      ++writes_;
      log::Info("cluster {}: node {} cordoned until its GPU pods finish, for a MIG change", name_, node);
    }
    return absl::FailedPreconditionError(fmt::format(
        "node {} runs GPU pods ({} among them), which the MIG manager would stop: the node is cordoned and the MIG "
        "change waits until they finish",
        node, running));
  }
  const std::vector<ObservedGpu>& gpus = GpusOf(n->second);
  const auto gpu = std::find_if(gpus.begin(), gpus.end(),
                                [&](const ObservedGpu& g) { return EqualsIgnoreCase(g.uuid, gpu_uuid); });
  if (gpu == gpus.end()) return absl::NotFoundError(fmt::format("node {} has no GPU {}", node, gpu_uuid));
  NodeMig& m = mig_[node];
  if (m.want.empty()) {
    // The rest of the node stays as it is.
    for (const ObservedGpu& g : gpus) m.want[g.index] = {g.mig_enabled, Counts(g.mig_instances)};
  }
  const GpuMigSpec spec{mig_enabled, mig_enabled ? Counts(instances) : std::map<std::string, int64_t>{}};
  const std::vector<ObservedMigInstance> placed = mig_enabled ? instances : std::vector<ObservedMigInstance>{};
  const bool asked_already = m.want[gpu->index] == spec && m.placements[gpu->index] == placed && !m.failed &&
                             m.error.empty() && (m.dirty || !m.config.empty());
  m.want[gpu->index] = spec;
  m.placements[gpu->index] = placed;
  if (asked_already) return absl::OkStatus();  // idempotent: the same layout is not asked twice
  m.dirty = true;
  m.failed = false;
  m.error.clear();
  mig_cv_.notify_all();
  return absl::OkStatus();
}

void KubernetesDriver::WriteMigConfigs() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    mig_cv_.wait(lock, [&] {
      return stopping_ ||
             std::any_of(mig_.begin(), mig_.end(), [](const auto& kv) { return kv.second.dirty || kv.second.uncordon; });
    });
    if (stopping_) return;
    // Let the other GPUs of the same change arrive: one config per node.
    mig_cv_.wait_for(lock, options_.mig_write_delay, [&] { return stopping_; });
    if (stopping_) return;
    std::vector<std::pair<std::string, std::map<int, GpuMigSpec>>> todo;
    std::vector<std::pair<std::string, std::string>> uncordon;  // node, resourceVersion
    for (auto& [node, m] : mig_) {
      if (m.dirty) todo.push_back({node, m.want});
      m.dirty = false;
      if (m.uncordon) uncordon.emplace_back(node, node_meta_[node].resource_version);
      m.uncordon = false;
    }
    lock.unlock();
    for (const auto& [node, rv] : uncordon) {
      // At the version seen: a node changed meanwhile is judged again from its next event.
      const nlohmann::json patch = {
          {"metadata", {{"resourceVersion", rv}, {"annotations", {{std::string(kCordonAnnotation), nullptr}}}}},
          {"spec", {{"unschedulable", nullptr}}}};
      absl::StatusOr<std::string> done =
          client_->Send("PATCH", "/api/v1/nodes/" + node, patch.dump(), "application/merge-patch+json");
      if (done.ok()) {
        ++writes_;
        log::Info("cluster {}: node {} uncordoned, its MIG change done", name_, node);
      } else {
        log::Warn("cluster {}: node {} not uncordoned yet: {}", name_, node, done.status().ToString());
      }
    }
    for (const auto& [node, want] : todo) {
      absl::StatusOr<std::string> config = WriteMigConfig(node, want);
      std::lock_guard<std::mutex> relock(mu_);
      NodeMig& m = mig_[node];
      if (config.ok()) {
        m.error.clear();
      } else {
        m.error = config.status().ToString();
        log::Warn("cluster {}: node {}: MIG config not written: {}", name_, node, m.error);
      }
    }
    lock.lock();
  }
}

absl::StatusOr<std::string> KubernetesDriver::WriteMigConfig(const std::string& node,
                                                             const std::map<int, GpuMigSpec>& want) {
  const std::string prefix = fmt::format("gpuaas-{}-", node);
  std::string current;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto n = nodes_.find(node); n != nodes_.end()) current = Label(n->second, "nvidia.com/mig.config");
  }
  // A new name every time (seconds since the epoch), so that the label changes and the MIG
  // manager runs even where the last attempt with the same layout failed.
  int64_t serial = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string config = prefix + std::to_string(serial);
  if (config == current) config = prefix + std::to_string(serial + 1);

  const std::string base = fmt::format("/api/v1/namespaces/{}/configmaps", options_.mig_config_namespace);
  absl::Status last;
  for (int attempt = 0; attempt < 4; ++attempt) {  // conflicts: read again and retry
    absl::StatusOr<std::string> got = client_->Get(base + "/" + options_.mig_config_map);
    nlohmann::json cm;
    std::string existing;
    if (got.ok()) {
      cm = nlohmann::json::parse(*got, nullptr, false);
      if (!cm.is_object()) return absl::UnavailableError("the MIG config ConfigMap is not JSON");
      if (cm.contains("data") && cm["data"].is_object()) existing = cm["data"].value("config.yaml", "");
    } else if (!absl::IsNotFound(got.status())) {
      return got.status();
    }
    absl::StatusOr<std::string> doc = MergeMigConfig(existing, config, prefix, want);
    if (!doc.ok()) return doc.status();
    absl::StatusOr<std::string> written;
    if (got.ok()) {
      cm["data"]["config.yaml"] = *doc;  // at the resourceVersion read: a conflict is a 409
      written = client_->Send("PUT", base + "/" + options_.mig_config_map, cm.dump());
    } else {
      const nlohmann::json fresh = {
          {"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", options_.mig_config_map},
            {"namespace", options_.mig_config_namespace},
            {"labels", {{"app.kubernetes.io/managed-by", "gpuaas"}}}}},
          {"data", {{"config.yaml", *doc}}}};
      written = client_->Send("POST", base, fresh.dump());
    }
    if (written.ok()) {
      ++writes_;
      last = absl::OkStatus();
      break;
    }
    last = written.status();
    if (!absl::IsAborted(last)) return last;  // 409 (changed meanwhile, or created): again
  }
  if (!last.ok()) return last;
  {
    // Known before the label changes, so that the manager's first reaction is recognised.
    std::lock_guard<std::mutex> lock(mu_);
    NodeMig& m = mig_[node];
    m.config = config;
    m.asked = std::chrono::steady_clock::now();
    m.progressed = false;
  }
  const nlohmann::json patch = {{"metadata", {{"labels", {{"nvidia.com/mig.config", config}}}}}};
  absl::StatusOr<std::string> patched =
      client_->Send("PATCH", "/api/v1/nodes/" + node, patch.dump(), "application/merge-patch+json");
  if (!patched.ok()) return patched.status();
  ++writes_;
  log::Info("cluster {}: node {}: MIG config {} asked of the MIG manager", name_, node, config);
  return config;
}

ClusterDriver::MigState KubernetesDriver::NodeMigState(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  const std::string config = it == nodes_.end() ? "" : Label(it->second, "nvidia.com/mig.config");
  const std::string state = it == nodes_.end() ? "" : Label(it->second, "nvidia.com/mig.config.state");
  auto m = mig_.find(node);
  if (m == mig_.end()) {
    // Nothing asked by this gpuaas: what the labels say.
    if (state == "failed") return {"failed", fmt::format("the MIG manager failed to apply mig.config \"{}\"", config)};
    return {state.empty() || state == "success" ? "success" : "pending", ""};
  }
  NodeMig& n = m->second;
  if (!n.error.empty()) return {"failed", n.error};
  if (n.dirty || n.config.empty()) return {"pending", ""};
  // Right after the label changed, its state still tells of the previous config.
  const bool ours = config == n.config && n.progressed;
  if (ours && state == "failed") {
    n.failed = true;  // the next ApplyMigLayout asks again, under a new name
    return {"failed", fmt::format("the MIG manager failed to apply {} on node {} (nvidia.com/mig.config.state=failed)",
                                  n.config, node)};
  }
  if ((ours || config == n.config) && state == "success" && (ours || Totals(n.want) == Totals(it->second))) {
    return {"success", ""};
  }
  if (std::chrono::steady_clock::now() - n.asked > options_.mig_pending_timeout) {
    n.failed = true;
    return {"failed", fmt::format("the MIG manager has not applied {} on node {} after {} s (state \"{}\"; GPU clients that "
                                  "do not stop keep it pending)",
                                  n.config, node,
                                  std::chrono::duration_cast<std::chrono::seconds>(options_.mig_pending_timeout).count(),
                                  state)};
  }
  return {"pending", ""};
}

absl::Status KubernetesDriver::EnforceProjectQuota(const std::string& project,
                                                   const std::map<std::string, int64_t>& devices) {
  // Every GPU resource a pod could ask for: what is not the project's is 0.
  nlohmann::json hard = nlohmann::json::object();
  hard["requests.nvidia.com/gpu"] = "0";
  for (const catalog::GpuModel& m : catalog::AllModels()) {
    for (const catalog::MigProfile& p : m.profiles) hard["requests." + catalog::ResourceName(p.name)] = "0";
  }
  for (const auto& [resource, n] : devices) hard["requests." + resource] = std::to_string(n);

  const std::string ns_path = "/api/v1/namespaces/" + project;
  absl::StatusOr<std::string> ns = client_->Get(ns_path);
  if (absl::IsNotFound(ns.status())) {
    if (devices.empty()) return absl::OkStatus();  // nothing held, nothing to fence
    const nlohmann::json fresh = {{"apiVersion", "v1"},
                                  {"kind", "Namespace"},
                                  {"metadata",
                                   {{"name", project},
                                    {"labels", {{"gpuaas.io/project", project}, {"app.kubernetes.io/managed-by", "gpuaas"}}}}}};
    absl::StatusOr<std::string> made = client_->Send("POST", "/api/v1/namespaces", fresh.dump());
    if (!made.ok() && !absl::IsAborted(made.status())) return made.status();  // 409: made meanwhile
    if (made.ok()) ++writes_;
  } else if (!ns.ok()) {
    return ns.status();
  }
  const std::string quotas = ns_path + "/resourcequotas";
  for (int attempt = 0; attempt < 4; ++attempt) {
    absl::StatusOr<std::string> got = client_->Get(quotas + "/gpuaas-pools");
    absl::StatusOr<std::string> written;
    if (absl::IsNotFound(got.status())) {
      const nlohmann::json fresh = {
          {"apiVersion", "v1"},
          {"kind", "ResourceQuota"},
          {"metadata",
           {{"name", "gpuaas-pools"}, {"namespace", project}, {"labels", {{"app.kubernetes.io/managed-by", "gpuaas"}}}}},
          {"spec", {{"hard", hard}}}};
      written = client_->Send("POST", quotas, fresh.dump());
    } else if (!got.ok()) {
      return got.status();
    } else {
      nlohmann::json q = nlohmann::json::parse(*got, nullptr, false);
      if (!q.is_object()) return absl::UnavailableError("the ResourceQuota is not JSON");
      if (q.contains("spec") && q["spec"].is_object() && q["spec"].value("hard", nlohmann::json()) == hard) {
        return absl::OkStatus();  // as wanted already
      }
      q["spec"]["hard"] = hard;
      written = client_->Send("PUT", quotas + "/gpuaas-pools", q.dump());
    }
    if (written.ok()) {
      ++writes_;
      log::Info("cluster {}: project {} may request {}", name_, project, nlohmann::json(devices).dump());
      return absl::OkStatus();
    }
    if (!absl::IsAborted(written.status())) return written.status();  // 409: read again
  }
  return absl::AbortedError(fmt::format("cluster {}: the ResourceQuota of {} kept changing", name_, project));
}

std::map<std::string, std::string> KubernetesDriver::refused_nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

namespace {

constexpr std::string_view kDevicePluginConfigLabel = "nvidia.com/device-plugin.config";
constexpr std::string_view kTimeSlicingPrefix = "gpuaas-time-slicing-";

}  // namespace

absl::Status KubernetesDriver::EnsureTimeSlicingConfigs(const std::set<int64_t>& slices) {
  if (slices.empty()) return absl::OkStatus();
  const std::string base = fmt::format("/api/v1/namespaces/{}/configmaps", options_.mig_config_namespace);
  absl::Status last;
  for (int attempt = 0; attempt < 4; ++attempt) {  // conflicts: read again and retry
    absl::StatusOr<std::string> got = client_->Get(base + "/" + options_.device_plugin_config_map);
    nlohmann::json cm;
    if (got.ok()) {
      cm = nlohmann::json::parse(*got, nullptr, false);
      if (!cm.is_object()) return absl::UnavailableError("the device plugin's ConfigMap is not JSON");
    } else if (!absl::IsNotFound(got.status())) {
      return got.status();
    }
    bool missing = !got.ok();
    if (!cm.contains("data") || !cm["data"].is_object()) cm["data"] = nlohmann::json::object();
    for (int64_t n : slices) {
      const std::string key = fmt::format("{}{}", kTimeSlicingPrefix, n);
      if (cm["data"].contains(key)) continue;
      cm["data"][key] = TimeSlicingConfig(n);
      missing = true;
    }
    if (!missing) return absl::OkStatus();  // every config there already
    absl::StatusOr<std::string> written;
    if (got.ok()) {
      written = client_->Send("PUT", base + "/" + options_.device_plugin_config_map, cm.dump());
    } else {
      cm["apiVersion"] = "v1";
      cm["kind"] = "ConfigMap";
      cm["metadata"] = {{"name", options_.device_plugin_config_map}, {"namespace", options_.mig_config_namespace}};
      written = client_->Send("POST", base, cm.dump());
    }
    if (written.ok()) {
      ++writes_;
      return absl::OkStatus();
    }
    last = written.status();
    if (!absl::IsAborted(last)) return last;
  }
  return last;
}

absl::Status KubernetesDriver::EnforceNodeOwners(const std::map<std::string, NodeOwner>& owners) {
  using nlohmann::json;
  const std::string key(model::kNodePoolKey);
  const std::string plugin(kDevicePluginConfigLabel);
  std::vector<std::pair<std::string, json>> patches;  // node -> merge patch
  std::set<int64_t> slices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, node] : nodes_) {
      auto o = owners.find(name);
      const std::string want = o == owners.end() ? "" : o->second.pool;
      const int64_t n = o == owners.end() ? 0 : o->second.time_slices;
      const std::string have = Label(node, key);
      // The plugin config gpuaas set, or none; another one (the operator's) is left alone.
      const std::string config = Label(node, plugin);
      const bool ours = config.starts_with(kTimeSlicingPrefix);
      const std::string want_config = n > 1 ? fmt::format("{}{}", kTimeSlicingPrefix, n) : (ours ? "" : config);
      if (n > 1) slices.insert(n);
      const NodeMeta& meta = node_meta_[name];
      json taints = json::parse(meta.taints, nullptr, false);
      if (!taints.is_array()) taints = json::array();
      json keep = json::array();
      json mine_now = json::array();
      for (const json& t : taints) (t.is_object() && t.value("key", "") == key ? mine_now : keep).push_back(t);
      const json mine = {{"key", key}, {"value", want}, {"effect", "NoSchedule"}};
      const bool taint_right = want.empty() ? mine_now.empty() : (mine_now.size() == 1 && mine_now[0] == mine);
      if (have == want && taint_right && config == want_config) continue;
      if (!want.empty()) keep.push_back(mine);
      json labels = {{key, want.empty() ? json() : json(want)}};
      if (config != want_config) labels[plugin] = want_config.empty() ? json() : json(want_config);
      json patch = {{"metadata", {{"resourceVersion", meta.resource_version}, {"labels", labels}}},
                    {"spec", {{"taints", keep}}}};
      patches.emplace_back(name, std::move(patch));
    }
  }
  // The configs first: a node labelled for one the plugin cannot find would lose its devices.
  if (absl::Status s = EnsureTimeSlicingConfigs(slices); !s.ok()) {
    log::Warn("cluster {}: time-slicing configs not written: {}", name_, s.ToString());
    return s;
  }
  absl::Status first;
  for (const auto& [name, patch] : patches) {
    absl::StatusOr<std::string> done =
        client_->Send("PATCH", "/api/v1/nodes/" + name, patch.dump(), "application/merge-patch+json");
    if (done.ok()) {
      ++writes_;
      continue;
    }
    log::Warn("cluster {}: node {} not fenced for its pool: {}", name_, name, done.status().ToString());
    if (first.ok()) first = done.status();
  }
  return first;
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
