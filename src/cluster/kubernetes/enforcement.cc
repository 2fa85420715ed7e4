#include "cluster/kubernetes/enforcement.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "catalog/catalog.h"
#include "cluster/kubernetes/mig_config.h"
#include "cluster/kubernetes/resource_slices.h"
#include "common/log.h"
#include "fmt/format.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

constexpr std::string_view kDevicePluginConfigLabel = "nvidia.com/device-plugin.config";
constexpr std::string_view kTimeSlicingPrefix = "gpuaas-time-slicing-";

}  // namespace

DeviceTaintRules ProjectDeviceTaintRules(const std::string& project,
                                         const std::set<std::string>& uuids,
                                         const std::map<std::string, std::string>& pool_devices) {
  DeviceTaintRules out;
  for (const auto& [name, uuid] : pool_devices) {
    if (!uuids.contains(uuid)) continue;
    const size_t slash = name.find('/');
    std::string pool = name.substr(0, slash), device = name.substr(slash + 1);
    std::string rule = DeviceTaintRuleName(project, pool, device);
    out.emplace(std::move(rule), std::pair{std::move(pool), std::move(device)});
  }
  return out;
}

void PlanNodeOwner(const ObservedNode& node, const NodeMeta& meta,
                   const std::map<std::string, ClusterDriver::NodeOwner>& owners,
                   NodeOwnerPlan& plan) {
  using nlohmann::json;
  const std::string key(model::kNodePoolKey);
  const std::string plugin(kDevicePluginConfigLabel);
  auto o = owners.find(node.name);
  const std::string want = o == owners.end() ? "" : o->second.pool;
  const int64_t n = o == owners.end() ? 0 : o->second.time_slices;
  const std::string have = NodeLabel(node, key);
  // The plugin config gpuaas set, or none; another one (the operator's) is left alone.
  const std::string config = NodeLabel(node, plugin);
  const bool ours = config.starts_with(kTimeSlicingPrefix);
  const std::string want_config =
      n > 1 ? fmt::format("{}{}", kTimeSlicingPrefix, n) : (ours ? "" : config);
  if (n > 1) plan.time_slices.insert(n);
  json taints = json::parse(meta.taints, nullptr, false);
  if (!taints.is_array()) taints = json::array();
  json keep = json::array();
  json mine_now = json::array();
  for (const json& t : taints) {
    (t.is_object() && t.value("key", "") == key ? mine_now : keep).push_back(t);
  }
  const json mine = {{"key", key}, {"value", want}, {"effect", "NoSchedule"}};
  const bool taint_right =
      want.empty() ? mine_now.empty() : (mine_now.size() == 1 && mine_now[0] == mine);
  if (have == want && taint_right && config == want_config) return;
  if (!want.empty()) keep.push_back(mine);
  json labels = {{key, want.empty() ? json() : json(want)}};
  if (config != want_config) labels[plugin] = want_config.empty() ? json() : json(want_config);
  const json patch = {
      {"metadata", {{"resourceVersion", meta.resource_version}, {"labels", labels}}},
      {"spec", {{"taints", keep}}}};
  plan.patches.emplace_back(node.name, patch.dump());
}

Enforcer::Enforcer(std::string cluster, Client& client, std::string config_namespace,
                   std::string device_plugin_config_map, std::atomic<int64_t>& writes)
    : cluster_(std::move(cluster)),
      client_(client),
      config_namespace_(std::move(config_namespace)),
      device_plugin_config_map_(std::move(device_plugin_config_map)),
      writes_(writes) {}

