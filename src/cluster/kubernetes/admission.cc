#include "cluster/kubernetes/admission.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/escaping.h"
#include "catalog/catalog.h"
#include "common/status.h"
#include "cluster/kubernetes/nodes.h"
#include "cluster/kubernetes/resource_slices.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

using nlohmann::json;

constexpr std::string_view kHostname = "kubernetes.io/hostname";

// An AdmissionReview v1 with a request, parsed.
absl::StatusOr<json> ReadReview(std::string_view text) {
  json review = json::parse(text, nullptr, false);
  if (review.is_discarded() || !review.is_object() || review.value("kind", "") != "AdmissionReview" ||
      !review.contains("request") || !review["request"].is_object()) {
    return absl::InvalidArgumentError("not an AdmissionReview with a request");
  }
  return review;
}

// nvidia.com/ devices a container asks for (limits; requests where no limit is given).
std::map<std::string, int64_t> ContainerDevices(const json& c) {
  std::map<std::string, int64_t> out;
  const json* res = c.contains("resources") && c["resources"].is_object() ? &c["resources"] : nullptr;
  if (res == nullptr) return out;
  for (const char* kind : {"requests", "limits"}) {  // limits win
    if (!res->contains(kind) || !(*res)[kind].is_object()) continue;
    for (const auto& [name, value] : (*res)[kind].items()) {
      if (!name.starts_with("nvidia.com/")) continue;
      std::optional<int64_t> n = value.is_string() ? ParseQuantity(value.get<std::string>())
                                                   : (value.is_number_integer() ? std::optional<int64_t>(value.get<int64_t>())
                                                                                : std::nullopt);
      if (n && *n > 0) out[name] = *n;
    }
  }
  return out;
}

// What a pod needs at once: its containers together, or its largest init container.
std::map<std::string, int64_t> PodDevices(const json& spec) {
  std::map<std::string, int64_t> sum;
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (const json& c : spec["containers"]) {
      for (const auto& [r, n] : ContainerDevices(c)) sum[r] += n;
    }
  }
  if (spec.contains("initContainers") && spec["initContainers"].is_array()) {
    for (const json& c : spec["initContainers"]) {
      for (const auto& [r, n] : ContainerDevices(c)) sum[r] = std::max(sum[r], n);
    }
  }
  return sum;
}

