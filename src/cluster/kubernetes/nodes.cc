#include "cluster/kubernetes/nodes.h"

#include <algorithm>
#include <map>
#include <optional>

#include "catalog/catalog.h"
#include "cluster/kubernetes/node_labels.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

using nlohmann::json;

int64_t ResourceCount(const json& list, const std::string& name) {
  if (!list.is_object() || !list.contains(name) || !list[name].is_string()) return -1;
  return ParseQuantity(list[name].get<std::string>()).value_or(-1);
}

// `mig_devices` (profile -> count on the node) spread over `gpus` GPUs of `model`, largest
// profiles first, each to the GPU with the fewest instances that can still hold it, then laid out
// per GPU by catalog::PlaceProfiles: mig-parted's named configs (all-balanced, all-1g.10gb, ...)
// give every GPU the same layout, which this reproduces. Instances that fit nowhere are dropped
// (the labels were inconsistent).
std::vector<catalog::Layout> SpreadMig(const catalog::GpuModel& model, int64_t gpus,
                                       const std::map<std::string, int64_t>& mig_devices) {
  std::vector<std::vector<std::string>> per_gpu(static_cast<size_t>(gpus));
  std::vector<catalog::Layout> layouts(static_cast<size_t>(gpus));
  std::vector<const catalog::MigProfile*> order;
  for (const auto& [name, count] : mig_devices) {
    const catalog::MigProfile* p = catalog::FindProfile(model, name);
    if (p == nullptr) continue;
    for (int64_t i = 0; i < count; ++i) order.push_back(p);
  }
  std::stable_sort(order.begin(), order.end(), [](const catalog::MigProfile* a, const catalog::MigProfile* b) {
    return a->memory_slices > b->memory_slices;
  });
  for (const catalog::MigProfile* p : order) {
    std::vector<size_t> idx(per_gpu.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return per_gpu[a].size() < per_gpu[b].size(); });
    for (size_t i : idx) {
      per_gpu[i].emplace_back(p->name);
      absl::StatusOr<catalog::Layout> placed = catalog::PlaceProfiles(model, per_gpu[i]);
      if (placed.ok()) {
        layouts[i] = std::move(*placed);
        break;
      }
      per_gpu[i].pop_back();
    }
  }
  return layouts;
}

}  // namespace

