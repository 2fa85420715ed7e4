#include "cluster/kubernetes/mig_manager.h"

#include <algorithm>
#include <utility>

#include "catalog/catalog.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

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

}  // namespace

MigManager::MigManager(std::string cluster, Client& client, MigManagerOptions options,
                       NodeLookup lookup, std::atomic<int64_t>& writes)
    : cluster_(std::move(cluster)),
      client_(client),
      options_(std::move(options)),
      lookup_(std::move(lookup)),
      writes_(writes) {}

MigManager::~MigManager() { Stop(); }

void MigManager::Start() {
  writer_ = std::thread([this] { Run(); });
}

void MigManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void MigManager::ObserveNode(const ObservedNode& node, const NodeMeta& meta) {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = nodes_.find(node.name);
  if (m == nodes_.end() || m->second.config.empty() ||
      NodeLabel(node, kMigConfigLabel) != m->second.config) {
    return;
  }
  // A `failed` or `success` counts as the answer to gpuaas's config only after it was seen
  // working.
  NodeMig& mig = m->second;
  const std::string state = NodeLabel(node, kMigConfigStateLabel);
  if (state == "pending" || state == "rebooting") mig.progressed = true;
  if (state == "success" && (mig.progressed || Totals(mig.want) == Totals(node))) {
    mig.applied = mig.want;
    mig.applied_placements = mig.placements;
  }
  // Done with the node, either way: one gpuaas cordoned for the change is given back.
  if ((state == "success" || state == "failed") && mig.progressed && meta.cordoned_for_mig &&
      !mig.dirty) {
    mig.uncordon = true;
    cv_.notify_all();
  }
}

absl::Status MigManager::RefuseWhilePodsRun(const std::string& node, const NodeMeta& meta,
                                            const std::string& pod) {
  // The MIG manager would stop them: cordon the node so that no new ones start, and wait.
  if (!meta.unschedulable) {
    const nlohmann::json patch = {{"metadata",
                                   {{"resourceVersion", meta.resource_version},
                                    {"annotations", {{std::string(kCordonAnnotation), "true"}}}}},
                                  {"spec", {{"unschedulable", true}}}};
    absl::StatusOr<std::string> done = client_.Send("PATCH", "/api/v1/nodes/" + node, patch.dump(),
                                                    "application/merge-patch+json");
    if (!done.ok()) return done.status();
    ++writes_;
    log::Info("cluster {}: node {} cordoned until its GPU pods finish, for a MIG change", cluster_,
              node);
  }
  return absl::FailedPreconditionError(
      fmt::format("node {} runs GPU pods ({} among them), which the MIG manager would stop: the "
                  "node is cordoned and the MIG change waits until they finish",
                  node, pod));
}

absl::Status MigManager::Ask(const std::string& node, const std::vector<ObservedGpu>& gpus,
                             const std::string& gpu_uuid, bool mig_enabled,
                             const std::vector<ObservedMigInstance>& instances) {
  const auto gpu = std::find_if(gpus.begin(), gpus.end(), [&](const ObservedGpu& g) {
    return EqualsIgnoreCase(g.uuid, gpu_uuid);
  });
  if (gpu == gpus.end()) {
    return absl::NotFoundError(fmt::format("node {} has no GPU {}", node, gpu_uuid));
  }
  std::lock_guard<std::mutex> lock(mu_);
  NodeMig& m = nodes_[node];
  if (m.want.empty()) {
    // The rest of the node stays as it is.
    for (const ObservedGpu& g : gpus) m.want[g.index] = {g.mig_enabled, Counts(g.mig_instances)};
  }
  const GpuMigSpec spec{mig_enabled,
                        mig_enabled ? Counts(instances) : std::map<std::string, int64_t>{}};
  const std::vector<ObservedMigInstance> placed =
      mig_enabled ? instances : std::vector<ObservedMigInstance>{};
  const bool asked_already = m.want[gpu->index] == spec && m.placements[gpu->index] == placed &&
                             !m.failed && m.error.empty() && (m.dirty || !m.config.empty());
  m.want[gpu->index] = spec;
  m.placements[gpu->index] = placed;
  if (asked_already) return absl::OkStatus();  // idempotent: the same layout is not asked twice
  m.dirty = true;
  m.failed = false;
  m.error.clear();
  cv_.notify_all();
  return absl::OkStatus();
}

