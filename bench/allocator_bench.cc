// Allocator decisions per second on a 10,000-GPU fleet (H100/H200 mix, a quarter in MIG with part
// of their instances taken; every node's CPU and memory known, as BuildSnapshot gives them, a
// tenth of the nodes with most of their CPU requested by other pods). One decision = one Allocate call for a whole pool request. Each
// case runs twice: with the snapshot's index (what the product does) and visiting every GPU
// (scan, the baseline: the allocator before the index, deciding the same).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "allocator/allocator.h"

namespace {

using namespace gpuaas;

allocator::FleetSnapshot Fleet(int gpus) {
  allocator::FleetSnapshot f;
  std::mt19937 rng(7);
  const char* models[] = {"H200-SXM-141GB", "H100-SXM5-80GB"};
  for (int i = 0; i < gpus; ++i) {
    allocator::GpuState g;
    const int node = i / 8;
    g.cluster = node % 2 ? "beta" : "alpha";
    g.node = g.cluster + ".node-" + std::to_string(node);
    if (i % 8 == 0) {
      const int64_t taken = node % 10 == 3 ? 200000 : 16000;
      f.nodes.push_back({g.node, 224000 - taken, 2097152 - 65536, 28000, 262144});
    }
    g.node_room = static_cast<int32_t>(f.nodes.size() - 1);
    g.index = i % 8;
    g.uuid = "GPU-" + std::to_string(i);
    g.model = catalog::FindModel(models[node % 2]);
    if (node % 4 == 0) {
      g.mig_enabled = true;
      const catalog::Layout l = *catalog::ParseLayout(
          *g.model, node % 2 ? "3g.40gb@0 2g.20gb@4 1g.10gb@6" : "3g.71gb@0 2g.35gb@4 1g.18gb@6");
      for (const catalog::Instance& inst : l) {
        g.instances.push_back({inst.profile, inst.start, g.uuid + "-" + std::to_string(inst.start),
                               rng() % 2 ? "other/pool" : "", false});
      }
    } else {
      g.owner = rng() % 2 ? "other/pool" : "";
    }
    f.gpus.push_back(std::move(g));
  }
  // As BuildSnapshot orders them.
  std::sort(f.gpus.begin(), f.gpus.end(), [](const allocator::GpuState& a, const allocator::GpuState& b) {
    return std::tie(a.cluster, a.node, a.index) < std::tie(b.cluster, b.node, b.index);
  });
  return f;
}

void Run(benchmark::State& state, allocator::Request req) {
  static const allocator::FleetSnapshot fleet = [] {
    allocator::FleetSnapshot f = Fleet(10000);
    f.Reindex();
    return f;
  }();
  const allocator::Profile& profile = *allocator::ProfileByName("default");
  const bool scan = state.range(0) == 1;
  for (auto _ : state) {
    allocator::Outcome o = allocator::Allocate(fleet, req, profile, scan);
    if (o.code != allocator::Code::kSuccess) state.SkipWithError(o.reason.c_str());
    benchmark::DoNotOptimize(o);
  }
  state.counters["decisions/s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate);
}

void BM_Allocate_OneMigInstance(benchmark::State& state) {
  Run(state, {"p/a", "", {{"H200-SXM-141GB", "3g.71gb", 1}}});
}
BENCHMARK(BM_Allocate_OneMigInstance)->Unit(benchmark::kMicrosecond)->ArgName("scan")->Arg(0)->Arg(1);

void BM_Allocate_MixedPool(benchmark::State& state) {
  Run(state, {"p/a", "", {{"H200-SXM-141GB", "full", 2}, {"H200-SXM-141GB", "3g.71gb", 4}}});
}
BENCHMARK(BM_Allocate_MixedPool)->Unit(benchmark::kMicrosecond)->ArgName("scan")->Arg(0)->Arg(1);

void BM_Allocate_EightFullGpus(benchmark::State& state) {
  Run(state, {"p/a", "", {{"H100-SXM5-80GB", "full", 8}}});
}
BENCHMARK(BM_Allocate_EightFullGpus)->Unit(benchmark::kMicrosecond)->ArgName("scan")->Arg(0)->Arg(1);

// Building the index of the 10,000 GPUs (what BuildSnapshot, ApplyPlan and ReleasePool add).
void BM_IndexFleet(benchmark::State& state) {
  allocator::FleetSnapshot f = Fleet(10000);
  for (auto _ : state) {
    f.Reindex();
    benchmark::DoNotOptimize(f.index);
  }
}
BENCHMARK(BM_IndexFleet)->Unit(benchmark::kMicrosecond);

}  // namespace
