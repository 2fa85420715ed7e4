#include "cluster/simulated/fleet.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "catalog/catalog.h"
#include "common/ids.h"
#include "common/status.h"
#include "fmt/format.h"
#include "model/object.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas::cluster::simulated {
namespace {

struct ParseError {
  std::string message;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw ParseError{fmt::format("{}: {}", where, what)};
}

std::string Str(const YAML::Node& n, const char* key, const std::string& where, bool required) {
  const YAML::Node v = n[key];
  if (!v) {
    if (required) Fail(fmt::format("{}.{}", where, key), "required");
    return "";
  }
  if (!v.IsScalar()) Fail(fmt::format("{}.{}", where, key), "expected a string");
  return v.as<std::string>();
}

int Int(const YAML::Node& n, const char* key, const std::string& where, int dflt, int min,
        int max) {
  const YAML::Node v = n[key];
  if (!v) return dflt;
  int x = 0;
  if (!v.IsScalar() || !YAML::convert<int>::decode(v, x)) {
    Fail(fmt::format("{}.{}", where, key), "expected an integer");
  }
  if (x < min || x > max) {
    Fail(fmt::format("{}.{}", where, key), fmt::format("must be between {} and {}", min, max));
  }
  return x;
}

void CheckKeys(const YAML::Node& n, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (!allowed.count(k)) Fail(where, fmt::format("unknown field \"{}\"", k));
  }
}

FleetSpec ParseNode(const YAML::Node& root) {
  if (!root.IsMap()) Fail("(root)", "expected a mapping with a clusters list");
  CheckKeys(root, {"clusters"}, "(root)");
  const YAML::Node clusters = root["clusters"];
  if (!clusters || !clusters.IsSequence() || clusters.size() == 0) {
    Fail("clusters", "expected a non-empty list");
  }
  FleetSpec fleet;
  std::set<std::string> names;
  for (size_t i = 0; i < clusters.size(); ++i) {
    const std::string where = fmt::format("clusters[{}]", i);
    const YAML::Node c = clusters[i];
    if (!c.IsMap()) Fail(where, "expected a mapping");
    CheckKeys(c, {"name", "displayName", "region", "nodePools"}, where);
    ClusterSpec cs;
    cs.name = Str(c, "name", where, true);
    if (absl::Status s = model::ValidateName(cs.name); !s.ok() || cs.name.find('.') != std::string::npos) {
      Fail(where + ".name", fmt::format("\"{}\" must be a DNS label (lower-case letters, digits, '-')", cs.name));
    }
    if (!names.insert(cs.name).second) Fail(where + ".name", fmt::format("duplicate cluster \"{}\"", cs.name));
    cs.display_name = Str(c, "displayName", where, false);
    cs.region = Str(c, "region", where, false);
    const YAML::Node pools = c["nodePools"];
    if (!pools || !pools.IsSequence()) Fail(where + ".nodePools", "expected a list");
    std::set<std::string> pool_names;
    for (size_t j = 0; j < pools.size(); ++j) {
      const std::string pw = fmt::format("{}.nodePools[{}]", where, j);
      const YAML::Node p = pools[j];
      if (!p.IsMap()) Fail(pw, "expected a mapping");
      CheckKeys(p, {"name", "count", "model", "gpusPerNode", "cpuCores", "memoryGiB", "migNodes",
                    "migLayouts"}, pw);
      NodePoolSpec np;
      np.name = Str(p, "name", pw, true);
      if (!model::ValidateName(np.name).ok() || np.name.find('.') != std::string::npos) {
        Fail(pw + ".name", fmt::format("\"{}\" must be a DNS label", np.name));
      }
      if (!pool_names.insert(np.name).second) Fail(pw + ".name", "duplicate node pool");
      np.count = Int(p, "count", pw, 0, 1, 100000);
      if (np.count == 0) Fail(pw + ".count", "required");
      np.model = Str(p, "model", pw, true);
      const catalog::GpuModel* m = catalog::FindModel(np.model);
      if (m == nullptr) {
        Fail(pw + ".model", fmt::format("unknown GPU model \"{}\" (see gpuaas catalog models)", np.model));
      }
      np.model = std::string(m->name);
      np.gpus_per_node = Int(p, "gpusPerNode", pw, 8, 1, 16);
      np.cpu_cores = Int(p, "cpuCores", pw, 128, 1, 4096);
      np.memory_gib = Int(p, "memoryGiB", pw, 1024, 1, 1 << 20);
      np.mig_nodes = Int(p, "migNodes", pw, 0, 0, np.count);
      if (const YAML::Node layouts = p["migLayouts"]) {
        if (!layouts.IsSequence()) Fail(pw + ".migLayouts", "expected a list of layouts");
        for (size_t k = 0; k < layouts.size(); ++k) {
          const std::string lw = fmt::format("{}.migLayouts[{}]", pw, k);
          if (!layouts[k].IsScalar()) Fail(lw, "expected a layout such as \"3g.71gb@0 3g.71gb@4\"");
          std::string text = layouts[k].as<std::string>();
          absl::StatusOr<catalog::Layout> l = catalog::ParseLayout(*m, text);
          if (!l.ok()) Fail(lw, std::string(l.status().message()));
          if (l->empty()) Fail(lw, "empty layout");
          np.mig_layouts.push_back(catalog::FormatLayout(*l));
        }
      }
      if (np.mig_nodes > 0 && np.mig_layouts.empty()) Fail(pw + ".migLayouts", "required when migNodes > 0");
      if (np.mig_nodes > 0 && !m->mig_capable) Fail(pw + ".migNodes", fmt::format("{} does not support MIG", m->name));
      cs.node_pools.push_back(std::move(np));
    }
    fleet.clusters.push_back(std::move(cs));
  }
  return fleet;
}

