#include "cluster/kubernetes/driver.h"

#include "cluster/kubernetes/nodes.h"
#include "common/log.h"
#include "common/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

std::string NameOf(const std::string& object) {
  const nlohmann::json o = nlohmann::json::parse(object, nullptr, false);
  if (!o.is_object() || !o.contains("metadata") || !o["metadata"].is_object()) return "";
  const nlohmann::json& m = o["metadata"];
  return m.contains("name") && m["name"].is_string() ? m["name"].get<std::string>() : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<KubernetesDriver>> KubernetesDriver::Make(std::string name, const ClientConfig& config,
                                                                         DriverOptions options) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Make(config, options.timeouts);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<Client>> pods_client = Client::Make(config, options.timeouts);
  if (!pods_client.ok()) return pods_client.status();
  return std::unique_ptr<KubernetesDriver>(
      new KubernetesDriver(std::move(name), std::move(options), std::move(*client), std::move(*pods_client)));
}

KubernetesDriver::KubernetesDriver(std::string name, DriverOptions options, std::unique_ptr<Client> client,
                                   std::unique_ptr<Client> pods_client)
    : name_(std::move(name)), options_(std::move(options)), client_(std::move(client)),
      pods_client_(std::move(pods_client)) {
  nodes_reflector_ = std::make_unique<Reflector>(
      *client_, "/api/v1/nodes", [this](const ListResult& l) { ReplaceNodes(l); },
      [this](const WatchEvent& e) { ApplyNode(e); }, [this] { Changed(); }, options_.backoff);
  pods_reflector_ = std::make_unique<Reflector>(
      *pods_client_, "/api/v1/pods", [this](const ListResult& l) { ReplacePods(l); },
      [this](const WatchEvent& e) { ApplyPod(e); }, [this] { Changed(); }, options_.backoff);
}

KubernetesDriver::~KubernetesDriver() { Stop(); }

void KubernetesDriver::Start() {
  nodes_reflector_->Start();
  pods_reflector_->Start();
}

void KubernetesDriver::Stop() {
  nodes_reflector_->Stop();
  pods_reflector_->Stop();
}

bool KubernetesDriver::PutPod(const std::string& json, bool deleted) {
  absl::StatusOr<PodGpus> pod = ReadPod(json);
  if (!pod.ok()) return false;
  auto it = pods_.find(pod->key);
  if (deleted || !pod->active || pod->devices.empty()) {
    if (it == pods_.end()) return false;
    pods_.erase(it);
    return true;
  }
  if (it != pods_.end() && it->second == *pod) return false;
  pods_[pod->key] = std::move(*pod);
  return true;
}

void KubernetesDriver::ReplacePods(const ListResult& list) {
  std::lock_guard<std::mutex> lock(mu_);
  pods_.clear();
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
    bool changed = nodes_.erase(node) > 0;
    if (absl::IsNotFound(read.status())) {
      refused_.erase(node);
      return changed;
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
  auto it = nodes_.find(read->name);
  if (it != nodes_.end() && it->second == *read) return false;
  nodes_[read->name] = std::move(*read);
  return true;
}

void KubernetesDriver::ReplaceNodes(const ListResult& list) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_.clear();
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
      changed = nodes_.erase(node) > 0;
    } else {
      changed = PutNode(event.object);
    }
  }
  if (changed) Changed();
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
  ObservedCluster c;
  c.name = name_;
  c.display_name = options_.display_name.empty() ? name_ : options_.display_name;
  c.region = options_.region;
  c.driver = "kubernetes";
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::map<std::string, int64_t>> held;  // node -> resource -> devices
  for (const auto& [key, pod] : pods_) {
    for (const auto& [resource, n] : pod.devices) held[pod.node][resource] += n;
  }
  c.nodes.reserve(nodes_.size());
  for (const auto& [n, node] : nodes_) {
    c.nodes.push_back(node);
    if (auto h = held.find(n); h != held.end()) MarkInUse(h->second, c.nodes.back());
  }
  return c;
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
  (void)mig_enabled;
  (void)instances;
  return absl::UnimplementedError(fmt::format(
      "cluster {}: MIG layouts through the GPU Operator's MIG manager are not supported yet (node {}, GPU {})", name_,
      node, gpu_uuid));
}

ClusterDriver::MigState KubernetesDriver::NodeMigState(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return {"success", ""};
  auto state = it->second.labels.find("nvidia.com/mig.config.state");
  if (state == it->second.labels.end() || state->second.empty()) return {"success", ""};
  if (state->second == "failed") {
    return {"failed", fmt::format("the MIG manager failed to apply mig.config \"{}\"",
                                  it->second.labels.count("nvidia.com/mig.config") ? it->second.labels.at("nvidia.com/mig.config") : "")};
  }
  return {state->second == "success" ? "success" : "pending", ""};
}

std::map<std::string, std::string> KubernetesDriver::refused_nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

}  // namespace gpuaas::cluster::kubernetes