absl::Status Enforcer::ProjectQuota(const std::string& project,
                                    const std::map<std::string, int64_t>& devices) {
  // Every GPU resource a pod could ask for: what is not the project's is 0.
  nlohmann::json hard = nlohmann::json::object();
  hard["requests.nvidia.com/gpu"] = "0";
  for (const catalog::GpuModel& m : catalog::AllModels()) {
    for (const catalog::MigProfile& p : m.profiles) {
      hard["requests." + catalog::ResourceName(p.name)] = "0";
    }
  }
  for (const auto& [resource, n] : devices) hard["requests." + resource] = std::to_string(n);

  const std::string ns_path = "/api/v1/namespaces/" + project;
  absl::StatusOr<std::string> ns = client_.Get(ns_path);
  if (absl::IsNotFound(ns.status())) {
    if (devices.empty()) return absl::OkStatus();  // nothing held, nothing to fence
    const nlohmann::json fresh = {
        {"apiVersion", "v1"},
        {"kind", "Namespace"},
        {"metadata",
         {{"name", project},
          {"labels",
           {{"gpuaas.io/project", project}, {"app.kubernetes.io/managed-by", "gpuaas"}}}}}};
    absl::StatusOr<std::string> made = client_.Send("POST", "/api/v1/namespaces", fresh.dump());
    // 409: made meanwhile
    if (!made.ok() && !absl::IsAborted(made.status())) return made.status();
    if (made.ok()) ++writes_;
  } else if (!ns.ok()) {
    return ns.status();
  }
  const std::string quotas = ns_path + "/resourcequotas";
  for (int attempt = 0; attempt < 4; ++attempt) {
    absl::StatusOr<std::string> got = client_.Get(quotas + "/gpuaas-pools");
    absl::StatusOr<std::string> written;
    if (absl::IsNotFound(got.status())) {
      const nlohmann::json fresh = {{"apiVersion", "v1"},
                                    {"kind", "ResourceQuota"},
                                    {"metadata",
                                     {{"name", "gpuaas-pools"},
                                      {"namespace", project},
                                      {"labels", {{"app.kubernetes.io/managed-by", "gpuaas"}}}}},
                                    {"spec", {{"hard", hard}}}};
      written = client_.Send("POST", quotas, fresh.dump());
    } else if (!got.ok()) {
      return got.status();
    } else {
      nlohmann::json q = nlohmann::json::parse(*got, nullptr, false);
      if (!q.is_object()) return absl::UnavailableError("the ResourceQuota is not JSON");
      if (q.contains("spec") && q["spec"].is_object() &&
          q["spec"].value("hard", nlohmann::json()) == hard) {
        return absl::OkStatus();  // as wanted already
      }
      q["spec"]["hard"] = hard;
      written = client_.Send("PUT", quotas + "/gpuaas-pools", q.dump());
    }
    if (written.ok()) {
      ++writes_;
      log::Info("cluster {}: project {} may request {}", cluster_, project,
                nlohmann::json(devices).dump());
      return absl::OkStatus();
    }
    if (!absl::IsAborted(written.status())) return written.status();  // 409: read again
  }
  return absl::AbortedError(
      fmt::format("cluster {}: the ResourceQuota of {} kept changing", cluster_, project));
}

absl::Status Enforcer::ProjectDeviceTaints(const std::string& project,
                                           const DeviceTaintRules& want) {
  absl::StatusOr<std::string> listed = client_.Get(std::string(kDeviceTaintRules));
  if (absl::IsNotFound(listed.status())) {
    if (!said_no_device_taints_.exchange(true)) {
      log::Warn(
          "cluster {}: DeviceTaintRules are not served (the DRADeviceTaints feature is "
          "off): pools' DRA devices are not fenced by device taints",
          cluster_);
    }
    return absl::OkStatus();
  }
  if (!listed.ok()) return listed.status();
  std::set<std::string> have;
  const nlohmann::json list = nlohmann::json::parse(*listed, nullptr, false);
  if (list.is_object() && list.contains("items") && list["items"].is_array()) {
    for (const nlohmann::json& item : list["items"]) {
      const nlohmann::json meta = item.is_object()
                                      ? item.value("metadata", nlohmann::json::object())
                                      : nlohmann::json::object();
      const nlohmann::json labels = meta.is_object()
                                        ? meta.value("labels", nlohmann::json::object())
                                        : nlohmann::json::object();
      if (labels.is_object() && labels.value(std::string(kProjectTaintKey), "") == project &&
          meta["name"].is_string()) {
        have.insert(meta["name"].get<std::string>());
      }
    }
  }
  for (const auto& [rule, where] : want) {
    if (have.contains(rule)) continue;
    const auto& [pool, device] = where;
    absl::StatusOr<std::string> made = client_.Send("POST", std::string(kDeviceTaintRules),
                                                    DeviceTaintRule(project, pool, device));
    // 409: made meanwhile
    if (!made.ok() && !absl::IsAborted(made.status())) return made.status();
    if (made.ok()) ++writes_;
  }
  for (const std::string& rule : have) {
    if (want.contains(rule)) continue;
    absl::StatusOr<std::string> gone =
        client_.Send("DELETE", std::string(kDeviceTaintRules) + "/" + rule, "");
    if (!gone.ok() && !absl::IsNotFound(gone.status())) return gone.status();
    if (gone.ok()) ++writes_;
  }
  const bool same = want.size() == have.size() &&
                    std::all_of(have.begin(), have.end(),
                                [&](const std::string& rule) { return want.contains(rule); });
  if (!same) {
    log::Info("cluster {}: {} device(s) tainted for project {}", cluster_, want.size(), project);
  }
  return absl::OkStatus();
}