std::string GpuUuid(std::string_view cluster, std::string_view node, int index) {
  return "GPU-" + StableUuid(fmt::format("{}/{}/{}", cluster, node, index));
}

ObservedCluster Build(const ClusterSpec& spec) {
  ObservedCluster oc;
  oc.name = spec.name;
  oc.display_name = spec.display_name;
  oc.region = spec.region;
  oc.driver = "simulated";
  for (const NodePoolSpec& np : spec.node_pools) {
    const catalog::GpuModel* m = catalog::FindModel(np.model);
    const std::string product(m->products.empty() ? m->name : m->products.front());
    // Memory as NVML reports it: a little under the marketing size (an H100 80GB shows 81559 MiB).
    const int64_t memory_mib = static_cast<int64_t>(m->memory_gb) * 1024 * 995 / 1000;
    size_t layout_i = 0;
    for (int n = 0; n < np.count; ++n) {
      ObservedNode node;
      node.name = np.count >= 100 ? fmt::format("{}-{:04}", np.name, n + 1)
                                  : fmt::format("{}-{:02}", np.name, n + 1);
      node.gpu_product = product;
      node.cpu_cores = np.cpu_cores;
      node.memory_bytes = static_cast<int64_t>(np.memory_gib) << 30;
      node.labels = {{"nvidia.com/gpu.product", product},
                     {"nvidia.com/gpu.count", std::to_string(np.gpus_per_node)},
                     {"nvidia.com/mig.capable", m->mig_capable ? "true" : "false"},
                     {"gpuaas.io/node-pool", np.name}};
      const bool mig = n < np.mig_nodes;
      if (mig) {
        node.labels["nvidia.com/mig.strategy"] = "mixed";
        node.labels["nvidia.com/mig.config.state"] = "success";
      }
      for (int g = 0; g < np.gpus_per_node; ++g) {
        ObservedGpu gpu;
        gpu.index = g;
        gpu.uuid = GpuUuid(spec.name, node.name, g);
        gpu.memory_mib = memory_mib;
        gpu.mig_enabled = mig;
        if (mig) {
          const std::string& text = np.mig_layouts[layout_i++ % np.mig_layouts.size()];
          catalog::Layout layout = *catalog::ParseLayout(*m, text);  // validated at parse
          for (const catalog::Instance& inst : layout) {
            ObservedMigInstance mi;
            mi.profile = std::string(inst.profile->name);
            mi.start = inst.start;
            mi.size = inst.profile->memory_slices;
            mi.uuid = "MIG-" + StableUuid(fmt::format("{}/{}", gpu.uuid, inst.start));
            gpu.mig_instances.push_back(std::move(mi));
          }
        }
        node.gpus.push_back(std::move(gpu));
      }
      oc.nodes.push_back(std::move(node));
    }
  }
  return oc;
}

}  // namespace

absl::StatusOr<FleetSpec> ParseFleet(std::string_view yaml_text) {
  try {
    return ParseNode(YAML::Load(std::string(yaml_text)));
  } catch (const ParseError& e) {
    return absl::InvalidArgumentError(fmt::format("fleet: {}", e.message));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("fleet: {}", e.what()));
  }
}

