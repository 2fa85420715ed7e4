// The pool lifecycle in one process: simulated clusters, the inventory and pool controllers, the
// pool service, and the store, driven pass by pass.
#include <set>

#include "cluster/simulated/fleet.h"
#include "controller/inventory.h"
#include "controller/pools.h"
#include "gtest/gtest.h"
#include "service/pools.h"
#include "store/objects.h"
#include "store/sqlite_store.h"

namespace gpuaas {
namespace {

using model::ConditionStatus;
using model::GpuPool;

class PoolLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    for (const auto& c : cluster::simulated::DemoFleet().clusters) {
      sims_.push_back(std::make_unique<cluster::simulated::SimulatedCluster>(c));
      drivers_[c.name] = sims_.back().get();
    }
    inventory_ = std::make_unique<controller::InventoryController>(*store_, clock_);
    pools_ = std::make_unique<controller::PoolController>(*store_, clock_, drivers_);
    service_ = std::make_unique<service::PoolService>(*store_, clock_, [] {
      return std::map<std::string, int64_t>{{"H200-SXM-141GB", 48}, {"H100-SXM5-80GB", 64}, {"A100-80GB", 32}};
    });
    Sync();
    model::Project p;
    p.metadata.name = "vision";
    ASSERT_TRUE(service_->CreateProject(p, "ops").ok());
  }
  void Sync() {
    for (auto& s : sims_) ASSERT_TRUE(inventory_->Sync(*s).ok());
  }
  // Runs controller passes (with an inventory sync between) until `done` or `passes` run out.
  void Converge(int passes = 10) {
    for (int i = 0; i < passes; ++i) {
      absl::StatusOr<controller::PassStats> st = pools_->RunOnce();
      ASSERT_TRUE(st.ok()) << st.status();
      Sync();
      clock_.Advance(std::chrono::seconds(1));
    }
  }
  void Request(const std::string& name, std::vector<model::PoolItem> items, bool approve = true) {
    GpuPool p;
    p.metadata.name = name;
    p.metadata.ns = "vision";
    p.spec.cluster = "alpha";
    p.spec.items = std::move(items);
    ASSERT_TRUE(service_->CreatePool(p, "alice").ok());
    if (approve) {
      ASSERT_TRUE(service_->Approve("vision", name, true, "ok", "ops").ok());
    }
  }
  GpuPool Get(const std::string& name) {
    std::optional<GpuPool> p;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
      auto r = store::GetObject<GpuPool>(tx, "vision", name);
      if (r.ok()) p = *r;
      return r.status();
    }).ok());
    return p.value_or(GpuPool{});
  }
  static std::string Cond(const GpuPool& p, std::string_view type) {
    const model::Condition* c = model::FindCondition(p.status.conditions, type);
    return c == nullptr ? "-" : std::string(model::ToString(c->status)) + "/" + c->reason;
  }

  FakeClock clock_{std::chrono::system_clock::from_time_t(1764688445)};
  std::unique_ptr<store::Store> store_;
  std::vector<std::unique_ptr<cluster::simulated::SimulatedCluster>> sims_;
  std::map<std::string, cluster::ClusterDriver*> drivers_;
  std::unique_ptr<controller::InventoryController> inventory_;
  std::unique_ptr<controller::PoolController> pools_;
  std::unique_ptr<service::PoolService> service_;
};

TEST_F(PoolLifecycle, MigPoolOnFreeInstancesIsReadyAtOnce) {
  Request("infer", {{"H200-SXM-141GB", "3g.71gb", 4}});
  Converge(1);
  GpuPool p = Get("infer");
  EXPECT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Allocated");
  ASSERT_EQ(p.status.allocation.size(), 4u);
  for (const auto& d : p.status.allocation) {
    EXPECT_EQ(d.profile, "3g.71gb");
    EXPECT_EQ(d.instance_uuid.rfind("MIG-", 0), 0u);
  }
}

