#include "cluster/kubernetes/resource_slices.h"

#include <algorithm>
#include <limits>

#include "cluster/kubernetes/nodes.h"
#include "common/ids.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

using nlohmann::json;

// An attribute's value ({"string": ...}, {"int": ...}, {"version": ...}, {"bool": ...}) as text,
// by its plain name or qualified with the driver's ("gpu.nvidia.com/uuid").
std::string Attribute(const json& attrs, std::string_view driver, const std::string& name) {
  for (const std::string& key : {name, fmt::format("{}/{}", driver, name)}) {
    auto it = attrs.find(key);
    if (it == attrs.end() || !it->is_object() || it->empty()) continue;
    const json& v = it->begin().value();
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  }
  return "";
}

// The minor number of a device named "gpu-<minor>[-...]", or INT_MAX.
int Minor(std::string_view name) {
  if (!name.starts_with("gpu-")) return std::numeric_limits<int>::max();
  name.remove_prefix(4);
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  std::optional<int64_t> n = ParseInt(name.substr(0, digits));
  return n ? static_cast<int>(*n) : std::numeric_limits<int>::max();
}

}  // namespace

absl::StatusOr<ResourceSlice> ReadResourceSlice(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("spec") || !j["spec"].is_object()) {
    return absl::InvalidArgumentError("not a ResourceSlice: no spec");
  }
  ResourceSlice s;
  s.name = MetadataField(text, "name");
  const json& spec = j["spec"];
  auto str = [](const json& o, const char* key) {
    return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
  };
  s.driver = str(spec, "driver");
  s.node = str(spec, "nodeName");
  if (spec.contains("pool") && spec["pool"].is_object()) {
    const json& pool = spec["pool"];
    s.pool = str(pool, "name");
    if (pool.contains("generation") && pool["generation"].is_number_integer()) s.generation = pool["generation"];
    if (pool.contains("resourceSliceCount") && pool["resourceSliceCount"].is_number_integer()) {
      s.slice_count = pool["resourceSliceCount"];
    }
  }
  if (s.driver.empty() || s.pool.empty() || s.slice_count < 1) {
    return absl::InvalidArgumentError(fmt::format("ResourceSlice {}: spec.driver, spec.pool.name and a positive "
                                                  "spec.pool.resourceSliceCount are required", s.name));
  }
  if (!spec.contains("devices") || spec["devices"].is_null()) return s;  // counters only, or none found
  if (!spec["devices"].is_array()) {
    return absl::InvalidArgumentError(fmt::format("ResourceSlice {}: spec.devices is not a list", s.name));
  }
  for (const json& d : spec["devices"]) {
    if (!d.is_object()) return absl::InvalidArgumentError(fmt::format("ResourceSlice {}: a device is not an object", s.name));
    SliceDevice dev;
    dev.name = str(d, "name");
    const json attrs = d.contains("attributes") && d["attributes"].is_object() ? d["attributes"] : json::object();
    dev.type = Attribute(attrs, s.driver, "type");
    dev.uuid = Attribute(attrs, s.driver, "uuid");
    dev.parent_uuid = Attribute(attrs, s.driver, "parentUUID");
    dev.profile = Attribute(attrs, s.driver, "profile");
    dev.product = Attribute(attrs, s.driver, "productName");
    dev.partition = d.contains("consumesCounters") && d["consumesCounters"].is_array() && !d["consumesCounters"].empty();
    if (d.contains("capacity") && d["capacity"].is_object()) {
      int first = std::numeric_limits<int>::max();
      for (const auto& [key, value] : d["capacity"].items()) {
        const std::string v = value.is_object() ? str(value, "value") : std::string();
        if (key == "memory") dev.memory_bytes = ParseQuantity(v).value_or(0);
        if (key.starts_with("memorySlice")) {
          std::optional<int64_t> i = ParseInt(std::string_view(key).substr(std::string_view("memorySlice").size()));
          if (!i || *i < 0 || *i > 64) continue;
          first = std::min(first, static_cast<int>(*i));
          ++dev.size;
        }
      }
      if (dev.size > 0) dev.start = first;
    }
    s.devices.push_back(std::move(dev));
  }
  return s;
}

namespace {

struct Pool {
  int64_t generation = -1;
  int64_t want = 0;
  std::string node;
  std::vector<const ResourceSlice*> slices;
};

// Complete pools of the NVIDIA driver, by name: the newest generation, with every slice of it
// seen, on a node.
std::map<std::string, Pool> CompletePools(const std::vector<ResourceSlice>& slices) {
  std::map<std::string, Pool> pools;
  for (const ResourceSlice& s : slices) {
    if (s.driver != kNvidiaDraDriver) continue;
    Pool& p = pools[s.pool];
    if (s.generation > p.generation) p = Pool{s.generation, s.slice_count, s.node, {}};
    if (s.generation == p.generation) p.slices.push_back(&s);
  }
  std::erase_if(pools, [](const auto& kv) {
    return static_cast<int64_t>(kv.second.slices.size()) != kv.second.want || kv.second.node.empty();
  });
  return pools;
}

}  // namespace