absl::StatusOr<FleetSpec> LoadFleetFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot read fleet file {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<FleetSpec> f = ParseFleet(ss.str());
  if (!f.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", path, f.status().message()));
  return f;
}

const FleetSpec& DemoFleet() {
  static const FleetSpec kDemo = *ParseFleet(R"yaml(
clusters:
  - name: alpha
    displayName: Alpha (us-east)
    region: us-east
    nodePools:
      - name: h200
        count: 6
        model: H200-SXM-141GB
        cpuCores: 192
        memoryGiB: 2048
        migNodes: 2
        migLayouts:
          - 3g.71gb@0 3g.71gb@4
          - 4g.71gb@0 2g.35gb@4 1g.18gb@6
          - 2g.35gb@0 2g.35gb@2 2g.35gb@4 1g.18gb@6
          - 1g.18gb@0 1g.18gb@1 1g.18gb@2 1g.18gb@3 1g.18gb@4 1g.18gb@5 1g.18gb@6
      - name: h100
        count: 4
        model: H100-SXM5-80GB
        cpuCores: 112
        memoryGiB: 2048
        migNodes: 1
        migLayouts:
          - 3g.40gb@4 2g.20gb@0 1g.10gb@2 1g.10gb@3
          - 7g.80gb@0
  - name: beta
    displayName: Beta (eu-west)
    region: eu-west
    nodePools:
      - name: a100
        count: 4
        model: A100-80GB
        cpuCores: 128
        memoryGiB: 1024
        migNodes: 2
        migLayouts:
          - 3g.40gb@0 3g.40gb@4
          - 1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6
      - name: h100
        count: 4
        model: H100-SXM5-80GB
        cpuCores: 112
        memoryGiB: 2048
)yaml");
  return kDemo;
}

FleetSpec SyntheticFleet(int gpus, int clusters) {
  const int nodes = std::max(1, (gpus + 7) / 8);
  FleetSpec f;
  for (int c = 0; c < clusters; ++c) {
    ClusterSpec cs;
    cs.name = fmt::format("bench-{}", c + 1);
    cs.region = "bench";
    int share = nodes / clusters + (c < nodes % clusters ? 1 : 0);
    struct { const char* name; const char* model; const char* layout; } kinds[] = {
        {"h200", "H200-SXM-141GB", "3g.71gb@0 2g.35gb@4 1g.18gb@6"},
        {"h100", "H100-SXM5-80GB", "3g.40gb@0 3g.40gb@4"},
        {"a100", "A100-80GB", "2g.20gb@0 2g.20gb@2 2g.20gb@4 1g.10gb@6"}};
    for (int k = 0; k < 3; ++k) {
      int count = share / 3 + (k < share % 3 ? 1 : 0);
      if (count == 0) continue;
      NodePoolSpec np{kinds[k].name, count, kinds[k].model, 8, 128, 1024, count / 4, {kinds[k].layout}};
      cs.node_pools.push_back(np);
    }
    f.clusters.push_back(std::move(cs));
  }
  return f;
}

SimulatedCluster::SimulatedCluster(ClusterSpec spec)
    : spec_(std::move(spec)), state_(Build(spec_)) {}

bool SimulatedCluster::Watch(std::function<void()> on_change) {
  on_change_ = std::move(on_change);
  return true;
}

void SimulatedCluster::Changed() {
  if (on_change_) on_change_();
}

absl::StatusOr<ObservedCluster> SimulatedCluster::Observe() {
  ObservedCluster out;
  bool pending = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The simulated MIG manager: apply changes whose delay has passed.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->wait-- > 0) {
        ++it;
        continue;
      }
      ObservedGpu* g = FindGpu(it->gpu_uuid);
      if (fail_next_ > 0) {
        --fail_next_;
        mig_state_[it->node] = {"failed", fmt::format("simulated failure applying a layout to {}", it->gpu_uuid)};
      } else if (g != nullptr) {
        // Instances that stay (same profile and start) keep their UUID and their pods; the others
        // are destroyed and created anew, as `nvidia-smi mig -dgi/-cgi` would.
        std::vector<ObservedMigInstance> next;
        for (ObservedMigInstance mi : it->instances) {
          auto same = std::find_if(g->mig_instances.begin(), g->mig_instances.end(), [&](const ObservedMigInstance& o) {
            return g->mig_enabled && o.profile == mi.profile && o.start == mi.start;
          });
          if (same != g->mig_instances.end()) {
            next.push_back(*same);
            continue;
          }
          mi.uuid = "MIG-" + StableUuid(fmt::format("{}/{}/{}/{}", g->uuid, mi.profile, mi.start, ++generation_));
          mi.in_use = false;
          next.push_back(std::move(mi));
        }
        g->mig_enabled = it->mig_enabled;
        g->mig_instances = it->mig_enabled ? std::move(next) : std::vector<ObservedMigInstance>{};
        mig_state_[it->node] = {"success", ""};
      }
      it = pending_.erase(it);
    }
    out = state_;
    pending = !pending_.empty();
  }
  // A change still waiting for its delay: the MIG manager keeps working, so look again.
  if (pending) Changed();
  return out;
}

