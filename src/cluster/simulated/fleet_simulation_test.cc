#include "cluster/simulated/fleet_simulation.h"

#include "gtest/gtest.h"
#include "telemetry/hub.h"

namespace gpuaas::cluster::simulated {
namespace {

using telemetry::Field;
constexpr int64_t kT0 = 1'800'000'000'000;

TEST(FleetSimulation, FollowsTheInventoryAndYieldsToRealSources) {
  model::GpuCapacity a;
  a.metadata.name = "gpu-a";
  a.spec = {"alpha", "alpha.n0", "GPU-a", 0, "H200-SXM-141GB", "NVIDIA-H200", 143771, true};
  model::GpuCapacity b = a;
  b.metadata.name = "gpu-b";
  b.spec.uuid = "GPU-b";
  b.spec.node = "alpha.n1";
  telemetry::Hub hub;
  FleetSimulation fleet(hub);
  auto both = [&] {
    return std::vector<std::shared_ptr<const model::GpuCapacity>>{std::make_shared<const model::GpuCapacity>(a),
                                                                  std::make_shared<const model::GpuCapacity>(b)};
  };
  fleet.Follow(1, both());
  EXPECT_EQ(fleet.nodes(), 2u);
  fleet.Tick(kT0);
  ASSERT_TRUE(hub.series().Latest("GPU-a", Field::kPowerW));
  const double energy = hub.series().Latest("GPU-a", Field::kEnergyMj)->second;
  // GPU a is given a MIG layout: its counters carry on, its instances appear; the same revision
  // again is not followed twice.
  a.status.mig_mode = model::MigMode::kEnabled;
  a.status.mig_instances = {{"3g.71gb", 0, 4, "MIG-x", false}};
  fleet.Follow(1, both());
  fleet.Tick(kT0 + 5'000);
  EXPECT_FALSE(hub.series().Latest("GPU-a/1", Field::kSmActive)) << "revision 1 was followed already";
  fleet.Follow(2, both());
  fleet.Tick(kT0 + 10'000);
  EXPECT_GT(hub.series().Latest("GPU-a", Field::kEnergyMj)->second, energy);
  EXPECT_TRUE(hub.series().Latest("GPU-a/1", Field::kSmActive));
  // A real agent reports GPU b: the simulation leaves it alone.
  ASSERT_TRUE(hub.IngestReport({"alpha.n1", "", kT0 + 15'000, {{"GPU-b", 0, "", 0, false, {{Field::kPowerW, 123}}, {}, {}}}}, kT0 + 15'000).ok());
  fleet.Tick(kT0 + 20'000);
  EXPECT_EQ(hub.series().Latest("GPU-b", Field::kPowerW)->second, 123);
}

}  // namespace
}  // namespace gpuaas::cluster::simulated
