// MIG mode of the trace replay: what if the trace's GPU-sharing pods ran on MIG instances of a
// Hopper GPU instead of time-shared slices? Each sharing pod gets the smallest MIG profile of
// the model whose memory share (memory slices / the GPU's memory slices) holds its GPU share;
// whole-GPU pods take whole GPUs (MIG disabled); every node of the node list gets the model.
//
// GPU pods are placed by the pool allocator itself (allocator::Allocate with the "default"
// profile, on a FleetSnapshot of the node list): a pod is a request of one one-node item with
// its CPU and memory, so what this mode measures is what the product does. CPU-only pods stand
// for the Kubernetes scheduler's other work: they go on the node with the least CPU left that
// holds them, and take from the room the allocator sees. Ties go to the first node in an order
// drawn once per seed (sim/replay.h, NodeOrder). Pure computation; thread-compatible.
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

// The arrival protocol's workload (sim/replay.h: sampled to `tune` x capacity, shuffled with
// the seed, no departures).
MigResult RunMig(const std::vector<allocator::NodeSpec>& nodes, const std::vector<TracePod>& pods,
                 const MigModel& model, uint64_t seed, double tune);

struct MigChurnResult {
  uint64_t seed = 0;
  int64_t requests = 0;  // GPU pods that arrived
  int64_t accepted = 0;
  int64_t failed = 0;
  // Failed although the free compute and memory slices of the GPUs on nodes with the pod's CPU
  // and memory added up to enough: scattered over GPUs, or behind free instances of other
  // profiles.
  int64_t failed_fragmented = 0;
  int64_t failed_fragmented_mig = 0;  // of those, pods of a MIG profile (the others: whole GPUs)
  int64_t defrags = 0;            // defragmentation plans applied
  int64_t instances_removed = 0;  // free instances they destroyed
  int64_t recovered = 0;          // requests that failed, then fitted once defragmented
  double time_avg_alloc = 0;      // compute slices held by pods, % of all, over the arrival window
};

// Churn mode in MIG: pods arrive at creation_time / `speedup` and leave after their lifetime;
// a GPU pod that does not fit when it arrives fails (no queue). Released pods leave their MIG
// instances behind, free, as pools do. With `defrag`, a failure for fragmentation makes the
// replay apply the defragmentation planner's whole plan (allocator/defrag.h: free instances on
// GPUs in partial use are destroyed) and try the pod once more, as an operator who approves
// every plan at once would. Needs creation_time and deletion_time on every pod.
absl::StatusOr<MigChurnResult> RunMigChurn(const std::vector<allocator::NodeSpec>& nodes,
                                           const std::vector<TracePod>& pods, const MigModel& model,
                                           uint64_t seed, double speedup, bool defrag);

}  // namespace gpuaas::sim

#endif  // GPUAAS_SIM_MIG_H_