std::map<std::string, std::string> DeviceUuids(const std::vector<ResourceSlice>& slices) {
  std::map<std::string, std::string> out;
  for (const auto& [name, pool] : CompletePools(slices)) {
    for (const ResourceSlice* s : pool.slices) {
      for (const SliceDevice& d : s->devices) {
        if (!d.partition && !d.uuid.empty()) out[name + "/" + d.name] = d.uuid;
      }
    }
  }
  return out;
}

absl::StatusOr<ResourceClaim> ReadResourceClaim(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("metadata") || !j["metadata"].is_object()) {
    return absl::InvalidArgumentError("not a ResourceClaim: no metadata");
  }
  ResourceClaim c;
  c.key = fmt::format("{}/{}", MetadataField(text, "namespace"), MetadataField(text, "name"));
  const json* results = nullptr;
  if (j.contains("status") && j["status"].is_object()) {
    const json& st = j["status"];
    if (st.contains("allocation") && st["allocation"].is_object() && st["allocation"].contains("devices") &&
        st["allocation"]["devices"].is_object() && st["allocation"]["devices"].contains("results")) {
      results = &st["allocation"]["devices"]["results"];
    }
  }
  if (results == nullptr || results->is_null()) return c;
  if (!results->is_array()) {
    return absl::InvalidArgumentError(fmt::format("ResourceClaim {}: status.allocation.devices.results is not a list", c.key));
  }
  for (const json& r : *results) {
    if (!r.is_object()) continue;
    ClaimDevice d;
    for (auto [field, key] : {std::pair{&d.driver, "driver"}, std::pair{&d.pool, "pool"}, std::pair{&d.device, "device"}}) {
      if (r.contains(key) && r[key].is_string()) *field = r[key].get<std::string>();
    }
    if (d.driver.empty() || d.pool.empty() || d.device.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("ResourceClaim {}: an allocation result needs driver, pool and device", c.key));
    }
    c.devices.push_back(std::move(d));
  }
  return c;
}

std::map<std::string, std::vector<ObservedGpu>> GpusFromSlices(const std::vector<ResourceSlice>& slices) {
  std::map<std::string, std::vector<ObservedGpu>> out;
  for (const auto& [name, pool] : CompletePools(slices)) {
    std::map<std::string, std::pair<int, ObservedGpu>> gpus;  // uuid -> (minor, GPU)
    std::vector<const SliceDevice*> migs;
    for (const ResourceSlice* s : pool.slices) {
      for (const SliceDevice& d : s->devices) {
        if (d.partition || d.uuid.empty()) continue;
        if (d.type == "gpu") {
          ObservedGpu& g = gpus[d.uuid].second;
          gpus[d.uuid].first = Minor(d.name);
          g.uuid = d.uuid;
          g.memory_mib = d.memory_bytes >> 20;
        } else if (d.type == "mig" && !d.parent_uuid.empty()) {
          migs.push_back(&d);
        }
      }
    }
    for (const SliceDevice* m : migs) {
      auto [it, added] = gpus.try_emplace(m->parent_uuid);
      if (added) {  // a parent the slices do not list as a GPU of its own
        it->second.first = Minor(m->name);
        it->second.second.uuid = m->parent_uuid;
      }
      ObservedGpu& g = it->second.second;
      g.mig_enabled = true;
      g.mig_instances.push_back({m->profile, std::max(0, m->start), m->size, m->uuid, false});
    }
    std::vector<std::pair<int, ObservedGpu>> ordered;
    for (auto& [uuid, entry] : gpus) ordered.push_back(std::move(entry));
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<ObservedGpu>& node = out[pool.node];
    for (auto& [minor, g] : ordered) {
      std::sort(g.mig_instances.begin(), g.mig_instances.end(),
                [](const ObservedMigInstance& a, const ObservedMigInstance& b) { return a.start < b.start; });
      g.index = static_cast<int>(node.size());
      node.push_back(std::move(g));
    }
  }
  return out;
}

std::string DeviceTaintRuleName(std::string_view project, std::string_view pool, std::string_view device) {
  std::string name = fmt::format("gpuaas.{}.{}.{}", project, pool, device);
  if (name.size() > 253) name = fmt::format("gpuaas.{}.{}", project, StableUuid(name));
  return name;
}

std::string DeviceTaintRule(std::string_view project, std::string_view pool, std::string_view device) {
  const json rule = {
      {"apiVersion", "resource.k8s.io/v1beta2"},
      {"kind", "DeviceTaintRule"},
      {"metadata",
       {{"name", DeviceTaintRuleName(project, pool, device)},
        {"labels", {{std::string(kProjectTaintKey), std::string(project)}, {"app.kubernetes.io/managed-by", "gpuaas"}}}}},
      {"spec",
       {{"deviceSelector", {{"driver", std::string(kNvidiaDraDriver)}, {"pool", std::string(pool)}, {"device", std::string(device)}}},
        {"taint", {{"key", std::string(kProjectTaintKey)}, {"value", std::string(project)}, {"effect", "NoSchedule"}}}}}};
  return rule.dump();
}

}  // namespace gpuaas::cluster::kubernetes