std::optional<int64_t> ParseQuantity(std::string_view q) {
  static const std::map<std::string, int64_t, std::less<>> kUnits = {
      {"", 1},          {"k", 1000},      {"M", 1000000},   {"G", 1000000000},    {"T", 1000000000000},
      {"Ki", 1 << 10},  {"Mi", 1 << 20},  {"Gi", 1 << 30},  {"Ti", 1LL << 40},    {"m", 0}};
  size_t digits = 0;
  while (digits < q.size() && q[digits] >= '0' && q[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  std::optional<int64_t> n = ParseInt(q.substr(0, digits));
  auto unit = kUnits.find(q.substr(digits));
  if (!n || unit == kUnits.end()) return std::nullopt;
  if (unit->second == 0) return *n / 1000;  // milli-units
  if (*n > INT64_MAX / unit->second) return std::nullopt;
  return *n * unit->second;
}

std::optional<int64_t> ParseCpuMilli(std::string_view q) {
  if (q.ends_with('m')) {
    q.remove_suffix(1);
    if (q.empty() || q.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    return ParseInt(q);
  }
  const size_t dot = q.find('.');
  const std::string_view whole = q.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : q.substr(dot + 1);
  if ((whole.empty() && frac.empty()) || whole.find_first_not_of("0123456789") != std::string_view::npos ||
      frac.find_first_not_of("0123456789") != std::string_view::npos || (dot != std::string_view::npos && frac.empty())) {
    return std::nullopt;
  }
  std::optional<int64_t> cores = whole.empty() ? std::optional<int64_t>(0) : ParseInt(whole);
  if (!cores || *cores > INT64_MAX / 1000) return std::nullopt;
  int64_t milli = 0;
  for (size_t i = 0; i < 3; ++i) milli = milli * 10 + (i < frac.size() ? frac[i] - '0' : 0);
  if (frac.size() > 3 && frac.substr(3).find_first_not_of('0') != std::string_view::npos) ++milli;  // rounded up, as Kubernetes does
  return *cores * 1000 + milli;
}

std::string MetadataField(std::string_view object_json, std::string_view key) {
  const json o = json::parse(object_json, nullptr, false);
  if (!o.is_object() || !o.contains("metadata") || !o["metadata"].is_object()) return "";
  const json& m = o["metadata"];
  const std::string k(key);
  return m.contains(k) && m[k].is_string() ? m[k].get<std::string>() : "";
}

absl::StatusOr<PodGpus> ReadPod(std::string_view pod_json) {
  const json p = json::parse(pod_json, nullptr, false);
  if (!p.is_object() || !p.contains("metadata") || !p["metadata"].is_object() || !p["metadata"].contains("name")) {
    return absl::InvalidArgumentError("pod: not a Pod object (no metadata.name)");
  }
  PodGpus out;
  const json& meta = p["metadata"];
  out.key = fmt::format("{}/{}", meta.value("namespace", ""), meta.value("name", ""));
  const json spec = p.value("spec", json::object());
  const json status = p.value("status", json::object());
  out.node = spec.is_object() ? spec.value("nodeName", "") : "";
  const std::string phase = status.is_object() ? status.value("phase", "") : "";
  out.active = !out.node.empty() && phase != "Succeeded" && phase != "Failed";
  // DRA claims, by the names the API server gave them (a template's claim is generated).
  if (status.is_object() && status.contains("resourceClaimStatuses") && status["resourceClaimStatuses"].is_array()) {
    for (const json& c : status["resourceClaimStatuses"]) {
      if (!c.is_object() || !c.contains("resourceClaimName") || !c["resourceClaimName"].is_string()) continue;
      out.claims.push_back(fmt::format("{}/{}", meta.value("namespace", ""), c["resourceClaimName"].get<std::string>()));
    }
  }
  if (!spec.is_object() || !spec.contains("containers") || !spec["containers"].is_array()) return out;
  for (const json& c : spec["containers"]) {
    if (!c.is_object()) continue;
    const json resources = c.value("resources", json::object());
    const json limits = resources.is_object() ? resources.value("limits", json::object()) : json::object();
    const json requests = resources.is_object() ? resources.value("requests", json::object()) : json::object();
    // CPU and memory: the request, else the limit.
    auto asked = [&](const char* name) -> const json* {
      if (requests.is_object() && requests.contains(name) && requests[name].is_string()) return &requests[name];
      if (limits.is_object() && limits.contains(name) && limits[name].is_string()) return &limits[name];
      return nullptr;
    };
    if (const json* cpu = asked("cpu")) out.cpu_milli += ParseCpuMilli(cpu->get<std::string>()).value_or(0);
    if (const json* memory = asked("memory")) out.memory_bytes += std::max<int64_t>(0, ParseQuantity(memory->get<std::string>()).value_or(0));
    if (!limits.is_object()) continue;
    for (const auto& [name, value] : limits.items()) {
      if (!name.starts_with("nvidia.com/") || !value.is_string()) continue;
      std::optional<int64_t> n = ParseQuantity(value.get<std::string>());
      if (n && *n > 0) out.devices[name] += *n;
    }
  }
  return out;
}

namespace {

// One device of a node, whole GPU or MIG instance, as MarkHeld walks them.
struct Slot {
  std::string uuid;
  std::string resource;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  bool* in_use;
  std::vector<std::string>* pods;
};

std::vector<Slot> Slots(ObservedNode& node) {
  std::vector<Slot> out;
  for (ObservedGpu& g : node.gpus) {
    if (!g.mig_enabled) {
      out.push_back({g.uuid, "nvidia.com/gpu", &g.in_use, &g.pods});
      continue;
    }
    for (ObservedMigInstance& mi : g.mig_instances) {
      out.push_back({mi.uuid, catalog::ResourceName(mi.profile), &mi.in_use, &mi.pods});
    }
  }
  return out;
}

void Hold(Slot& s, const std::string& pod, std::vector<std::string>& held) {
  *s.in_use = true;
  s.pods->push_back(pod);
  held.push_back(s.uuid);
}

}  // namespace

void MarkHeld(const std::vector<const PodGpus*>& pods, const HeldDevices& exact,
              const std::map<std::string, std::string>& owners, HeldDevices& sticky, ObservedNode& node) {
  std::vector<Slot> slots = Slots(node);
  std::map<std::string, Slot*> by_uuid;
  for (Slot& s : slots) by_uuid[s.uuid] = &s;
  HeldDevices now;
  // Exact devices first: what the API server names cannot be anyone else's.
  for (const PodGpus* p : pods) {
    auto e = exact.find(p->key);
    if (e == exact.end()) continue;
    for (const std::string& uuid : e->second) {
      auto s = by_uuid.find(uuid);
      if (s != by_uuid.end()) Hold(*s->second, p->key, now[p->key]);
    }
  }
  // Counted devices: the last guess where it still holds, then new ones.
  std::vector<std::map<std::string, int64_t>> left;
  left.reserve(pods.size());
  for (const PodGpus* p : pods) {
    std::map<std::string, int64_t> want = p->devices;
    if (auto st = sticky.find(p->key); st != sticky.end()) {
      for (const std::string& uuid : st->second) {
        auto s = by_uuid.find(uuid);
        if (s == by_uuid.end() || *s->second->in_use) continue;
        auto w = want.find(s->second->resource);
        if (w == want.end() || w->second == 0) continue;
        Hold(*s->second, p->key, now[p->key]);
        --w->second;
      }
    }
    left.push_back(std::move(want));
  }
  // 0: the pod's project holds the device; 1: no project does; 2: another does.
  auto rank = [&owners](const Slot& s, std::string_view project) {
    auto o = owners.find(s.uuid);
    return o == owners.end() ? 1 : o->second == project ? 0 : 2;
  };
  for (size_t i = 0; i < pods.size(); ++i) {
    const std::string& key = pods[i]->key;
    const std::string_view project = std::string_view(key).substr(0, key.find('/'));
    for (auto& [resource, count] : left[i]) {
      for (int want_rank = 0; want_rank < 3; ++want_rank) {
        for (Slot& s : slots) {
          if (count == 0) break;
          if (s.resource == resource && !*s.in_use && rank(s, project) == want_rank) {
            Hold(s, key, now[key]);
            --count;
          }
        }
      }
      while (count > 0) {  // shared by time: the device with the fewest other pods
        Slot* best = nullptr;
        for (Slot& s : slots) {
          if (s.resource != resource || std::find(s.pods->begin(), s.pods->end(), key) != s.pods->end()) continue;
          if (best == nullptr || s.pods->size() < best->pods->size()) best = &s;
        }
        if (best == nullptr) break;  // asks for more than the node has
        Hold(*best, key, now[key]);
        --count;
      }
    }
  }
  for (const PodGpus* p : pods) sticky.erase(p->key);
  for (auto& [key, uuids] : now) sticky[key] = std::move(uuids);
}

std::string DerivedGpuUuid(std::string_view cluster, std::string_view node, int index) {
  return "GPU-" + StableUuid(fmt::format("kubernetes/{}/{}/{}", cluster, node, index));
}

namespace {

// What gpuaas keeps of any node: the labels of NVIDIA (GFD, the GPU Operator) and topology,
// schedulability, CPU and memory.
void ReadNodeBasics(const json& n, const std::map<std::string, std::string>& labels, ObservedNode& out) {
  // GFD's timestamp changes at every run and says nothing of the GPUs.
  for (const auto& [k, v] : labels) {
    if (k == "nvidia.com/gfd.timestamp") continue;
    if (k.starts_with("nvidia.com/") || k.starts_with("topology.kubernetes.io/") ||
        k == "kubernetes.io/hostname" || k == "gpuaas.io/pool") {
      out.labels[k] = v;
    }
  }
  const json spec = n.value("spec", json::object());
  const json status = n.value("status", json::object());
  bool ready = false;
  if (status.contains("conditions") && status["conditions"].is_array()) {
    for (const json& c : status["conditions"]) {
      if (c.is_object() && c.value("type", "") == "Ready") ready = c.value("status", "") == "True";
    }
  }
  out.schedulable = ready && !(spec.is_object() && spec.value("unschedulable", false));
  const json capacity = status.value("capacity", json::object());
  out.cpu_cores = std::max<int64_t>(0, ResourceCount(capacity, "cpu"));
  out.memory_bytes = std::max<int64_t>(0, ResourceCount(capacity, "memory"));
}

std::map<std::string, std::string> Labels(const json& n) {
  std::map<std::string, std::string> labels;
  if (n["metadata"].contains("labels") && n["metadata"]["labels"].is_object()) {
    for (const auto& [k, v] : n["metadata"]["labels"].items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
  }
  return labels;
}

bool IsNode(const json& n) {
  return n.is_object() && n.contains("metadata") && n["metadata"].is_object() && n["metadata"].contains("name") &&
         n["metadata"]["name"].is_string();
}

}  // namespace

std::string NodeLabel(const ObservedNode& node, std::string_view key) {
  auto it = node.labels.find(std::string(key));
  return it == node.labels.end() ? "" : it->second;
}

namespace {

NodeMeta MetaOf(const json& n) {
  NodeMeta meta;
  if (!n.is_object()) return meta;
  if (auto m = n.find("metadata"); m != n.end() && m->is_object()) {
    if (auto rv = m->find("resourceVersion"); rv != m->end() && rv->is_string()) {
      meta.resource_version = rv->get<std::string>();
    }
    auto a = m->find("annotations");
    meta.cordoned_for_mig = a != m->end() && a->is_object() && a->contains(std::string(kCordonAnnotation));
  }
  if (auto spec = n.find("spec"); spec != n.end() && spec->is_object()) {
    if (auto t = spec->find("taints"); t != spec->end() && t->is_array()) meta.taints = t->dump();
    auto u = spec->find("unschedulable");
    meta.unschedulable = u != spec->end() && u->is_boolean() && u->get<bool>();
  }
  return meta;
}

absl::StatusOr<ObservedNode> BareNodeOf(const json& n) {
  if (!IsNode(n)) return absl::InvalidArgumentError("node: not a Node object (no metadata.name)");
  ObservedNode out;
  out.name = n["metadata"]["name"].get<std::string>();
  ReadNodeBasics(n, Labels(n), out);
  return out;
}

absl::StatusOr<ObservedNode> NodeOf(std::string_view cluster, const json& n) {
  if (!IsNode(n)) return absl::InvalidArgumentError("node: not a Node object (no metadata.name)");
  ObservedNode out;
  out.name = n["metadata"]["name"].get<std::string>();
  const std::map<std::string, std::string> labels = Labels(n);
  absl::StatusOr<NodeGpus> gpus = ReadNodeLabels(labels);
  if (!gpus.ok() && absl::IsInvalidArgument(gpus.status())) {
    // A product the catalogue does not know (a newer GPU): its GPUs are listed without a model,
    // and the inventory flags the node (Recognized=False) instead of dropping it.
    auto product = labels.find("nvidia.com/gpu.product");
    auto count = labels.find("nvidia.com/gpu.count");
    const int64_t how_many = count == labels.end() ? -1 : ParseInt(count->second).value_or(-1);  // -1: none
    if (product != labels.end() && !catalog::ModelFromProduct(product->second).ok() && how_many >= 0 &&
        how_many <= 64) {
      NodeGpus unknown;
      unknown.product = product->second;
      unknown.gpus = how_many;
      if (auto mem = labels.find("nvidia.com/gpu.memory"); mem != labels.end()) {
        unknown.memory_mib = ParseInt(mem->second).value_or(0);
      }
      gpus = unknown;
    }
  }
  if (!gpus.ok()) {
    return absl::Status(gpus.status().code(), fmt::format("node {}: {}", out.name, gpus.status().message()));
  }
  out.gpu_product = gpus->product;
  ReadNodeBasics(n, labels, out);
  const json status = n.value("status", json::object());
  const json capacity = status.value("capacity", json::object());
  const json allocatable = status.value("allocatable", json::object());

  // Devices the plugin holds back (allocatable below capacity) are unhealthy; which ones the
  // labels do not say, so the last indices are marked.
  int64_t unhealthy = 0;
  const int64_t cap = ResourceCount(capacity, "nvidia.com/gpu");
  const int64_t alloc = ResourceCount(allocatable, "nvidia.com/gpu");
  if (gpus->mig_strategy != MigStrategy::kMixed && cap > 0 && alloc >= 0 && alloc < cap) {
    unhealthy = (cap - alloc) / std::max<int64_t>(1, gpus->replicas);
  }

  std::vector<catalog::Layout> layouts;
  const bool mig = gpus->mig_strategy != MigStrategy::kNone && !gpus->mig_devices.empty();
  if (mig && gpus->model != nullptr) layouts = SpreadMig(*gpus->model, gpus->gpus, gpus->mig_devices);
  for (int64_t i = 0; i < gpus->gpus; ++i) {
    ObservedGpu g;
    g.index = static_cast<int>(i);
    g.uuid = DerivedGpuUuid(cluster, out.name, g.index);
    g.memory_mib = gpus->memory_mib > 0 || gpus->model == nullptr ? gpus->memory_mib : int64_t{gpus->model->memory_gb} * 1024;
    g.healthy = i < gpus->gpus - unhealthy;
    if (!layouts.empty() && !layouts[static_cast<size_t>(i)].empty()) {
      g.mig_enabled = true;
      for (const catalog::Instance& inst : layouts[static_cast<size_t>(i)]) {
        g.mig_instances.push_back({std::string(inst.profile->name), inst.start, inst.profile->memory_slices,
                                   "MIG-" + StableUuid(fmt::format("{}/{}/{}", g.uuid, inst.profile->name, inst.start)),
                                   false});
      }
    }
    out.gpus.push_back(std::move(g));
  }
  return out;
}

}  // namespace

NodeMeta ReadNodeMeta(std::string_view node_json) { return MetaOf(json::parse(node_json, nullptr, false)); }

absl::StatusOr<ObservedNode> ReadBareNode(std::string_view node_json) {
  return BareNodeOf(json::parse(node_json, nullptr, false));
}

absl::StatusOr<ObservedNode> ReadNode(std::string_view cluster, std::string_view node_json) {
  return NodeOf(cluster, json::parse(node_json, nullptr, false));
}

NodeRead ReadNodeOnce(std::string_view cluster, std::string_view node_json) {
  const json n = json::parse(node_json, nullptr, false);
  NodeRead out;
  absl::StatusOr<ObservedNode> read = NodeOf(cluster, n);
  if (read.ok()) {
    out.kind = NodeRead::Kind::kGpu;
    out.name = read->name;
    out.node = std::move(*read);
    out.meta = MetaOf(n);
    return out;
  }
  if (IsNode(n)) out.name = n["metadata"]["name"].get<std::string>();
  if (absl::IsNotFound(read.status())) {
    // No GPU labels: kept bare, for when NVIDIA's DRA driver names GPUs there.
    absl::StatusOr<ObservedNode> bare = BareNodeOf(n);
    if (bare.ok()) {
      out.kind = NodeRead::Kind::kBare;
      out.node = std::move(*bare);
      return out;
    }
    read = bare.status();
  }
  out.kind = NodeRead::Kind::kRefused;
  out.refused = std::string(read.status().message());
  return out;
}

}  // namespace gpuaas::cluster::kubernetes
