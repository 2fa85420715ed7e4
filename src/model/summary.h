// The fleet at a glance: physical GPUs by model and cluster, MIG versus full, and logical devices
// (full GPUs and MIG instances) by model and profile, allocated and free. A device is allocated
// when a live pool holds it (dedicated to that project, whether or not a workload runs on it) or
// the cluster reports it in use. Pure functions over GpuCapacity and GpuPool.
#ifndef GPUAAS_MODEL_SUMMARY_H_
#define GPUAAS_MODEL_SUMMARY_H_

#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <set>
#include <string_view>

#include "model/fleet.h"
#include "model/pool.h"

namespace gpuaas::model {

struct FleetSummary {
  struct ModelCount {
    int64_t gpus = 0;
    int64_t mig_enabled = 0;
    int64_t full = 0;
    int64_t unhealthy = 0;
    int64_t nodes = 0;  // distinct nodes holding these GPUs
  };
  struct DeviceCount {
    int64_t count = 0;
    int64_t allocated = 0;  // held by a pool or in use
    // Free devices on GPUs that are not unhealthy: what can be handed out now without
    // reconfiguring anything (an unhealthy GPU's free devices are out of allocation).
    int64_t available = 0;
    int64_t free() const { return count - allocated; }
  };
  ModelCount physical;                          // all models
  std::map<std::string, ModelCount> by_model;   // keyed by model
  std::map<std::string, ModelCount> by_cluster; // keyed by cluster
  // Logical devices keyed by (model, profile); profile "full" for whole GPUs.
  std::map<std::pair<std::string, std::string>, DeviceCount> logical;
  DeviceCount logical_total;
};

// Devices held by live pools: (GPU UUID as the inventory spells it, MIG placement start), with
// start -1 for a whole GPU.
using HeldDevices = std::set<std::pair<std::string, int64_t>, std::less<>>;
HeldDevices HeldByPools(std::span<const GpuPool> pools);
inline bool Held(const HeldDevices& held, std::string_view uuid, int64_t start) {
  return held.find(std::make_pair(std::string(uuid), start)) != held.end();
}

// What one GPU adds to the summary, apart from the fleet: its counts and its logical devices,
// each allocated when the cluster reports it in use or a live pool holds it (`held`, as it
// stood when the part was made; Rehold brings it up to date).
struct GpuPart {
  std::string uuid;
  std::string model;  // "unknown" when the GPU names none
  std::string cluster;
  std::string node;
  bool mig = false;
  bool unhealthy = false;
  struct Device {
    std::string profile;  // "full" for a whole GPU
    int64_t start = -1;   // MIG placement start; -1 for a whole GPU
    bool in_use = false;  // as the cluster reports it
    bool held = false;    // by a live pool
  };
  std::vector<Device> devices;
};
GpuPart PartOf(const GpuCapacity& gpu, const HeldDevices& held);
// Sets each device's `held` from `held`; true when one changed.
bool Rehold(GpuPart& part, const HeldDevices& held);

// The summary kept as GPUs come, change and go: each GpuPart is added when it appears and taken
// out exactly as it was added when it changes or leaves, so the summary equals Summarize over
// the GPUs present at every step (nodes are counted by how many GPUs each still has). An entry
// whose GPUs are all gone leaves the summary. Thread-compatible.
class FleetTally {
 public:
  void Add(const GpuPart& part) { Apply(part, 1); }
  void Remove(const GpuPart& part) { Apply(part, -1); }
  const FleetSummary& summary() const { return summary_; }

 private:
  void Apply(const GpuPart& part, int sign);
  FleetSummary summary_;
  std::map<std::pair<std::string, std::string>, int64_t> gpus_on_node_;        // (cluster, node)
  std::map<std::pair<std::string, std::string>, int64_t> model_gpus_on_node_;  // (model, node)
};

FleetSummary Summarize(std::span<const GpuCapacity> gpus, const HeldDevices& held = {});
FleetSummary Summarize(std::span<const GpuCapacity* const> gpus, const HeldDevices& held = {});

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_SUMMARY_H_
