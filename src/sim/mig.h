// MIG mode of the trace replay: what if the trace's GPU-sharing pods ran on MIG instances of a
// Hopper GPU instead of time-shared slices? Each sharing pod gets the smallest MIG profile of
// the model whose memory share (memory slices / the GPU's memory slices) holds its GPU share;
// whole-GPU pods take whole GPUs (MIG disabled); every node of the node list gets the model.
// Placements obey the catalogue's rules (catalog::FreeStarts). The workload is the arrival
// protocol's (sim/replay.h: sampled to `tune` x capacity, shuffled with the seed, no
// departures). Pure computation; thread-compatible.
#ifndef GPUAAS_SIM_MIG_H_
#define GPUAAS_SIM_MIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/packing.h"
#include "catalog/catalog.h"
#include "sim/trace.h"

namespace gpuaas::sim {

using MigModel = catalog::GpuModel;

// A MIG-capable catalogue model by name; InvalidArgument for others.
absl::StatusOr<const MigModel*> FindMigModel(std::string_view name);

// The smallest profile of `model` (fewest memory slices, then compute slices; no +me profiles)
// whose memory share is at least gpu_milli / 1000; nullptr when gpu_milli needs a whole GPU.
const catalog::MigProfile* ProfileForShare(const MigModel& model, int32_t gpu_milli);

struct MigResult {
  uint64_t seed = 0;
  int64_t pods = 0;
  int64_t accepted = 0;
  double accepted_gpus = 0;  // GPU-equivalents of accepted pods (compute slices / 7 for MIG)
  int64_t gpus_used = 0;     // GPUs holding at least one pod
  double used_gpu_util = 0;  // accepted_gpus / gpus_used, %
};

// `own`: gpuaas's MIG-aware policy; otherwise best fit (fullest node, then the GPU with the
// fewest free slices that holds the profile, at its first free start).
MigResult RunMig(const std::vector<allocator::NodeSpec>& nodes, const std::vector<TracePod>& pods,
                 const MigModel& model, bool own, uint64_t seed, double tune);

}  // namespace gpuaas::sim

#endif  // GPUAAS_SIM_MIG_H_