TEST_F(PoolLifecycle, ReconfiguresIdleGpusThenReleaseAndReuse) {
  // The demo fleet has four 4g.71gb instances; six need two idle GPUs reconfigured.
  Request("big", {{"H200-SXM-141GB", "4g.71gb", 6}, {"H200-SXM-141GB", "full", 2}});
  Converge(1);
  GpuPool p = Get("big");
  EXPECT_EQ(Cond(p, "Allocated"), "True/Allocated");
  EXPECT_EQ(Cond(p, "Ready"), "False/Provisioning");
  Converge(3);
  p = Get("big");
  ASSERT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Provisioned");
  std::set<std::string> devices;
  for (const auto& d : p.status.allocation) {
    EXPECT_TRUE(devices.insert(d.gpu_uuid + "@" + std::to_string(d.start) + d.profile).second);
    if (d.profile != "full") {
      EXPECT_FALSE(d.instance_uuid.empty());
    }
  }
  EXPECT_EQ(devices.size(), 8u);

  // A second pool cannot take the same devices.
  Request("other", {{"H200-SXM-141GB", "4g.71gb", 1}});
  Converge(3);
  GpuPool other = Get("other");
  ASSERT_EQ(Cond(other, "Ready"), "True/Ready") << Cond(other, "Allocated");
  for (const auto& d : p.status.allocation) {
    EXPECT_NE(other.status.allocation[0].gpu_uuid + std::to_string(other.status.allocation[0].start),
              d.gpu_uuid + std::to_string(d.start));
  }

  // Release frees the devices; the next pool reuses the instances without reconfiguring.
  ASSERT_TRUE(service_->Release("vision", "big", "alice").ok());
  Converge(1);
  p = Get("big");
  EXPECT_EQ(Cond(p, "Released"), "True/Released");
  EXPECT_TRUE(p.status.allocation.empty());
  Request("again", {{"H200-SXM-141GB", "4g.71gb", 5}});
  Converge(1);
  EXPECT_EQ(Cond(Get("again"), "Ready"), "True/Ready");
}

TEST_F(PoolLifecycle, UnplaceableAndRejectedPoolsSayWhy) {
  Request("rejected", {{"H200-SXM-141GB", "full", 1}}, /*approve=*/false);
  ASSERT_TRUE(service_->Approve("vision", "rejected", false, "use the shared pool", "ops").ok());
  // Pods run on one instance of every MIG H200, so only the 32 whole H200s can become full GPUs.
  const cluster::ObservedCluster alpha = *sims_[0]->Observe();
  for (const auto& n : alpha.nodes) {
    for (const auto& g : n.gpus) {
      if (g.mig_enabled) sims_[0]->SetInUse(g.mig_instances[0].uuid, true);
    }
  }
  Sync();
  Request("toomuch", {{"H200-SXM-141GB", "full", 33}});
  Converge(2);
  EXPECT_TRUE(Get("rejected").status.allocation.empty());
  GpuPool t = Get("toomuch");
  EXPECT_EQ(Cond(t, "Allocated"), "False/Unschedulable");
  const model::Condition* c = model::FindCondition(t.status.conditions, "Allocated");
  EXPECT_NE(c->message.find("MIG instances"), std::string::npos) << c->message;
}

TEST_F(PoolLifecycle, MigFailuresRetryWithBackoffAndRestartsConverge) {
  sims_[0]->FailNextMigChanges(1);
  Request("big", {{"H200-SXM-141GB", "4g.71gb", 5}});
  Converge(3);  // allocate; request the layout; see it fail
  GpuPool p = Get("big");
  EXPECT_EQ(Cond(p, "Provisioned"), "False/MigLayoutFailed") << Cond(p, "Provisioned");
  // A new controller (a restarted server) picks up where the old one stopped.
  pools_ = std::make_unique<controller::PoolController>(*store_, clock_, drivers_);
  clock_.Advance(std::chrono::seconds(30));
  Converge(4);
  p = Get("big");
  EXPECT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Provisioned");
  EXPECT_EQ(p.status.allocation.size(), 5u);
}

}  // namespace
}  // namespace gpuaas
