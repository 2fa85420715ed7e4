#include "model/summary.h"

#include "gtest/gtest.h"

namespace gpuaas::model {
namespace {

GpuCapacity Gpu(std::string model, bool mig, std::vector<MigInstance> insts, bool allocated,
                Health h = Health::kHealthy) {
  GpuCapacity g;
  g.spec.model = std::move(model);
  g.status.mig_mode = mig ? MigMode::kEnabled : MigMode::kDisabled;
  g.status.mig_instances = std::move(insts);
  g.status.allocated = allocated;
  g.status.health = h;
  return g;
}

TEST(Summary, CountsPhysicalAndLogicalDevices) {
  std::vector<GpuCapacity> gpus = {
      Gpu("H200-SXM-141GB", true, {{"3g.71gb", 0, 4, "a", true}, {"3g.71gb", 4, 4, "b", false}}, false),
      Gpu("H200-SXM-141GB", false, {}, true),
      Gpu("H200-SXM-141GB", false, {}, false, Health::kUnhealthy),
      Gpu("A100-80GB", true, {{"1g.10gb", 0, 1, "c", false}}, false),
  };
  FleetSummary s = Summarize(gpus);
  EXPECT_EQ(s.physical.gpus, 4);
  EXPECT_EQ(s.physical.mig_enabled, 2);
  EXPECT_EQ(s.physical.full, 2);
  EXPECT_EQ(s.physical.unhealthy, 1);
  EXPECT_EQ(s.by_model.at("H200-SXM-141GB").gpus, 3);
  auto mig = s.logical.at({"H200-SXM-141GB", "3g.71gb"});
  EXPECT_EQ(mig.count, 2);
  EXPECT_EQ(mig.allocated, 1);
  EXPECT_EQ(mig.free(), 1);
  EXPECT_EQ(s.logical.at({"H200-SXM-141GB", "full"}).count, 2);
  EXPECT_EQ(s.logical.at({"H200-SXM-141GB", "full"}).allocated, 1);
  EXPECT_EQ(s.logical_total.count, 5);
  EXPECT_EQ(s.logical_total.allocated, 2);
}

TEST(Summary, AvailableLeavesOutUnhealthyGpusAndClustersAreCountedApart) {
  std::vector<GpuCapacity> gpus = {
      Gpu("H200-SXM-141GB", false, {}, false),
      Gpu("H200-SXM-141GB", false, {}, false, Health::kUnhealthy),
      Gpu("H200-SXM-141GB", false, {}, true),
      Gpu("H200-SXM-141GB", true, {{"1g.18gb", 0, 1, "a", false}, {"1g.18gb", 1, 1, "b", true}}, false,
          Health::kUnhealthy),
  };
  gpus[0].spec.cluster = "alpha";
  gpus[1].spec.cluster = "alpha";
  gpus[2].spec.cluster = "beta";
  gpus[0].spec.node = "alpha.n1";
  gpus[1].spec.node = "alpha.n1";
  gpus[2].spec.node = "beta.n1";
  gpus[3].spec.node = "n9";
  FleetSummary s = Summarize(gpus);
  const auto& full = s.logical.at({"H200-SXM-141GB", "full"});
  EXPECT_EQ(full.free(), 2);
  EXPECT_EQ(full.available, 1);  // the unhealthy GPU's free device cannot be handed out
  EXPECT_EQ(s.logical.at({"H200-SXM-141GB", "1g.18gb"}).available, 0);
  EXPECT_EQ(s.logical_total.available, 1);
  EXPECT_EQ(s.by_cluster.at("alpha").gpus, 2);
  EXPECT_EQ(s.by_cluster.at("alpha").unhealthy, 1);
  EXPECT_EQ(s.by_cluster.at("beta").gpus, 1);
  EXPECT_EQ(s.by_cluster.at("unknown").mig_enabled, 1);
  EXPECT_EQ(s.by_cluster.at("alpha").nodes, 1);  // two GPUs, one node
  EXPECT_EQ(s.physical.nodes, 3);
  EXPECT_EQ(s.by_model.at("H200-SXM-141GB").nodes, 3);
}

}  // namespace
}  // namespace gpuaas::model

namespace gpuaas::model {
namespace {

TEST(Summary, DevicesHeldByLivePoolsAreAllocatedThoughIdle) {
  std::vector<GpuCapacity> gpus = {
      Gpu("H200-SXM-141GB", true, {{"3g.71gb", 0, 4, "a", false}, {"3g.71gb", 4, 4, "b", false}}, false),
      Gpu("H200-SXM-141GB", false, {}, false),
      Gpu("H200-SXM-141GB", false, {}, false),
  };
  gpus[0].spec.uuid = "GPU-M";
  gpus[1].spec.uuid = "GPU-1";
  gpus[2].spec.uuid = "GPU-2";
  GpuPool live;
  live.status.approval = GpuPool::Approval{true, "ok", "ops", {}};
  live.status.allocation = {{"c", "n", "GPU-M", "3g.71gb", 4, "b"}, {"c", "n", "GPU-1", "full", 0, ""}};
  GpuPool rejected;
  rejected.status.approval = GpuPool::Approval{false, "no", "ops", {}};
  rejected.status.allocation = {{"c", "n", "GPU-2", "full", 0, ""}};
  const HeldDevices held = HeldByPools(std::vector<GpuPool>{live, rejected});
  EXPECT_EQ(held.size(), 2u);
  FleetSummary s = Summarize(gpus, held);
  EXPECT_EQ(s.logical.at({"H200-SXM-141GB", "3g.71gb"}).allocated, 1);  // the one at 4
  EXPECT_EQ(s.logical.at({"H200-SXM-141GB", "3g.71gb"}).available, 1);
  EXPECT_EQ(s.logical.at({"H200-SXM-141GB", "full"}).allocated, 1);     // GPU-1; GPU-2's pool was rejected
  EXPECT_EQ(s.logical.at({"H200-SXM-141GB", "full"}).available, 1);
}

}  // namespace
}  // namespace gpuaas::model