ClusterDriver::MigState MigManager::State(const std::string& node, const ObservedNode* observed) {
  const std::string config = observed == nullptr ? "" : NodeLabel(*observed, kMigConfigLabel);
  const std::string state = observed == nullptr ? "" : NodeLabel(*observed, kMigConfigStateLabel);
  std::lock_guard<std::mutex> lock(mu_);
  auto m = nodes_.find(node);
  if (m == nodes_.end()) {
    // Nothing asked by this gpuaas: what the labels say.
    if (state == "failed") {
      return {"failed", fmt::format("the MIG manager failed to apply mig.config \"{}\"", config)};
    }
    return {state.empty() || state == "success" ? "success" : "pending", ""};
  }
  NodeMig& n = m->second;
  if (!n.error.empty()) return {"failed", n.error};
  if (n.dirty || n.config.empty()) return {"pending", ""};
  // Right after the label changed, its state still tells of the previous config.
  const bool ours = config == n.config && n.progressed;
  if (ours && state == "failed") {
    n.failed = true;  // the next Ask asks again, under a new name
    return {"failed", fmt::format("the MIG manager failed to apply {} on node {} "
                                  "(nvidia.com/mig.config.state=failed)",
                                  n.config, node)};
  }
  if ((ours || config == n.config) && state == "success" &&
      (ours || Totals(n.want) == Totals(*observed))) {
    return {"success", ""};
  }
  if (std::chrono::steady_clock::now() - n.asked > options_.pending_timeout) {
    n.failed = true;
    return {"failed",
            fmt::format(
                "the MIG manager has not applied {} on node {} after {} s (state \"{}\"; "
                "GPU clients that do not stop keep it pending)",
                n.config, node,
                std::chrono::duration_cast<std::chrono::seconds>(options_.pending_timeout).count(),
                state)};
  }
  return {"pending", ""};
}

bool MigManager::ShowApplied(ObservedNode& node) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto m = nodes_.find(node.name);
  if (m == nodes_.end() || m->second.applied.empty() || Totals(m->second.applied) != Totals(node)) {
    return false;
  }
  // Labels count MIG devices; while they count what the MIG manager last applied for gpuaas,
  // the placements are the ones asked for.
  const NodeMig& mig = m->second;
  const catalog::GpuModel* model = catalog::ModelFromProduct(node.gpu_product).value_or(nullptr);
  for (ObservedGpu& g : node.gpus) {
    auto want = mig.applied.find(g.index);
    if (want == mig.applied.end()) continue;
    g.mig_enabled = want->second.enabled;
    g.mig_instances.clear();
    auto placed = mig.applied_placements.find(g.index);
    if (placed == mig.applied_placements.end()) continue;
    for (const ObservedMigInstance& mi : placed->second) {
      ObservedMigInstance inst = mi;
      const catalog::MigProfile* p = model ? catalog::FindProfile(*model, mi.profile) : nullptr;
      inst.size = p ? p->memory_slices : mi.size;
      inst.uuid = "MIG-" + StableUuid(fmt::format("{}/{}/{}", g.uuid, mi.profile, mi.start));
      inst.in_use = false;
      g.mig_instances.push_back(inst);
    }
  }
  return true;
}

