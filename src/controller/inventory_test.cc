#include "controller/inventory.h"

#include "cluster/simulated/fleet.h"
#include "controller/control_plane.h"
#include "controller/health.h"
#include "common/strings.h"
#include "gtest/gtest.h"
#include "model/codec.h"
#include "store/objects.h"
#include "store/sqlite_store.h"
#include "telemetry/hub.h"

namespace gpuaas::controller {
namespace {

class FakeDriver final : public cluster::ClusterDriver {
 public:
  explicit FakeDriver(cluster::ObservedCluster oc) : oc_(std::move(oc)) {}
  absl::Status ApplyMigLayout(const std::string&, const std::string&, bool,
                              const std::vector<cluster::ObservedMigInstance>&) override {
    return absl::UnimplementedError("fake");
  }
  MigState NodeMigState(const std::string&) override { return {}; }
  std::string_view ClusterName() const override { return oc_.name; }
  absl::StatusOr<cluster::ObservedCluster> Observe() override {
    if (down) return absl::UnavailableError("connection refused");
    return oc_;
  }
  cluster::ObservedCluster oc_;
  bool down = false;
};

template <typename T>
std::vector<T> All(store::Store& s) {
  std::vector<T> out;
  EXPECT_TRUE(s.Transact([&](store::Txn& tx) {
    auto r = store::ListObjects<T>(tx);
    if (r.ok()) out = *r;
    return r.status();
  }).ok());
  return out;
}

class InventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    auto oc = cluster::simulated::SimulatedCluster(cluster::simulated::DemoFleet().clusters[0]).Observe();
    driver_ = std::make_unique<FakeDriver>(*oc);
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    ASSERT_TRUE(cache_->Load(ControlPlaneKinds()).ok());
    manager_ = std::make_unique<runtime::Manager>(clock_, *cache_);
  }
  // The controller, which observes the cluster once as it starts.
  std::unique_ptr<InventoryController> Start() {
    registry_ = std::make_unique<cluster::Registry>(std::map<std::string, cluster::ClusterDriver*>{{"alpha", driver_.get()}});
    auto ctl = std::make_unique<InventoryController>(*store_, *manager_, *registry_);
    manager_->RunUntilIdle();
    return ctl;
  }
  FakeClock clock_{std::chrono::system_clock::from_time_t(1764688445)};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<FakeDriver> driver_;
  std::unique_ptr<cluster::Registry> registry_;
  std::unique_ptr<store::ObjectCache> cache_;
  std::unique_ptr<runtime::Manager> manager_;
};

TEST_F(InventoryTest, FirstSyncCreatesEveryObject) {
  auto ctl = Start();
  const SyncStats first = ctl->last();
  const SyncStats* st = &first;
  auto nodes = All<model::NodeCapacity>(*store_);
  auto gpus = All<model::GpuCapacity>(*store_);
  auto specs = All<model::SpecAndCount>(*store_);
  auto clusters = All<model::Cluster>(*store_);
  ASSERT_EQ(clusters.size(), 1u);
  EXPECT_EQ(clusters[0].status.nodes, 10);
  EXPECT_EQ(clusters[0].status.gpus, 80);
  EXPECT_EQ(nodes.size(), 10u);
  EXPECT_EQ(gpus.size(), 80u);
  EXPECT_EQ(st->created, static_cast<int>(1 + nodes.size() + gpus.size() + specs.size()));

  // The first H200 node runs MIG: its logical capacity is MIG devices, its physical 8 GPUs.
  const model::NodeCapacity* h200 = nullptr;
  for (const auto& n : nodes) {
    if (n.metadata.name == "alpha.h200-01") h200 = &n;
  }
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->spec.gpu_model, "H200-SXM-141GB");
  EXPECT_EQ(h200->status.physical_gpus, 8);
  EXPECT_EQ(h200->status.mig_enabled_gpus, 8);
  EXPECT_EQ(h200->status.allocatable.count("nvidia.com/gpu"), 0u);
  // Layouts cycle over 8 GPUs: 2x (3g+3g), 2x (4g+2g+1g), 2x (2g+2g+2g+1g), 2x 7x1g.
  EXPECT_EQ(h200->status.allocatable.at("nvidia.com/mig-3g.71gb"), 4);
  EXPECT_EQ(h200->status.allocatable.at("nvidia.com/mig-4g.71gb"), 2);
  EXPECT_EQ(h200->status.allocatable.at("nvidia.com/mig-2g.35gb"), 8);
  EXPECT_EQ(h200->status.allocatable.at("nvidia.com/mig-1g.18gb"), 2 + 2 + 14);
  // SpecAndCount agrees with the node's allocatable.
  for (const auto& s : specs) {
    if (s.spec.node != "alpha.h200-01") continue;
    EXPECT_EQ(h200->status.allocatable.at(s.spec.resource_name), s.status.count) << s.metadata.name;
    EXPECT_EQ(s.status.free, s.status.count);
  }
  // A non-MIG node: 8 full GPUs.
  for (const auto& s : specs) {
    if (s.metadata.name == "alpha.h200-03.full") {
      EXPECT_EQ(s.status.count, 8);
    }
  }
  for (const auto& g : gpus) {
    EXPECT_EQ(g.metadata.labels.at("gpuaas.io/cluster"), "alpha");
    EXPECT_TRUE(model::DriverReportedHealthy(g));
    EXPECT_EQ(g.status.health, model::Health::kUnknown);  // the health controller's to judge
    EXPECT_EQ(g.metadata.name, ToLower(g.spec.uuid));
  }
}