std::string Held(const std::map<std::string, int64_t>& held) {
  if (held.empty()) return "nothing";
  std::vector<std::string> parts;
  for (const auto& [r, n] : held) parts.push_back(fmt::format("{}={}", r, n));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The pod's affinity with `nodes` required: our expression joins every existing required term
// (terms are ORed, a term's expressions ANDed), or makes the only term.
json SteeredAffinity(const json& spec, const std::set<std::string>& nodes) {
  json affinity = spec.contains("affinity") && spec["affinity"].is_object() ? spec["affinity"] : json::object();
  const json expr = {{"key", kHostname}, {"operator", "In"}, {"values", nodes}};
  json& node_affinity = affinity["nodeAffinity"];
  if (!node_affinity.is_object()) node_affinity = json::object();
  json& required = node_affinity["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!required.is_object()) required = json::object();
  json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = json::array({json::object()});
  for (json& term : terms) {
    if (!term.contains("matchExpressions") || !term["matchExpressions"].is_array()) term["matchExpressions"] = json::array();
    term["matchExpressions"].push_back(expr);
  }
  return affinity;
}

// Whether the pod can only run on `nodes`: bound to one of them, or every required node
// selector term names some of them by host name and nothing else.
bool PinnedTo(const json& spec, const std::set<std::string>& nodes) {
  if (spec.contains("nodeName") && spec["nodeName"].is_string() && !spec["nodeName"].get<std::string>().empty()) {
    return nodes.contains(spec["nodeName"].get<std::string>());
  }
  const json* terms = &spec;
  for (const char* key : {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"}) {
    if (!terms->is_object() || !terms->contains(key)) return false;
    terms = &(*terms)[key];
  }
  if (!terms->is_array() || terms->empty()) return false;
  for (const json& term : *terms) {
    bool pinned = false;
    for (const json& e : term.value("matchExpressions", json::array())) {
      if (e.value("key", "") != kHostname || e.value("operator", "") != "In" || !e.contains("values") ||
          !e["values"].is_array() || e["values"].empty()) {
        continue;
      }
      pinned = std::all_of(e["values"].begin(), e["values"].end(),
                           [&](const json& v) { return v.is_string() && nodes.contains(v.get<std::string>()); });
      if (pinned) break;
    }
    if (!pinned) return false;
  }
  return true;
}

}  // namespace

ProjectPools PoolsFrom(std::vector<model::GpuPool> pools) {
  auto all = std::make_shared<std::vector<std::shared_ptr<const model::GpuPool>>>();
  for (model::GpuPool& p : pools) all->push_back(std::make_shared<const model::GpuPool>(std::move(p)));
  return [all](std::string_view project) {
    std::vector<std::shared_ptr<const model::GpuPool>> out;
    for (const auto& p : *all) {
      if (p->metadata.ns == project) out.push_back(p);
    }
    return out;
  };
}

absl::StatusOr<std::string> ReviewPod(std::string_view review_json, std::string_view cluster,
                                      const ProjectPools& pools, AdmissionMode mode) {
  ASSIGN_OR_RETURN(const json review, ReadReview(review_json));
  const json& req = review["request"];
  const std::string uid = req.value("uid", "");
  const std::string ns = req.value("namespace", "");
  json response = {{"uid", uid}, {"allowed", true}};
  auto deny = [&](const std::string& message) {
    response["allowed"] = false;
    response["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", message}};
  };
  const json* pod = req.contains("object") && req["object"].is_object() ? &req["object"] : nullptr;
  const json spec = pod != nullptr && pod->contains("spec") && (*pod)["spec"].is_object() ? (*pod)["spec"] : json::object();
  const std::map<std::string, int64_t> asked = PodDevices(spec);
  if (!asked.empty()) {
    const std::vector<std::shared_ptr<const model::GpuPool>> project_pools = pools(ns);
    // What the project's live pools hold here, and where.
    std::map<std::string, int64_t> held;
    std::map<std::string, std::map<std::string, int64_t>> nodes_of;  // resource -> Kubernetes node -> devices
    for (const auto& live : project_pools) {
      const model::GpuPool& p = *live;
      if (p.metadata.ns != ns || !model::PoolIsLive(p)) continue;
      for (const model::AllocatedDevice& d : p.status.allocation) {
        if (d.cluster != cluster) continue;
        const std::string r = catalog::ResourceName(d.profile);
        ++held[r];
        const std::string prefix = std::string(cluster) + ".";
        ++nodes_of[r][d.node.starts_with(prefix) ? d.node.substr(prefix.size()) : d.node];
      }
    }
    std::string refused;
    for (const auto& [r, n] : asked) {
      auto h = held.find(r);
      if (h == held.end()) {
        refused = fmt::format("project \"{}\" holds no {} in cluster {} (its pools hold {}): GPUs are used through an "
                              "approved pool (gpuaas pool request)",
                              ns, r, cluster, Held(held));
        break;
      }
      if (n > h->second) {
        refused = fmt::format("the pod asks for {} {}; project \"{}\"'s pools hold {} in cluster {}", n, r, ns,
                              h->second, cluster);
        break;
      }
    }
    std::set<std::string> nodes;
    if (refused.empty()) {
      // A pod's devices come from one node: one where the pools hold all it asks for.
      bool first = true;
      for (const auto& [r, n] : asked) {
        std::set<std::string> here;
        for (const auto& [node, count] : nodes_of[r]) {
          if (count >= n) here.insert(node);
        }
        if (first) {
          nodes = here;
        } else {
          std::set<std::string> both;
          std::set_intersection(nodes.begin(), nodes.end(), here.begin(), here.end(), std::inserter(both, both.end()));
          nodes = std::move(both);
        }
        first = false;
      }
      if (nodes.empty()) {
        refused = fmt::format("no node of cluster {} holds all of {} for project \"{}\": the pod could not start",
                              cluster, Held(asked), ns);
      }
    }
    if (refused.empty() && mode == AdmissionMode::kValidate && !PinnedTo(spec, nodes)) {
      refused = fmt::format("the pod is not held to the nodes of project \"{}\"'s pools in cluster {} ({}); was its "
                            "affinity changed after gpuaas set it?",
                            ns, cluster, fmt::join(nodes, ", "));
    }
    if (!refused.empty()) {
      deny(refused);
    } else if (mode == AdmissionMode::kMutate) {
      json patch = json::array({{{"op", "add"}, {"path", "/spec/affinity"}, {"value", SteeredAffinity(spec, nodes)}}});
      // Nodes a pool holds whole are tainted for it (controller/fencing.h): the project's pods
      // tolerate its pools' taints, and a borrower's the taint of the pool that lends to it.
      std::set<std::string> values;
      for (const auto& live : project_pools) {
        const model::GpuPool& p = *live;
        if (p.metadata.ns != ns || !model::PoolIsLive(p)) continue;
        auto lender = p.metadata.labels.find(std::string(model::kLoanOfLabel));
        for (const model::AllocatedDevice& d : p.status.allocation) {
          const std::string prefix = std::string(cluster) + ".";
          if (d.cluster == cluster && d.node.starts_with(prefix) && nodes.contains(d.node.substr(prefix.size()))) {
            values.insert(lender != p.metadata.labels.end() ? lender->second : model::NodePoolValue(p));
          }
        }
      }
      const bool has_list = spec.contains("tolerations") && spec["tolerations"].is_array();
      json added = json::array();
      for (const std::string& v : values) {
        const json t = {{"key", model::kNodePoolKey}, {"operator", "Equal"}, {"value", v}, {"effect", "NoSchedule"}};
        if (has_list && std::find(spec["tolerations"].begin(), spec["tolerations"].end(), t) != spec["tolerations"].end()) {
          continue;
        }
        added.push_back(t);
      }
      if (!added.empty() && !has_list) {
        patch.push_back({{"op", "add"}, {"path", "/spec/tolerations"}, {"value", added}});
      } else {
        for (const json& t : added) patch.push_back({{"op", "add"}, {"path", "/spec/tolerations/-"}, {"value", t}});
      }
      response["patchType"] = "JSONPatch";
      response["patch"] = absl::Base64Escape(patch.dump());
    }
  }
  const json out = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}};
  return out.dump();
}

