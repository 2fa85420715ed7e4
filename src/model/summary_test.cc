#include "model/summary.h"

#include <random>

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

bool Same(const FleetSummary::ModelCount& a, const FleetSummary::ModelCount& b) {
  return a.gpus == b.gpus && a.mig_enabled == b.mig_enabled && a.full == b.full && a.unhealthy == b.unhealthy &&
         a.nodes == b.nodes;
}

void ExpectSame(const FleetSummary& got, const FleetSummary& want, int step) {
  EXPECT_TRUE(Same(got.physical, want.physical)) << "step " << step;
  ASSERT_EQ(got.by_model.size(), want.by_model.size()) << "step " << step;
  for (const auto& [k, v] : want.by_model) EXPECT_TRUE(got.by_model.count(k) && Same(got.by_model.at(k), v)) << k << " step " << step;
  ASSERT_EQ(got.by_cluster.size(), want.by_cluster.size()) << "step " << step;
  for (const auto& [k, v] : want.by_cluster) EXPECT_TRUE(got.by_cluster.count(k) && Same(got.by_cluster.at(k), v)) << k << " step " << step;
  ASSERT_EQ(got.logical.size(), want.logical.size()) << "step " << step;
  for (const auto& [k, v] : want.logical) {
    ASSERT_TRUE(got.logical.count(k)) << k.first << "/" << k.second << " step " << step;
    const FleetSummary::DeviceCount& g = got.logical.at(k);
    EXPECT_EQ(std::tie(g.count, g.allocated, g.available), std::tie(v.count, v.allocated, v.available))
        << k.first << "/" << k.second << " step " << step;
  }
  EXPECT_EQ(std::tie(got.logical_total.count, got.logical_total.allocated, got.logical_total.available),
            std::tie(want.logical_total.count, want.logical_total.allocated, want.logical_total.available))
      << "step " << step;
}

// Kept change by change (GPUs come, change model, node, MIG layout and health, and leave; pools
// take and give back devices), the tally is at every step the summary of the fleet as it stands.
TEST(FleetTally, EqualsTheSummaryOfTheFleetAfterEveryChange) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<std::string> models = {"H200-SXM-141GB", "H100-SXM5-80GB", ""};
  std::map<int, GpuCapacity> fleet;  // by slot
  HeldDevices held;
  FleetTally tally;
  std::map<int, GpuPart> parts;
  auto random_gpu = [&](int slot) {
    GpuCapacity g = Gpu(models[static_cast<size_t>(pick(3))], pick(2) == 0, {}, pick(4) == 0,
                        pick(5) == 0 ? Health::kUnhealthy : Health::kHealthy);
    g.spec.uuid = "GPU-" + std::to_string(slot);
    g.spec.cluster = pick(2) == 0 ? "a" : "";
    g.spec.node = "n" + std::to_string(pick(4));
    if (g.status.mig_mode == MigMode::kEnabled) {
      for (int start : {0, 4}) {
        if (pick(3) != 0) g.status.mig_instances.push_back({pick(2) ? "3g.71gb" : "1g.18gb", start, 4, "", pick(4) == 0});
      }
    }
    return g;
  };
  for (int step = 0; step < 600; ++step) {
    const int slot = pick(12);
    if (pick(3) == 0) {  // a pool takes or gives back a device
      const std::pair<std::string, int64_t> d{"GPU-" + std::to_string(slot), pick(2) == 0 ? -1 : 4 * pick(2)};
      if (!held.erase(d)) held.insert(d);
      for (auto& [s, part] : parts) {
        GpuPart now = part;
        if (Rehold(now, held)) {
          tally.Remove(part);
          tally.Add(now);
          part = now;
        }
      }
    } else {
      if (auto was = parts.find(slot); was != parts.end()) {
        tally.Remove(was->second);
        parts.erase(was);
        fleet.erase(slot);
      }
      if (pick(4) != 0) {  // changed rather than gone
        fleet[slot] = random_gpu(slot);
        parts[slot] = PartOf(fleet[slot], held);
        tally.Add(parts[slot]);
      }
    }
    std::vector<GpuCapacity> now;
    for (const auto& [s, g] : fleet) now.push_back(g);
    ExpectSame(tally.summary(), Summarize(now, held), step);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_FALSE(fleet.empty());
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
