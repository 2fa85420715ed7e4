#include "cluster/simulated/fleet.h"

#include <set>

#include "catalog/catalog.h"
#include "gtest/gtest.h"

namespace gpuaas::cluster::simulated {
namespace {

TEST(Fleet, DemoFleetIsTwoClustersOfEightGpuNodes) {
  const FleetSpec& demo = DemoFleet();
  ASSERT_EQ(demo.clusters.size(), 2u);
  std::set<std::string> uuids, models;
  int nodes = 0, gpus = 0, mig_gpus = 0;
  for (auto& driver : MakeDrivers(demo)) {
    absl::StatusOr<ObservedCluster> oc = driver->Observe();
    ASSERT_TRUE(oc.ok());
    for (const ObservedNode& n : oc->nodes) {
      ++nodes;
      EXPECT_EQ(n.gpus.size(), 8u);
      absl::StatusOr<const catalog::GpuModel*> m = catalog::ModelFromProduct(n.gpu_product);
      ASSERT_TRUE(m.ok()) << n.gpu_product;
      models.insert(std::string((*m)->name));
      for (const ObservedGpu& g : n.gpus) {
        ++gpus;
        EXPECT_TRUE(uuids.insert(g.uuid).second) << "duplicate " << g.uuid;
        if (!g.mig_enabled) continue;
        ++mig_gpus;
        catalog::Layout layout;
        for (const ObservedMigInstance& mi : g.mig_instances) {
          layout.push_back({catalog::FindProfile(**m, mi.profile), mi.start});
          EXPECT_TRUE(uuids.insert(mi.uuid).second);
        }
        EXPECT_TRUE(catalog::ValidateLayout(**m, layout).ok()) << catalog::FormatLayout(layout);
      }
    }
  }
  EXPECT_GE(nodes, 16);
  EXPECT_EQ(gpus, nodes * 8);
  EXPECT_GT(mig_gpus, 0);
  EXPECT_LT(mig_gpus, gpus);
  EXPECT_EQ(models, (std::set<std::string>{"A100-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}));
}

TEST(Fleet, ObservationsAreStable) {
  SimulatedCluster a(DemoFleet().clusters[0]), b(DemoFleet().clusters[0]);
  auto oa = a.Observe(), ob = b.Observe();
  ASSERT_TRUE(oa.ok() && ob.ok());
  EXPECT_EQ(oa->nodes[3].gpus[5].uuid, ob->nodes[3].gpus[5].uuid);
  EXPECT_EQ(oa->nodes[0].name, "h200-01");
}

TEST(Fleet, SyntheticFleetHasTheRequestedSize) {
  FleetSpec f = SyntheticFleet(10000, 2);
  int gpus = 0;
  for (auto& d : MakeDrivers(f)) {
    absl::StatusOr<ObservedCluster> oc = d->Observe();
    ASSERT_TRUE(oc.ok());
    for (const ObservedNode& n : oc->nodes) gpus += static_cast<int>(n.gpus.size());
  }
  EXPECT_EQ(gpus, 10000);
}

void ExpectBad(std::string_view yaml, std::string_view fragment) {
  absl::StatusOr<FleetSpec> f = ParseFleet(yaml);
  ASSERT_FALSE(f.ok()) << yaml;
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().ToString().find(fragment), std::string::npos) << f.status();
}

TEST(Fleet, BadFilesSayWhatIsWrong) {
  ExpectBad("clusters: []", "clusters: expected a non-empty list");
  ExpectBad("clusters:\n  - name: a\n    nodePools:\n      - {name: p, count: 1, model: Z100}",
            "clusters[0].nodePools[0].model: unknown GPU model \"Z100\"");
  ExpectBad("clusters:\n  - name: a\n    nodePools:\n      - {name: p, count: 2, model: H200-SXM-141GB,"
            " migNodes: 1, migLayouts: [\"3g.71gb@2\"]}",
            "migLayouts[0]: 3g.71gb cannot start at slot 2");
  ExpectBad("clusters:\n  - {name: a, nodePools: []}\n  - {name: a, nodePools: []}", "duplicate cluster");
  ExpectBad("clusters:\n  - {name: A_1, nodePools: []}", "must be a DNS label");
  ExpectBad("clusters:\n  - {name: a, nodePools: [], colour: red}", "unknown field \"colour\"");
  ExpectBad("clusters:\n  - name: a\n    nodePools:\n      - {name: p, count: 1, model: L40S-48GB,"
            " migNodes: 1, migLayouts: [\"1g.5gb\"]}", "L40S-48GB");
  ExpectBad("clusters: [", "fleet:");
  ExpectBad("clusters:\n  - name: a\n    nodePools:\n      - {name: p, count: x, model: H200-SXM-141GB}",
            "count: expected an integer");
}

}  // namespace
}  // namespace gpuaas::cluster::simulated
