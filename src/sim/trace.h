// Cluster traces in the CSV format of the Alibaba GPU cluster trace (cluster-trace-gpu-v2023,
// the `openb_*` files of Weng et al., ATC'23): a node list and a pod list. Parsing only: the
// caller reads the files. Thread-compatible, no I/O.
//
// Node columns (by header name, any order): sn, cpu_milli, memory_mib, gpu, model.
// Pod columns: name, cpu_milli, memory_mib, num_gpu, gpu_milli, and optionally gpu_spec
// (allowed models joined by '|'), creation_time and deletion_time (seconds).
#ifndef GPUAAS_SIM_TRACE_H_
#define GPUAAS_SIM_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/packing.h"

namespace gpuaas::sim {

struct TracePod {
  std::string name;
  allocator::PodShape shape;
  int64_t creation_time = -1;  // -1: not in the file
  int64_t deletion_time = -1;
};

// The nodes of a node list. InvalidArgument names the line and column of the first bad field
// (missing column, not a number, negative, more GPUs than a node may have).
absl::StatusOr<std::vector<allocator::NodeSpec>> ParseNodes(std::string_view csv);

// The pods of a pod list, in file order. InvalidArgument names the line and field: gpu_milli
// outside 0..1000, a multi-GPU pod asking for part of a GPU, a GPU share without a GPU, and so on.
absl::StatusOr<std::vector<TracePod>> ParsePods(std::string_view csv);

}  // namespace gpuaas::sim

#endif  // GPUAAS_SIM_TRACE_H_
