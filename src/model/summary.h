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

FleetSummary Summarize(std::span<const GpuCapacity> gpus, const HeldDevices& held = {});
FleetSummary Summarize(std::span<const GpuCapacity* const> gpus, const HeldDevices& held = {});

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_SUMMARY_H_