absl::Status Enforcer::EnsureTimeSlicingConfigs(const std::set<int64_t>& slices) {
  if (slices.empty()) return absl::OkStatus();
  const std::string base = fmt::format("/api/v1/namespaces/{}/configmaps", config_namespace_);
  absl::Status last;
  for (int attempt = 0; attempt < 4; ++attempt) {  // conflicts: read again and retry
    absl::StatusOr<std::string> got = client_.Get(base + "/" + device_plugin_config_map_);
    nlohmann::json cm;
    if (got.ok()) {
      cm = nlohmann::json::parse(*got, nullptr, false);
      if (!cm.is_object()) {
        return absl::UnavailableError("the device plugin's ConfigMap is not JSON");
      }
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
      written = client_.Send("PUT", base + "/" + device_plugin_config_map_, cm.dump());
    } else {
      cm["apiVersion"] = "v1";
      cm["kind"] = "ConfigMap";
      cm["metadata"] = {{"name", device_plugin_config_map_}, {"namespace", config_namespace_}};
      written = client_.Send("POST", base, cm.dump());
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

absl::Status Enforcer::NodeOwners(const NodeOwnerPlan& plan) {
  // The configs first: a node labelled for one the plugin cannot find would lose its devices.
  if (absl::Status s = EnsureTimeSlicingConfigs(plan.time_slices); !s.ok()) {
    log::Warn("cluster {}: time-slicing configs not written: {}", cluster_, s.ToString());
    return s;
  }
  absl::Status first;
  for (const auto& [name, patch] : plan.patches) {
    absl::StatusOr<std::string> done =
        client_.Send("PATCH", "/api/v1/nodes/" + name, patch, "application/merge-patch+json");
    if (done.ok()) {
      ++writes_;
      continue;
    }
    log::Warn("cluster {}: node {} not fenced for its pool: {}", cluster_, name,
              done.status().ToString());
    if (first.ok()) first = done.status();
  }
  return first;
}

namespace {

using json = nlohmann::json;

// The API path of pod "namespace/name"; empty for a key that is not one.
std::string PodPath(const std::string& pod) {
  const size_t slash = pod.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == pod.size()) return "";
  return fmt::format("/api/v1/namespaces/{}/pods/{}", pod.substr(0, slash), pod.substr(slash + 1));
}

// A write one pod needs: a method, a body and its content type.
struct PodWrite {
  std::string method;
  std::string body;
  std::string content_type = "application/json";
};

// For each pod ("namespace/name") still there (a 404 skips it), `want` reads its metadata and
// says the write it needs, if any; each write is made, counted and logged (`done`: what it did).
// The first error, every pod tried.
absl::Status WritePods(Client& client, const std::string& cluster, std::atomic<int64_t>& writes,
                       const std::vector<std::string>& pods, std::string_view failed, std::string_view done,
                       const std::function<std::optional<PodWrite>(const json& meta)>& want) {
  absl::Status first;
  for (const std::string& pod : pods) {
    const std::string path = PodPath(pod);
    if (path.empty()) continue;
    absl::StatusOr<std::string> have = client.Get(path);
    absl::Status s = have.status();
    if (have.ok()) {
      const json p = json::parse(*have, nullptr, false);
      const json meta = p.is_object() && p.contains("metadata") && p["metadata"].is_object() ? p["metadata"] : json::object();
      const std::optional<PodWrite> w = want(meta);
      if (!w) continue;
      s = client.Send(w->method, path, w->body, w->content_type).status();
      if (s.ok()) {
        ++writes;
        log::Info("cluster {}: pod {} {}", cluster, pod, done);
      }
    }
    if (s.ok() || absl::IsNotFound(s)) continue;
    log::Warn("cluster {}: pod {} not {}: {}", cluster, pod, failed, s.ToString());
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace

absl::Status Enforcer::ReclaimDeadline(const std::vector<std::string>& pods, const std::string& deadline) {
  const std::string key(kReclaimDeadlineAnnotation);
  return WritePods(client_, cluster_, writes_, pods, "told of its reclaim", "told its devices go back at " + deadline,
                   [&](const json& meta) -> std::optional<PodWrite> {
                     const json none = json::object();
                     const json& annotations = meta.contains("annotations") && meta["annotations"].is_object()
                                                   ? meta["annotations"]
                                                   : none;
                     if (annotations.value(key, "") == deadline) return std::nullopt;
                     const json patch = {{"metadata", {{"annotations", {{key, deadline}}}}}};
                     return PodWrite{"PATCH", patch.dump(), "application/merge-patch+json"};
                   });
}

absl::Status Enforcer::RemovePods(const std::vector<std::string>& pods) {
  const json now = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", 0}};
  return WritePods(client_, cluster_, writes_, pods, "removed", "deleted (grace period 0): its borrowed devices went back",
                   [&](const json& meta) -> std::optional<PodWrite> {
                     // Already deleted at once and still there (finalizers, a node that does not
                     // answer): asking again changes nothing.
                     if (meta.contains("deletionTimestamp") && meta.value("deletionGracePeriodSeconds", int64_t{-1}) == 0) {
                       return std::nullopt;
                     }
                     return PodWrite{"DELETE", now.dump()};
                   });
}

}  // namespace gpuaas::cluster::kubernetes
