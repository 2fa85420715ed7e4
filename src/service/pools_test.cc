#include "service/pools.h"

#include "common/status.h"
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
  clock_.Advance(std::chrono::milliseconds(1500));
  auto released = svc_->Release("vision", "train", "alice");
  ASSERT_TRUE(released.ok());
  // The request is the pool's spec, to the second; the Released condition is the pool
  // controller's to write.
  ASSERT_TRUE(released->spec.release_requested);
  EXPECT_EQ(released->spec.release_requested->user, "alice");
  EXPECT_EQ(released->spec.release_requested->time, std::chrono::floor<std::chrono::seconds>(clock_.Now()));
  EXPECT_EQ(model::FindCondition(released->status.conditions, model::kReleased), nullptr);
  absl::Status again = svc_->Release("vision", "train", "alice").status();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(again.message()).find("already being released (asked by alice at"), std::string::npos) << again;
  // Deleted while being released: kept, marked, until the pool controller has released it.
  absl::StatusOr<model::GpuPool> deleting = svc_->DeletePool("vision", "train", "alice");
  ASSERT_TRUE(deleting.ok()) << deleting.status();
  EXPECT_TRUE(deleting->metadata.deletion_timestamp);
  EXPECT_EQ(deleting->metadata.finalizers, std::vector<std::string>{std::string(model::kReleaseFinalizer)});
  EXPECT_EQ(deleting->spec.release_requested, released->spec.release_requested) << "the release asked stands";
  // Nor asked for with a release already in it.
  model::GpuPool forged = Pool("forged", {{"H200-SXM-141GB", "full", 1}});
  forged.spec.release_requested = model::GpuPool::Spec::ReleaseRequest{"alice", clock_.Now()};
  absl::Status refused = svc_->CreatePool(forged, "alice").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.message()).find("spec.releaseRequested"), std::string::npos) << refused;
  auto audit = svc_->Audit(0, 0);
  ASSERT_TRUE(audit.ok());
  std::vector<std::string> actions;
  for (const auto& [rev, e] : *audit) actions.push_back(e.action + ":" + e.user);
  EXPECT_EQ(actions, (std::vector<std::string>{"CreateProject:ops", "CreatePool:alice",
                                               "Approve:ops", "Release:alice", "DeletePool:alice"}));
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

namespace gpuaas::service {
namespace {

// Billing through the service: rate cards, budgets and credit notes (the meters are the pool
// controller's).
class PoolBillingTest : public PoolServiceTest {
 protected:
  absl::StatusOr<model::RateCard> Card(const std::string& name, Time from, int64_t full_price,
                                       const std::string& currency = "USD") {
    model::RateCard c;
    c.metadata.name = name;
    c.spec.currency = currency;
    c.spec.effective_from = from;
    c.spec.prices = {{"h200-sxm-141gb", "full", full_price}};
    return svc_->CreateRateCard(c, "ops");
  }
  std::optional<model::UsageRecord> Meter(const std::string& pool) {
    auto got = store_->Get(store::KeyOf<model::UsageRecord>("vision", pool));
    if (!got.ok() || !*got) return std::nullopt;
    return *model::Decode<model::UsageRecord>((*got)->data);
  }
  // The meter the pool controller keeps for a pool that held all it asked for from `from` until
  // its release request (this test runs no controllers).
  void Metered(const std::string& pool, Time from) {
    ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
      ASSIGN_OR_RETURN(std::optional<model::GpuPool> p, store::GetObject<model::GpuPool>(tx, "vision", pool));
      model::UsageRecord m;
      m.metadata.ns = "vision";
      m.metadata.name = pool;
      m.spec.pool = pool;
      m.spec.pool_uid = p->metadata.uid;
      m.spec.items = p->spec.items;
      m.spec.start = std::chrono::floor<std::chrono::seconds>(p->status.approval->time);
      m.spec.held.emplace();
      for (const model::PoolItem& i : p->spec.items) m.spec.held->push_back({i.model, i.profile, i.count, from});
      m.spec.end = p->spec.release_requested->time;
      return store::CreateObject(tx, m, clock_.Now());
    }).ok());
  }
};

