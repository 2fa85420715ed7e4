// The simulated cluster driver: an in-process fleet described by a small YAML (or JSON) file,
// used by `make run`, the tests and the benchmarks. Each cluster of the file becomes one
// SimulatedCluster driver; GPU and MIG UUIDs are derived from names, so a restart sees the same
// devices.
//
// File format (JSON works too, being YAML):
//   clusters:
//     - name: alpha                 # DNS-1123 label
//       displayName: Alpha (us-east)
//       region: us-east
//       nodePools:
//         - name: h200              # nodes are named h200-01, h200-02, ...
//           count: 6
//           model: H200-SXM-141GB   # catalogue name (gpuaas catalog models)
//           gpusPerNode: 8
//           cpuCores: 192
//           memoryGiB: 2048
//           migNodes: 2             # the first 2 nodes run MIG ...
//           migLayouts:             # ... with these layouts, cycled over their GPUs
//             - 3g.71gb@0 3g.71gb@4
//             - 4g.71gb 2g.35gb 1g.18gb   # starts are optional
#ifndef GPUAAS_CLUSTER_SIMULATED_FLEET_H_
#define GPUAAS_CLUSTER_SIMULATED_FLEET_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/driver.h"

namespace gpuaas::cluster::simulated {

struct NodePoolSpec {
  std::string name;
  int count = 0;
  std::string model;
  int gpus_per_node = 8;
  int cpu_cores = 128;
  int memory_gib = 1024;
  int mig_nodes = 0;
  std::vector<std::string> mig_layouts;
};

struct ClusterSpec {
  std::string name;
  std::string display_name;
  std::string region;
  std::vector<NodePoolSpec> node_pools;
};

struct FleetSpec {
  std::vector<ClusterSpec> clusters;
};

// Parses and validates a fleet file's text: unknown models, illegal MIG layouts, bad names and
// duplicate clusters fail with InvalidArgument naming the place ("clusters[0].nodePools[1]...").
absl::StatusOr<FleetSpec> ParseFleet(std::string_view yaml_text);
absl::StatusOr<FleetSpec> LoadFleetFile(const std::string& path);

// The demo fleet of `make run`: two clusters, 18 nodes of 8 GPUs (H200, H100, A100), some in MIG.
const FleetSpec& DemoFleet();

// A uniform fleet of about `gpus` GPUs (H200/H100/A100 nodes of 8, a quarter of them in MIG),
// split over `clusters` clusters; for benchmarks.
FleetSpec SyntheticFleet(int gpus, int clusters);

// One simulated cluster. Thread-safe.
class SimulatedCluster final : public ClusterDriver {
 public:
  explicit SimulatedCluster(ClusterSpec spec);
  std::string_view ClusterName() const override { return spec_.name; }
  absl::StatusOr<ObservedCluster> Observe() override;
  absl::Status ApplyMigLayout(const std::string& node, const std::string& gpu_uuid, bool mig_enabled,
                              const std::vector<ObservedMigInstance>& instances) override;
  MigState NodeMigState(const std::string& node) override;
  // Tells of every change: a layout asked for (and each observation while one is pending), a
  // device taken or freed.
  bool Watch(std::function<void()> on_change) override;

  // Simulation controls for tests and demos.
  // Applies requested layouts only after `n` further Observe calls (0: at the next one).
  void SetMigDelay(int observations);
  // Makes the next `n` layout changes fail, as a MIG manager that cannot apply a config does.
  void FailNextMigChanges(int n);
  // Marks a device (GPU or MIG UUID) as used by a pod, or not.
  void SetInUse(const std::string& uuid, bool in_use);
  // Marks a GPU healthy or not, as the device plugin reports it.
  void SetHealthy(const std::string& gpu_uuid, bool healthy);

 private:
  struct PendingChange {
    std::string node;
    std::string gpu_uuid;
    bool mig_enabled;
    std::vector<ObservedMigInstance> instances;
    int wait;
  };
  ObservedGpu* FindGpu(const std::string& uuid);  // with mu_ held
  void Changed();                                  // without mu_ held
  std::function<void()> on_change_;                // set once, before use
  ClusterSpec spec_;
  std::mutex mu_;
  ObservedCluster state_;                        // guarded by mu_
  std::vector<PendingChange> pending_;           // guarded by mu_
  std::map<std::string, MigState> mig_state_;    // by node; guarded by mu_
  int mig_delay_ = 0;                            // guarded by mu_
  int fail_next_ = 0;                            // guarded by mu_
  uint64_t generation_ = 0;                      // makes each created instance's UUID new
};

std::vector<std::unique_ptr<ClusterDriver>> MakeDrivers(const FleetSpec& fleet);

}  // namespace gpuaas::cluster::simulated

#endif  // GPUAAS_CLUSTER_SIMULATED_FLEET_H_
