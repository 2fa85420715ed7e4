// Catalogue and codec costs that the allocator and the read path pay per decision or per object.
#include <benchmark/benchmark.h>

#include "catalog/catalog.h"
#include "model/codec.h"

namespace {

using namespace gpuaas;

void BM_ValidateLayout(benchmark::State& state) {
  const catalog::GpuModel& m = *catalog::FindModel("H200-SXM-141GB");
  catalog::Layout l = *catalog::ParseLayout(m, "2g.35gb@0 1g.18gb@2 1g.18gb@3 3g.71gb@4");
  for (auto _ : state) benchmark::DoNotOptimize(catalog::ValidateLayout(m, l));
}
BENCHMARK(BM_ValidateLayout);

void BM_FreeStarts(benchmark::State& state) {
  const catalog::GpuModel& m = *catalog::FindModel("H200-SXM-141GB");
  catalog::Layout l = *catalog::ParseLayout(m, "3g.71gb@0 1g.18gb@4");
  const catalog::MigProfile& p = *catalog::FindProfile(m, "1g.18gb");
  for (auto _ : state) benchmark::DoNotOptimize(catalog::FreeStarts(m, l, p));
}
BENCHMARK(BM_FreeStarts);

void BM_MaximalLayouts(benchmark::State& state) {
  const catalog::GpuModel& m = *catalog::FindModel("H200-SXM-141GB");
  for (auto _ : state) benchmark::DoNotOptimize(catalog::MaximalLayouts(m));
}
BENCHMARK(BM_MaximalLayouts);

void BM_GpuCapacityDecode(benchmark::State& state) {
  model::GpuCapacity g;
  g.metadata.name = "gpu-5a3b1c2d-0000-4000-8000-000000000001";
  g.metadata.labels = {{"gpuaas.io/cluster", "alpha"}, {"gpuaas.io/node", "h200-01"}};
  g.spec = {"alpha", "alpha.h200-01", "GPU-5a3b1c2d-0000-4000-8000-000000000001", 3,
            "H200-SXM-141GB", "NVIDIA-H200", 143771, true};
  g.status.mig_mode = model::MigMode::kEnabled;
  g.status.mig_instances = {{"3g.71gb", 0, 4, "MIG-a", false}, {"3g.71gb", 4, 4, "MIG-b", false}};
  const std::string json = model::Encode(g);
  for (auto _ : state) benchmark::DoNotOptimize(model::Decode<model::GpuCapacity>(json));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json.size()));
}
BENCHMARK(BM_GpuCapacityDecode);

}  // namespace
