#include "cluster/kubernetes/mig_config.h"

#include <algorithm>
#include <vector>

#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas::cluster::kubernetes {
namespace {

YAML::Node Entry(const std::vector<int>& devices, const GpuMigSpec& spec) {
  YAML::Node e;
  YAML::Node d(YAML::NodeType::Sequence);
  for (int i : devices) d.push_back(i);
  d.SetStyle(YAML::EmitterStyle::Flow);
  e["devices"] = d;
  e["mig-enabled"] = spec.enabled;
  if (spec.enabled) {
    YAML::Node m(YAML::NodeType::Map);
    for (const auto& [profile, count] : spec.devices) m[profile] = count;
    e["mig-devices"] = m;
  }
  return e;
}

}  // namespace

absl::StatusOr<std::string> MergeMigConfig(std::string_view existing, const std::string& name,
                                           const std::string& replaces_prefix, const std::map<int, GpuMigSpec>& gpus) {
  YAML::Node doc;
  try {
    doc = existing.empty() ? YAML::Node(YAML::NodeType::Map) : YAML::Load(std::string(existing));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("config.yaml: {}", e.what()));
  }
  if (doc.IsNull()) doc = YAML::Node(YAML::NodeType::Map);
  if (!doc.IsMap()) return absl::InvalidArgumentError("config.yaml: not a mig-parted config (not a map)");
  if (doc["version"] && doc["version"].as<std::string>("") != "v1") {
    return absl::InvalidArgumentError(fmt::format("config.yaml: version \"{}\" is not v1", doc["version"].as<std::string>("")));
  }
  doc["version"] = "v1";
  YAML::Node configs = doc["mig-configs"];
  if (configs && !configs.IsMap()) return absl::InvalidArgumentError("config.yaml: mig-configs is not a map");
  YAML::Node kept(YAML::NodeType::Map);
  if (configs) {
    for (const auto& kv : configs) {
      const std::string n = kv.first.as<std::string>();
      if (n != name && !(n.starts_with(replaces_prefix))) kept[n] = kv.second;
    }
  }
  // GPUs with the same wanted state share one entry, as hand-written configs do.
  std::vector<std::pair<GpuMigSpec, std::vector<int>>> groups;
  for (const auto& [index, spec] : gpus) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == spec; });
    if (it == groups.end()) {
      groups.push_back({spec, {index}});
    } else {
      it->second.push_back(index);
    }
  }
  YAML::Node entries(YAML::NodeType::Sequence);
  for (const auto& [spec, devices] : groups) entries.push_back(Entry(devices, spec));
  kept[name] = entries;
  doc["mig-configs"] = kept;
  YAML::Emitter out;
  out << doc;
  return std::string(out.c_str()) + "\n";
}

absl::StatusOr<std::map<int, GpuMigSpec>> ReadMigConfig(std::string_view yaml, const std::string& name, int gpus) {
  try {
    const YAML::Node doc = YAML::Load(std::string(yaml));
    const YAML::Node entries = doc["mig-configs"] ? doc["mig-configs"][name] : YAML::Node();
    if (!entries || !entries.IsSequence()) return absl::NotFoundError(fmt::format("no mig-config named \"{}\"", name));
    std::map<int, GpuMigSpec> out;
    for (const YAML::Node& e : entries) {
      GpuMigSpec spec;
      spec.enabled = e["mig-enabled"].as<bool>(false);
      if (e["mig-devices"] && e["mig-devices"].IsMap()) {
        for (const auto& kv : e["mig-devices"]) spec.devices[kv.first.as<std::string>()] = kv.second.as<int64_t>();
      }
      std::vector<int> devices;
      if (e["devices"].IsScalar() && e["devices"].as<std::string>() == "all") {
        for (int i = 0; i < gpus; ++i) devices.push_back(i);
      } else if (e["devices"].IsSequence()) {
        for (const YAML::Node& d : e["devices"]) devices.push_back(d.as<int>());
      }
      for (int i : devices) out[i] = spec;
    }
    return out;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("config.yaml: {}", e.what()));
  }
}

std::string TimeSlicingConfig(int64_t replicas) {
  YAML::Node resource;
  resource["name"] = "nvidia.com/gpu";
  resource["replicas"] = replicas;
  YAML::Node doc;
  doc["version"] = "v1";
  doc["sharing"]["timeSlicing"]["resources"].push_back(resource);
  YAML::Emitter out;
  out << doc;
  return std::string(out.c_str()) + "\n";
}

}  // namespace gpuaas::cluster::kubernetes
