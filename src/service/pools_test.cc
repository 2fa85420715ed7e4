#include "service/pools.h"

#include "gtest/gtest.h"
#include "store/objects.h"
#include "store/sqlite_store.h"

namespace gpuaas::service {
namespace {

class PoolServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    svc_ = std::make_unique<PoolService>(*store_, clock_, [] {
      return std::map<std::string, int64_t>{{"H200-SXM-141GB", 16}, {"A100-80GB", 8}};
    });
    model::Project p;
    p.metadata.name = "vision";
    p.spec.quota = model::Project::Quota{{{"H200-SXM-141GB", 4}}, {{"H200-SXM-141GB", 12}}};
    ASSERT_TRUE(svc_->CreateProject(p, "ops").ok());
  }
  model::GpuPool Pool(const std::string& name, std::vector<model::PoolItem> items) {
    model::GpuPool p;
    p.metadata.name = name;
    p.metadata.ns = "vision";
    p.spec.items = std::move(items);
    return p;
  }
  FakeClock clock_{std::chrono::system_clock::from_time_t(1764688445)};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<PoolService> svc_;
};

TEST_F(PoolServiceTest, LifecycleWithAudit) {
  auto created = svc_->CreatePool(Pool("train", {{"H200-SXM-141GB", "full", 2}}), "alice");
  ASSERT_TRUE(created.ok()) << created.status();
  const model::Condition* c = model::FindCondition(created->status.conditions, model::kApproved);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, model::ConditionStatus::kUnknown);
  EXPECT_FALSE(svc_->Release("vision", "train", "alice").ok()) << "not approved yet";
  clock_.Advance(std::chrono::minutes(3));
  auto approved = svc_->Approve("vision", "train", true, "budget ok", "ops");
  ASSERT_TRUE(approved.ok()) << approved.status();
  EXPECT_EQ(approved->status.approval->time, clock_.Now()) << "billing starts at approval";
  EXPECT_EQ(svc_->Approve("vision", "train", false, "no", "ops").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto released = svc_->Release("vision", "train", "alice");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(model::FindCondition(released->status.conditions, model::kReleased)->reason, "Releasing");
  EXPECT_EQ(svc_->Release("vision", "train", "alice").status().code(), absl::StatusCode::kFailedPrecondition);
  auto audit = svc_->Audit(0, 0);
  ASSERT_TRUE(audit.ok());
  std::vector<std::string> actions;
  for (const auto& [rev, e] : *audit) actions.push_back(e.action + ":" + e.user);
  EXPECT_EQ(actions, (std::vector<std::string>{"CreateProject:ops", "CreatePool:alice",
                                               "Approve:ops", "Release:alice"}));
}

TEST_F(PoolServiceTest, RejectionIsFinal) {
  ASSERT_TRUE(svc_->CreatePool(Pool("p", {{"H200-SXM-141GB", "full", 1}}), "alice").ok());
  auto rejected = svc_->Approve("vision", "p", false, "use the shared pool", "ops");
  ASSERT_TRUE(rejected.ok());
  EXPECT_EQ(model::FindCondition(rejected->status.conditions, model::kApproved)->status,
            model::ConditionStatus::kFalse);
  EXPECT_EQ(svc_->Approve("vision", "p", true, "", "ops").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(svc_->Release("vision", "p", "alice").status().code(), absl::StatusCode::kFailedPrecondition);
  // A rejected pool no longer counts against the quota.
  EXPECT_TRUE(svc_->CreatePool(Pool("q", {{"H200-SXM-141GB", "full", 4}}), "alice").ok());
}

TEST_F(PoolServiceTest, QuotaFleetAndInputAreCheckedAndNothingIsStoredOnRefusal) {
  const int64_t rev = store_->Revision();
  auto over_quota = svc_->CreatePool(Pool("a", {{"H200-SXM-141GB", "full", 5}}), "alice");
  EXPECT_EQ(over_quota.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_quota.status().ToString().find("quota 4"), std::string::npos);
  // 3g = 3 compute slices: 5 x 3 = 15 > 12.
  auto over_slices = svc_->CreatePool(Pool("b", {{"H200-SXM-141GB", "3g.71gb", 5}}), "alice");
  EXPECT_NE(over_slices.status().ToString().find("MIG compute slices"), std::string::npos);
  auto over_fleet = svc_->CreatePool(Pool("c", {{"A100-80GB", "full", 9}}), "alice");
  EXPECT_EQ(over_fleet.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over_fleet.status().ToString().find("more than the whole fleet could ever hold"), std::string::npos);
  EXPECT_EQ(svc_->CreatePool(Pool("d", {{"H100-NVL-94GB", "full", 1}}), "alice").status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(svc_->CreatePool(Pool("e", {{"Z100", "full", 1}}), "alice").status().code(),
            absl::StatusCode::kInvalidArgument);
  model::GpuPool orphan = Pool("f", {{"A100-80GB", "full", 1}});
  orphan.metadata.ns = "nobody";
  EXPECT_EQ(svc_->CreatePool(orphan, "alice").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Revision(), rev) << "refusals leave the store unchanged";
  // Models without a quota entry are limited by the fleet only.
  EXPECT_TRUE(svc_->CreatePool(Pool("g", {{"A100-80GB", "full", 8}}), "alice").ok());
  EXPECT_EQ(svc_->CreatePool(Pool("g", {{"A100-80GB", "full", 1}}), "alice").status().code(),
            absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace gpuaas::service