// Wired as the control plane wires them, the inventory creates each GPU with the health the
// health controller judges (the driver's view here; no telemetry yet): one write per GPU, and
// the health controller has nothing left to write.
TEST_F(InventoryTest, NewGpusAreCreatedAsTheHealthControllerJudgesThem) {
  driver_->oc_.nodes[2].gpus[1].healthy = false;
  telemetry::Hub hub;
  HealthController health(*store_, hub, *manager_);
  registry_ = std::make_unique<cluster::Registry>(std::map<std::string, cluster::ClusterDriver*>{{"alpha", driver_.get()}});
  InventoryController ctl(*store_, *manager_, *registry_);
  ctl.JudgeNewGpusWith([&](model::GpuCapacity& g, Time now) { health.JudgeNew(g, now); });
  manager_->RunUntilIdle();
  EXPECT_EQ(health.writes(), 0);
  EXPECT_TRUE(health.WaitJudged(std::chrono::milliseconds(0)));
  int unhealthy = 0;
  for (const auto& g : All<model::GpuCapacity>(*store_)) {
    EXPECT_EQ(g.metadata.resource_version, 1) << g.metadata.name << " written once";
    const model::Condition* c = model::FindCondition(g.status.conditions, model::kGpuHealthy);
    ASSERT_NE(c, nullptr) << g.metadata.name;
    if (model::DriverReportedHealthy(g)) {
      EXPECT_EQ(g.status.health, model::Health::kHealthy) << g.metadata.name;
    } else {
      ++unhealthy;
      EXPECT_EQ(g.status.health, model::Health::kUnhealthy);
      EXPECT_EQ(c->reason, model::kReasonDriverUnhealthy);
    }
  }
  EXPECT_EQ(unhealthy, 1);
}

TEST_F(InventoryTest, SecondSyncWritesNothing) {
  auto ctl = Start();
  const int64_t rev = store_->Revision();
  clock_.Advance(std::chrono::minutes(5));
  absl::StatusOr<SyncStats> st = ctl->Sync(*driver_);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->created + st->updated + st->deleted, 0);
  EXPECT_EQ(store_->Revision(), rev);
}

TEST_F(InventoryTest, ADriverThatCannotWatchIsObservedEveryResync) {
  auto ctl = Start();
  driver_->oc_.nodes[2].gpus[0].in_use = true;
  clock_.Advance(std::chrono::seconds(29));
  EXPECT_EQ(manager_->RunUntilIdle(), 0);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_GE(manager_->RunUntilIdle(), 1);
  EXPECT_GT(ctl->last().updated, 0);
}