std::string UuidSelector(const std::vector<std::string>& uuids) {
  std::vector<std::string> quoted;
  quoted.reserve(uuids.size());
  for (const std::string& u : uuids) quoted.push_back(json(u).dump());
  return fmt::format("device.attributes[\"{}\"].uuid in [{}]", kNvidiaDraDriver, fmt::join(quoted, ", "));
}

namespace {

// Why toleration `t` of a claim in namespace `ns` is not allowed, or "".
std::string ForeignToleration(const json& t, std::string_view ns) {
  if (!t.is_object()) return "";
  if (const std::string effect = t.value("effect", ""); !effect.empty() && effect != "NoSchedule") return "";
  const std::string key = t.value("key", "");
  const std::string op = t.value("operator", "Equal");
  if (key.empty() && op == "Exists") {
    return fmt::format("a toleration of every taint would take devices kept for other projects ({} taints)",
                       kProjectTaintKey);
  }
  if (key != kProjectTaintKey) return "";
  if (op == "Exists") return fmt::format("a toleration of every {} taint would take other projects' devices", kProjectTaintKey);
  const std::string value = t.value("value", "");
  if (value != ns) {
    return fmt::format("a claim in namespace \"{}\" may not tolerate {}={}: those devices are project \"{}\"'s",
                       ns, kProjectTaintKey, value, value);
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> ReviewClaim(std::string_view review_json, std::string_view cluster,
                                        const ProjectPools& pools, AdmissionMode mode) {
  ASSIGN_OR_RETURN(const json review, ReadReview(review_json));
  const json& req = review["request"];
  const std::string ns = req.value("namespace", "");
  json response = {{"uid", req.value("uid", "")}, {"allowed", true}};
  const json out_of = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}};
  auto answer = [&](const std::string& refused) {
    if (!refused.empty()) {
      response["allowed"] = false;
      response["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", refused}};
      response.erase("patch");
      response.erase("patchType");
    }
    json out = out_of;
    out["response"] = response;
    return out.dump();
  };
  const json* claim = req.contains("object") && req["object"].is_object() ? &req["object"] : nullptr;
  const json* requests = nullptr;
  if (claim != nullptr && claim->contains("spec") && (*claim)["spec"].is_object() && (*claim)["spec"].contains("devices") &&
      (*claim)["spec"]["devices"].is_object() && (*claim)["spec"]["devices"].contains("requests") &&
      (*claim)["spec"]["devices"]["requests"].is_array()) {
    requests = &(*claim)["spec"]["devices"]["requests"];
  }
  if (requests == nullptr) return answer("");
  // Each device request, exactly or one of firstAvailable, with its JSON Pointer.
  std::vector<std::pair<const json*, std::string>> asks;
  for (size_t i = 0; i < requests->size(); ++i) {
    const json& r = (*requests)[i];
    if (!r.is_object()) continue;
    if (r.contains("exactly") && r["exactly"].is_object()) {
      asks.emplace_back(&r["exactly"], fmt::format("/spec/devices/requests/{}/exactly", i));
    }
    if (r.contains("firstAvailable") && r["firstAvailable"].is_array()) {
      for (size_t j = 0; j < r["firstAvailable"].size(); ++j) {
        if (r["firstAvailable"][j].is_object()) {
          asks.emplace_back(&r["firstAvailable"][j], fmt::format("/spec/devices/requests/{}/firstAvailable/{}", i, j));
        }
      }
    }
  }
  for (const auto& [ask, path] : asks) {
    if (!ask->contains("tolerations") || !(*ask)["tolerations"].is_array()) continue;
    for (const json& t : (*ask)["tolerations"]) {
      if (std::string why = ForeignToleration(t, ns); !why.empty()) return answer(why);
    }
  }
  // The project's devices here, by UUID.
  std::set<std::string> mine;
  for (const auto& live : pools(ns)) {
    const model::GpuPool& p = *live;
    if (p.metadata.ns != ns || !model::PoolIsLive(p)) continue;
    for (const model::AllocatedDevice& d : p.status.allocation) {
      if (d.cluster != cluster) continue;
      if (const std::string& uuid = model::DeviceUuid(d); !uuid.empty()) mine.insert(uuid);
    }
  }
  if (mine.empty()) return answer("");
  const std::string selector = UuidSelector({mine.begin(), mine.end()});
  const json toleration = {{"key", kProjectTaintKey}, {"operator", "Equal"}, {"value", ns}, {"effect", "NoSchedule"}};
  json patch = json::array();
  for (const auto& [ask, path] : asks) {
    const std::string cls = ask->value("deviceClassName", "");
    if (std::find(kNvidiaDeviceClasses.begin(), kNvidiaDeviceClasses.end(), cls) == kNvidiaDeviceClasses.end()) continue;
    const json none = json::array();
    const json& selectors = ask->contains("selectors") && (*ask)["selectors"].is_array() ? (*ask)["selectors"] : none;
    const json ours = {{"cel", {{"expression", selector}}}};
    const bool selected = std::find(selectors.begin(), selectors.end(), ours) != selectors.end();
    if (mode == AdmissionMode::kValidate) {
      if (!selected) {
        return answer(fmt::format("the claim's {} request is not held to project \"{}\"'s devices in cluster {}; was "
                                  "it changed after gpuaas set it?",
                                  cls, ns, cluster));
      }
      continue;
    }
    if (!selected) {
      if (ask->contains("selectors") && (*ask)["selectors"].is_array()) {
        patch.push_back({{"op", "add"}, {"path", path + "/selectors/-"}, {"value", ours}});
      } else {
        patch.push_back({{"op", "add"}, {"path", path + "/selectors"}, {"value", json::array({ours})}});
      }
    }
    const json& tolerations = ask->contains("tolerations") && (*ask)["tolerations"].is_array() ? (*ask)["tolerations"] : none;
    if (std::find(tolerations.begin(), tolerations.end(), toleration) == tolerations.end()) {
      if (ask->contains("tolerations") && (*ask)["tolerations"].is_array()) {
        patch.push_back({{"op", "add"}, {"path", path + "/tolerations/-"}, {"value", toleration}});
      } else {
        patch.push_back({{"op", "add"}, {"path", path + "/tolerations"}, {"value", json::array({toleration})}});
      }
    }
  }
  if (!patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = absl::Base64Escape(patch.dump());
  }
  return answer("");
}

}  // namespace gpuaas::cluster::kubernetes