TEST_F(PoolBillingTest, TheServiceWritesNoMeterAndARejectionIsNeverBilled) {
  ASSERT_TRUE(svc_->CreatePool(Pool("train", {{"H200-SXM-141GB", "full", 2}}), "alice").ok());
  ASSERT_TRUE(svc_->CreatePool(Pool("nope", {{"H200-SXM-141GB", "full", 1}}), "alice").ok());
  clock_.Advance(std::chrono::minutes(3));
  ASSERT_TRUE(svc_->Approve("vision", "nope", false, "no", "ops").ok());
  auto approved = svc_->Approve("vision", "train", true, "", "ops");
  ASSERT_TRUE(approved.ok());
  clock_.Advance(std::chrono::seconds(5400));
  ASSERT_TRUE(svc_->Release("vision", "train", "alice").ok());
  // The pool controller opens the meter from the approval and ends it at the request
  // (test/pool_lifecycle_test.cc); the service only records both on the pool.
  EXPECT_FALSE(Meter("train"));
  EXPECT_FALSE(Meter("nope"));
  auto listed = store_->List(model::UsageRecord::kKind, "");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(PoolBillingTest, RateCardsTakeEffectInOpenPeriodsInOneCurrency) {
  const Time month_start = std::chrono::floor<std::chrono::days>(clock_.Now()) - std::chrono::days(1);  // Dec 1
  ASSERT_TRUE(Card("list", month_start, 4'500'000).ok());
  auto past = Card("backdated", month_start - std::chrono::seconds(1), 1);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(past.status().message()).find("closed billing period"), std::string::npos) << past.status();
  EXPECT_EQ(Card("euro", clock_.Now(), 1, "EUR").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Card("list", clock_.Now(), 1).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Card("lower", clock_.Now(), 1, "usd").status().code(), absl::StatusCode::kInvalidArgument);
  model::RateCard bad;
  bad.metadata.name = "bad";
  bad.spec.currency = "USD";
  bad.spec.effective_from = clock_.Now();
  bad.spec.prices = {{"H200-SXM-141GB", "9g.999gb", 1}};
  EXPECT_EQ(svc_->CreateRateCard(bad, "ops").status().code(), absl::StatusCode::kInvalidArgument);
  bad.spec.prices = {{"H200-SXM-141GB", "full", 1}, {"h200-sxm-141gb", "full", 2}};
  EXPECT_NE(svc_->CreateRateCard(bad, "ops").status().ToString().find("priced twice"), std::string::npos);
  // Model names are kept in the catalogue's spelling.
  auto listed = store_->List(model::RateCard::kKind, "");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(model::Decode<model::RateCard>((*listed)[0].data)->spec.prices[0].model, "H200-SXM-141GB");
}