TEST_F(InventoryTest, AConflictingWriteIsRetriedAndKeepsTheOtherWritersFields) {
  auto ctl = Start();
  // Another writer (the health controller) changes a GPU after the informer saw it.
  const std::string uuid = driver_->oc_.nodes[2].gpus[1].uuid;
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::GpuCapacity> g, store::GetObject<model::GpuCapacity>(tx, "", ToLower(uuid)));
    g->status.health = model::Health::kHealthy;
    return store::UpdateObject(tx, *g);
  }).ok());
  driver_->oc_.nodes[2].gpus[1].healthy = false;
  absl::StatusOr<SyncStats> st = ctl->Sync(*driver_);  // compared with the stale informer
  EXPECT_TRUE(absl::IsAborted(st.status())) << st.status();
  st = ctl->Sync(*driver_);  // the informer caught up meanwhile
  ASSERT_TRUE(st.ok()) << st.status();
  for (const auto& g : All<model::GpuCapacity>(*store_)) {
    if (g.spec.uuid != uuid) continue;
    EXPECT_FALSE(model::DriverReportedHealthy(g));
    EXPECT_EQ(g.status.health, model::Health::kHealthy);  // not the inventory's to change
  }
}

TEST_F(InventoryTest, ChangesFlowThrough) {
  auto ctl = Start();
  // A pod takes a full GPU, another GPU turns unhealthy, and the last node leaves the cluster.
  auto& n3 = driver_->oc_.nodes[2];
  n3.gpus[0].in_use = true;
  n3.gpus[1].healthy = false;
  driver_->oc_.nodes.pop_back();
  clock_.Advance(std::chrono::minutes(1));
  absl::StatusOr<SyncStats> st = ctl->Sync(*driver_);
  ASSERT_TRUE(st.ok());
  EXPECT_GT(st->deleted, 8);  // the node, its 8 GPUs and its SpecAndCount
  auto gpus = All<model::GpuCapacity>(*store_);
  EXPECT_EQ(gpus.size(), 72u);
  for (const auto& g : gpus) {
    if (g.spec.uuid == n3.gpus[0].uuid) {
      EXPECT_TRUE(g.status.allocated);
    }
    if (g.spec.uuid == n3.gpus[1].uuid) {
      const model::Condition* c = model::FindCondition(g.status.conditions, model::kGpuDriverHealthy);
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->status, model::ConditionStatus::kFalse);
      EXPECT_EQ(c->last_transition_time, std::chrono::time_point_cast<std::chrono::seconds>(clock_.Now()));
    }
  }
  for (const auto& s : All<model::SpecAndCount>(*store_)) {
    if (s.metadata.name == "alpha.h200-03.full") {
      EXPECT_EQ(s.status.allocated, 1);
      EXPECT_EQ(s.status.free, 7);
    }
  }
}

TEST_F(InventoryTest, UnreachableClusterKeepsItsInventory) {
  auto ctl = Start();
  driver_->down = true;
  ASSERT_TRUE(ctl->Sync(*driver_).ok());
  auto clusters = All<model::Cluster>(*store_);
  ASSERT_EQ(clusters.size(), 1u);
  const model::Condition* c = model::FindCondition(clusters[0].status.conditions, "Reachable");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, model::ConditionStatus::kFalse);
  EXPECT_EQ(c->message, "connection refused");
  EXPECT_EQ(All<model::GpuCapacity>(*store_).size(), 80u);
}

TEST_F(InventoryTest, UnknownProductsAreFlaggedNotDropped) {
  driver_->oc_.nodes[0].gpu_product = "NVIDIA-GeForce-RTX-4090";
  Inventory inv = BuildInventory(driver_->oc_, clock_.Now());
  const model::Condition* c = model::FindCondition(inv.nodes[0].status.conditions, "Recognized");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, model::ConditionStatus::kFalse);
  EXPECT_EQ(inv.nodes[0].spec.gpu_model, "");
  EXPECT_EQ(inv.nodes[0].status.physical_gpus, 8);
}

}  // namespace
}  // namespace gpuaas::controller
