// Placement decisions per second on the 1,213-node cluster of the Alibaba GPU trace (Weng et al.,
// ATC'23): the arrival protocol on the default pod list (about 10,800 pods, 130% of the GPU
// capacity), one thread, every policy. One decision = one pod filtered and scored against every
// node and placed (or found not to fit). The reference point is kube-scheduler's published
// throughput threshold for 5,000-node clusters (about 680 pods/s, see docs/packing.md).
//
// Usage: build/release/bench/packing_bench [NODES.csv PODS.csv [SEEDS]]  (run from the repo root)
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "allocator/packing.h"
#include "sim/replay.h"
#include "sim/trace.h"

namespace {

std::string Read(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  const char* nodes_path =
      argc > 2 ? argv[1] : "test/testdata/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv";
  const char* pods_path =
      argc > 2 ? argv[2] : "test/testdata/traces/alibaba-gpu-v2023/openb_pod_list_default.csv";
  const int seeds = argc > 3 ? std::atoi(argv[3]) : 3;
  auto nodes = gpuaas::sim::ParseNodes(Read(nodes_path));
  auto pods = gpuaas::sim::ParsePods(Read(pods_path));
  if (!nodes.ok() || !pods.ok()) {
    std::fprintf(stderr, "cannot read the trace: %s %s\n",
                 std::string(nodes.status().message()).c_str(),
                 std::string(pods.status().message()).c_str());
    return 1;
  }
  constexpr double kKubeSchedulerPodsPerSecond = 680;
  std::printf("%zu nodes, %zu trace pods, %d seeds, one thread\n", nodes->size(), pods->size(),
              seeds);
  std::printf("%-8s %12s %12s %14s %10s\n", "policy", "decisions", "seconds", "decisions/s",
              "x k8s");
  for (const std::string& name : gpuaas::sim::PolicyNames()) {
    int64_t decisions = 0;
    double seconds = 0;
    for (int s = 0; s < seeds; ++s) {
      const gpuaas::sim::ArrivalResult r = gpuaas::sim::RunArrival(*nodes, *pods, name, 42 + s);
      decisions += r.pods;
      seconds += r.seconds;
    }
    const double rate = static_cast<double>(decisions) / seconds;
    std::printf("%-8s %12lld %12.3f %14.0f %10.1f\n", name.c_str(),
                static_cast<long long>(decisions), seconds, rate,
                rate / kKubeSchedulerPodsPerSecond);
  }
  return 0;
}