void MigManager::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] {
      return stopping_ || std::any_of(nodes_.begin(), nodes_.end(), [](const auto& kv) {
               return kv.second.dirty || kv.second.uncordon;
             });
    });
    if (stopping_) return;
    // Let the other GPUs of the same change arrive: one config per node.
    cv_.wait_for(lock, options_.write_delay, [&] { return stopping_; });
    if (stopping_) return;
    std::vector<std::pair<std::string, std::map<int, GpuMigSpec>>> todo;
    std::vector<std::string> uncordon;
    for (auto& [node, m] : nodes_) {
      if (m.dirty) todo.push_back({node, m.want});
      m.dirty = false;
      if (m.uncordon) uncordon.push_back(node);
      m.uncordon = false;
    }
    lock.unlock();
    for (const std::string& node : uncordon) {
      // At the version seen: a node changed meanwhile is judged again from its next event.
      const std::optional<NodeFacts> facts = lookup_(node);
      const std::string rv = facts ? facts->resource_version : "";
      const nlohmann::json patch = {
          {"metadata",
           {{"resourceVersion", rv}, {"annotations", {{std::string(kCordonAnnotation), nullptr}}}}},
          {"spec", {{"unschedulable", nullptr}}}};
      absl::StatusOr<std::string> done = client_.Send("PATCH", "/api/v1/nodes/" + node,
                                                      patch.dump(), "application/merge-patch+json");
      if (done.ok()) {
        ++writes_;
        log::Info("cluster {}: node {} uncordoned, its MIG change done", cluster_, node);
      } else {
        log::Warn("cluster {}: node {} not uncordoned yet: {}", cluster_, node,
                  done.status().ToString());
      }
    }
    for (const auto& [node, want] : todo) {
      absl::StatusOr<std::string> config = Write(node, want);
      std::lock_guard<std::mutex> relock(mu_);
      NodeMig& m = nodes_[node];
      if (config.ok()) {
        m.error.clear();
      } else {
        m.error = config.status().ToString();
        log::Warn("cluster {}: node {}: MIG config not written: {}", cluster_, node, m.error);
      }
    }
    lock.lock();
  }
}

absl::StatusOr<std::string> MigManager::Write(const std::string& node,
                                              const std::map<int, GpuMigSpec>& want) {
  const std::string prefix = fmt::format("gpuaas-{}-", node);
  const std::optional<NodeFacts> facts = lookup_(node);
  const std::string current = facts ? facts->mig_config : "";
  // A new name every time (seconds since the epoch), so that the label changes and the MIG
  // manager runs even where the last attempt with the same layout failed.
  const int64_t serial = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::string config = prefix + std::to_string(serial);
  if (config == current) config = prefix + std::to_string(serial + 1);

  const std::string base =
      fmt::format("/api/v1/namespaces/{}/configmaps", options_.config_namespace);
  absl::Status last;
  for (int attempt = 0; attempt < 4; ++attempt) {  // conflicts: read again and retry
    absl::StatusOr<std::string> got = client_.Get(base + "/" + options_.config_map);
    nlohmann::json cm;
    std::string existing;
    if (got.ok()) {
      cm = nlohmann::json::parse(*got, nullptr, false);
      if (!cm.is_object()) return absl::UnavailableError("the MIG config ConfigMap is not JSON");
      if (cm.contains("data") && cm["data"].is_object()) {
        existing = cm["data"].value("config.yaml", "");
      }
    } else if (!absl::IsNotFound(got.status())) {
      return got.status();
    }
    absl::StatusOr<std::string> doc = MergeMigConfig(existing, config, prefix, want);
    if (!doc.ok()) return doc.status();
    absl::StatusOr<std::string> written;
    if (got.ok()) {
      cm["data"]["config.yaml"] = *doc;  // at the resourceVersion read: a conflict is a 409
      written = client_.Send("PUT", base + "/" + options_.config_map, cm.dump());
    } else {
      const nlohmann::json fresh = {{"apiVersion", "v1"},
                                    {"kind", "ConfigMap"},
                                    {"metadata",
                                     {{"name", options_.config_map},
                                      {"namespace", options_.config_namespace},
                                      {"labels", {{"app.kubernetes.io/managed-by", "gpuaas"}}}}},
                                    {"data", {{"config.yaml", *doc}}}};
      written = client_.Send("POST", base, fresh.dump());
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
    NodeMig& m = nodes_[node];
    m.config = config;
    m.asked = std::chrono::steady_clock::now();
    m.progressed = false;
  }
  const nlohmann::json patch = {
      {"metadata", {{"labels", {{std::string(kMigConfigLabel), config}}}}}};
  absl::StatusOr<std::string> patched =
      client_.Send("PATCH", "/api/v1/nodes/" + node, patch.dump(), "application/merge-patch+json");
  if (!patched.ok()) return patched.status();
  ++writes_;
  log::Info("cluster {}: node {}: MIG config {} asked of the MIG manager", cluster_, node, config);
  return config;
}

}  // namespace gpuaas::cluster::kubernetes