TEST_F(PoolBillingTest, ABudgetRefusesNewPoolsAndApprovalsThatWouldPassIt) {
  const Time month_start = std::chrono::floor<std::chrono::days>(clock_.Now()) - std::chrono::days(1);
  ASSERT_TRUE(Card("list", month_start, 3'600'000).ok());  // 3.6 USD an hour
  ASSERT_TRUE(svc_->CreatePool(Pool("early", {{"H200-SXM-141GB", "full", 1}}), "alice").ok());
  // 100 USD a month: one GPU for the rest of December (29 days from the 2nd) is 2,500 USD.
  ASSERT_TRUE(svc_->SetBudget("vision", model::Project::Budget{100'000'000, 0, false}, "ops").ok());
  const int64_t rev = store_->Revision();
  auto refused = svc_->CreatePool(Pool("big", {{"H200-SXM-141GB", "full", 1}}), "alice");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(refused.status().message()).find("budget for 2025-12 is 100.000000 USD"), std::string::npos)
      << refused.status();
  // An approval is checked too (the pool was asked for before the budget).
  auto approval = svc_->Approve("vision", "early", true, "", "ops");
  EXPECT_EQ(approval.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store_->Revision(), rev) << "a refusal stores nothing";
  // The operator allows overruns: both go through.
  ASSERT_TRUE(svc_->SetBudget("vision", model::Project::Budget{100'000'000, 0, true}, "ops").ok());
  EXPECT_TRUE(svc_->Approve("vision", "early", true, "", "ops").ok());
  EXPECT_TRUE(svc_->CreatePool(Pool("big", {{"H200-SXM-141GB", "full", 1}}), "alice").ok());
  EXPECT_EQ(svc_->SetBudget("nobody", std::nullopt, "ops").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PoolBillingTest, ACreditNoteCorrectsAClosedMonthAndNeverMoreThanItBilled) {
  const Time month_start = std::chrono::floor<std::chrono::days>(clock_.Now()) - std::chrono::days(1);  // Dec 1
  ASSERT_TRUE(Card("list", month_start, 3'600'000).ok());
  ASSERT_TRUE(svc_->CreatePool(Pool("train", {{"H200-SXM-141GB", "full", 1}}), "alice").ok());
  ASSERT_TRUE(svc_->Approve("vision", "train", true, "", "ops").ok());
  const Time allocated = std::chrono::floor<std::chrono::seconds>(clock_.Now());
  clock_.Advance(std::chrono::hours(10));
  ASSERT_TRUE(svc_->Release("vision", "train", "alice").ok());  // 10 h x 3.6 = 36 USD in December
  Metered("train", allocated);
  EXPECT_EQ(svc_->IssueCreditNote("vision", "2025-12", 1'000'000, "outage", "ops").status().code(),
            absl::StatusCode::kFailedPrecondition) << "December is still running";
  clock_.Advance(std::chrono::hours(24 * 31));  // January
  EXPECT_EQ(svc_->IssueCreditNote("vision", "2025-12", 1, "", "ops").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_->IssueCreditNote("vision", "2025-12", 0, "x", "ops").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(svc_->IssueCreditNote("vision", "2025-13", 1, "x", "ops").status().code(), absl::StatusCode::kInvalidArgument);
  auto first = svc_->IssueCreditNote("vision", "2025-12", 30'000'000, "a GPU was slow for a day", "ops");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->metadata.name, "2025-12-1");
  auto over = svc_->IssueCreditNote("vision", "2025-12", 6'000'001, "again", "ops");
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(over.status().message()).find("billed 36000000, credited 30000000"), std::string::npos)
      << over.status();
  auto second = svc_->IssueCreditNote("vision", "2025-12", 6'000'000, "the rest", "ops");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->metadata.name, "2025-12-2");
  // January billed 36 USD of its own and carries 36 USD of notes for December: a note for
  // January may still give back all of January's 36 (the notes it carries correct another month).
  ASSERT_TRUE(svc_->CreatePool(Pool("jan", {{"H200-SXM-141GB", "full", 1}}), "alice").ok());
  ASSERT_TRUE(svc_->Approve("vision", "jan", true, "", "ops").ok());
  const Time jan_allocated = std::chrono::floor<std::chrono::seconds>(clock_.Now());
  clock_.Advance(std::chrono::hours(10));
  ASSERT_TRUE(svc_->Release("vision", "jan", "alice").ok());
  Metered("jan", jan_allocated);
  clock_.Advance(std::chrono::hours(24 * 31));  // February
  EXPECT_TRUE(svc_->IssueCreditNote("vision", "2026-01", 36'000'000, "all of January", "ops").ok());
  EXPECT_FALSE(svc_->IssueCreditNote("vision", "2026-01", 1, "more", "ops").ok());
}

}  // namespace
}  // namespace gpuaas::service