ObservedGpu* SimulatedCluster::FindGpu(const std::string& uuid) {
  for (ObservedNode& n : state_.nodes) {
    for (ObservedGpu& g : n.gpus) {
      if (g.uuid == uuid) return &g;
    }
  }
  return nullptr;
}

absl::Status SimulatedCluster::ApplyMigLayout(const std::string& node, const std::string& gpu_uuid,
                                              bool mig_enabled,
                                              const std::vector<ObservedMigInstance>& instances) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ObservedGpu* g = FindGpu(gpu_uuid);
    if (g == nullptr) return absl::NotFoundError(fmt::format("no GPU {} in cluster {}", gpu_uuid, spec_.name));
    // The GPU Operator evicts GPU pods before it reconfigures; gpuaas never asks while work runs,
    // and the simulation refuses, so that a caller that did would be caught.
    // A change may add instances next to running ones, but must not remove a busy instance or
    // switch the MIG mode of a GPU with work on it.
    bool busy = g->in_use && mig_enabled != g->mig_enabled;
    for (const ObservedMigInstance& m : g->mig_instances) {
      const bool kept = mig_enabled && std::any_of(instances.begin(), instances.end(), [&](const ObservedMigInstance& n) {
        return n.profile == m.profile && n.start == m.start;
      });
      busy = busy || (m.in_use && !kept);
    }
    if (g->in_use && mig_enabled) busy = true;
    if (busy) {
      return absl::FailedPreconditionError(fmt::format("GPU {} runs workloads; refusing to change its MIG layout", gpu_uuid));
    }
    // Check the layout as the MIG manager would: a real GPU refuses illegal geometry.
    std::vector<ObservedMigInstance> sized = instances;
    if (mig_enabled) {
      const std::string product = [&] {
        for (const ObservedNode& n : state_.nodes) {
          for (const ObservedGpu& x : n.gpus) {
            if (x.uuid == gpu_uuid) return n.gpu_product;
          }
        }
        return std::string();
      }();
      absl::StatusOr<const catalog::GpuModel*> m = catalog::ModelFromProduct(product);
      if (!m.ok()) return m.status();
      catalog::Layout layout;
      for (ObservedMigInstance& mi : sized) {
        const catalog::MigProfile* p = catalog::FindProfile(**m, mi.profile);
        if (p == nullptr) return absl::InvalidArgumentError(fmt::format("{} has no profile {}", (*m)->name, mi.profile));
        mi.size = p->memory_slices;
        layout.push_back({p, mi.start});
      }
      if (absl::Status s = catalog::ValidateLayout(**m, layout); !s.ok()) return s;
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [&](const PendingChange& c) { return c.gpu_uuid == gpu_uuid; }),
                   pending_.end());
    pending_.push_back({node, gpu_uuid, mig_enabled, std::move(sized), mig_delay_});
    mig_state_[node] = {"pending", ""};
  }
  Changed();
  return absl::OkStatus();
}

ClusterDriver::MigState SimulatedCluster::NodeMigState(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mig_state_.find(node);
  return it == mig_state_.end() ? MigState{} : it->second;
}

void SimulatedCluster::SetMigDelay(int observations) {
  std::lock_guard<std::mutex> lock(mu_);
  mig_delay_ = observations;
}

void SimulatedCluster::FailNextMigChanges(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_ = n;
}

void SimulatedCluster::SetHealthy(const std::string& gpu_uuid, bool healthy) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ObservedGpu* g = FindGpu(gpu_uuid)) g->healthy = healthy;
  }
  Changed();
}

void SimulatedCluster::SetInUse(const std::string& uuid, bool in_use) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (ObservedNode& n : state_.nodes) {
      for (ObservedGpu& g : n.gpus) {
        if (g.uuid == uuid) g.in_use = in_use;
        for (ObservedMigInstance& m : g.mig_instances) {
          if (m.uuid == uuid) m.in_use = in_use;
        }
      }
    }
  }
  Changed();
}

std::vector<std::unique_ptr<ClusterDriver>> MakeDrivers(const FleetSpec& fleet) {
  std::vector<std::unique_ptr<ClusterDriver>> out;
  for (const ClusterSpec& c : fleet.clusters) out.push_back(std::make_unique<SimulatedCluster>(c));
  return out;
}

}  // namespace gpuaas::cluster::simulated
