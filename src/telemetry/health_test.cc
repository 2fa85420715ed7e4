#include "telemetry/health.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace gpuaas::telemetry {
namespace {

TEST(Health, Xid79AsksForANodeRebootAndFailsTheGpu) {
  HealthTracker h;
  h.Observe("GPU-a", -1, Field::kXid, 0, 1000);
  EXPECT_FALSE(h.Verdict("GPU-a").failed());
  h.Observe("GPU-a", -1, Field::kXid, 79, 2000);
  GpuVerdict v = h.Verdict("GPU-a");
  EXPECT_TRUE(v.failed());
  EXPECT_TRUE(v.reset_required.active);
  EXPECT_EQ(v.reset_required.reason, "Xid79");
  EXPECT_NE(v.reset_required.message.find("reboot the node"), std::string::npos);
  EXPECT_FALSE(v.memory_errors.active);
  EXPECT_EQ(h.TakeChanged(), std::set<std::string>{"GPU-a"});
  std::vector<Alert> a = h.Alerts(true);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].severity, Severity::kCritical);
  EXPECT_EQ(a[0].source, "XID 79");
  // In codes too, for front ends that word it in their reader's language.
  EXPECT_EQ(a[0].reason, "Xid79");
  EXPECT_EQ(a[0].action_code, "RebootNode");
  EXPECT_EQ(a[0].params, (std::map<std::string, double>{{"xid", 79}}));
}

// Every alert names its action by one of the codes front ends know.
TEST(Health, EveryAlertCarriesAKnownActionCode) {
  HealthTracker h;
  int64_t t = 1000;
  for (int xid : {13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 140, 12345}) h.Xid("GPU-x", -1, xid, t++);
  h.Observe("GPU-a", -1, Field::kEccDbeVolatile, 2, t++);
  h.Observe("GPU-a", -1, Field::kEccDbeAggregate, 1, t++);
  h.Observe("GPU-a", -1, Field::kEccDbeAggregate, 3, t++);
  h.Observe("GPU-a", -1, Field::kEnergyMj, 5, t++);
  h.Observe("GPU-a", -1, Field::kEnergyMj, 1, t++);
  h.Observe("GPU-b", -1, Field::kRemapFailure, 1, t++);
  h.Observe("GPU-b", -1, Field::kRemapPending, 1, t++);
  for (int action : {1, 2, 3, 4, 7}) h.Observe("GPU-c", -1, Field::kRecoveryAction, action, t++);
  h.Observe("GPU-d", -1, Field::kTempC, 95, t++);
  h.Restore("GPU-e", ConditionVerdict{true, "Xid48", "XID 48"}, std::nullopt, t++);
  const std::vector<Alert> all = h.Alerts(false);
  ASSERT_GT(all.size(), 20u);
  for (const Alert& a : all) {
    EXPECT_NE(std::find(ActionCodes().begin(), ActionCodes().end(), a.action_code), ActionCodes().end())
        << a.source << ": \"" << a.action_code << "\"";
    EXPECT_FALSE(a.reason.empty()) << a.source;
  }
}

TEST(Health, TheXidGaugeCountsOncePerEvent) {
  HealthTracker h;
  for (int i = 0; i < 10; ++i) h.Observe("GPU-a", -1, Field::kXid, 13, 1000 + i);  // repeated by every scrape
  EXPECT_EQ(h.xid_events(), 1);
  h.Observe("GPU-a", -1, Field::kXid, 31, 2000);
  h.Observe("GPU-a", -1, Field::kXid, 31, 3000);
  EXPECT_EQ(h.xid_events(), 2);
  // Application faults do not touch the hardware's health.
  EXPECT_FALSE(h.Verdict("GPU-a").failed());
  EXPECT_TRUE(h.Alerts(true).empty());
  EXPECT_EQ(h.Alerts(false).size(), 2u);
  // Per MIG instance the gauge is its own.
  h.Observe("GPU-a", 3, Field::kXid, 31, 4000);
  EXPECT_EQ(h.xid_events(), 3);
}

TEST(Health, DoubleBitEccSetsMemoryErrorsUntilAReset) {
  HealthTracker h;
  h.Observe("GPU-a", -1, Field::kEnergyMj, 5e9, 1000);
  h.Observe("GPU-a", -1, Field::kEccDbeVolatile, 0, 1000);
  EXPECT_FALSE(h.Verdict("GPU-a").failed());
  h.Observe("GPU-a", -1, Field::kEccDbeVolatile, 2, 2000);
  GpuVerdict v = h.Verdict("GPU-a");
  EXPECT_TRUE(v.memory_errors.active);
  EXPECT_EQ(v.memory_errors.reason, "DoubleBitEccErrors");
  EXPECT_TRUE(v.reset_required.active);
  EXPECT_EQ(h.Alerts(true).size(), 1u);
  // The energy counter restarts: the driver reloaded, the volatile counters with it.
  h.Observe("GPU-a", -1, Field::kEnergyMj, 1e6, 3000);
  h.Observe("GPU-a", -1, Field::kEccDbeVolatile, 0, 3000);
  EXPECT_FALSE(h.Verdict("GPU-a").failed());
  EXPECT_TRUE(h.Alerts(true).empty());
  std::vector<Alert> all = h.Alerts(false);
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all.back().resolved_ms, 3000);  // the ECC alert, resolved by the reset
}

TEST(Health, AggregateEccHistoryBeforeWatchingIsNotANewFault) {
  HealthTracker h;
  h.Observe("GPU-a", -1, Field::kEccDbeAggregate, 4, 1000);
  EXPECT_FALSE(h.Verdict("GPU-a").memory_errors.active);
  h.Observe("GPU-a", -1, Field::kEccDbeAggregate, 5, 2000);
  EXPECT_TRUE(h.Verdict("GPU-a").memory_errors.active);
}

TEST(Health, XidActionsFollowTheCatalogue) {
  EXPECT_EQ(LookupXid(79).effect, XidEffect::kRebootNode);
  EXPECT_EQ(LookupXid(48).effect, XidEffect::kMemoryError);
  for (int x : {62, 64, 95, 119, 120}) EXPECT_EQ(LookupXid(x).effect, XidEffect::kResetGpu) << x;
  EXPECT_EQ(LookupXid(94).effect, XidEffect::kResetWhenConvenient);
  for (int x : {13, 31}) EXPECT_EQ(LookupXid(x).effect, XidEffect::kApplication) << x;
  for (int x : {43, 63, 92}) EXPECT_EQ(LookupXid(x).effect, XidEffect::kInformational) << x;
  EXPECT_EQ(LookupXid(74).effect, XidEffect::kNvlink);
  EXPECT_EQ(LookupXid(12345).effect, XidEffect::kUnknown);

  HealthTracker h;
  h.Xid("GPU-a", -1, 94, 1000);
  GpuVerdict v = h.Verdict("GPU-a");
  EXPECT_FALSE(v.failed());  // contained: reset when convenient, the GPU keeps serving
  EXPECT_EQ(v.reset_required.reason, "ResetWhenConvenient");
  h.Xid("GPU-b", -1, 95, 1000);
  EXPECT_TRUE(h.Verdict("GPU-b").memory_errors.active);
  EXPECT_TRUE(h.Verdict("GPU-b").reset_required.active);
  // A later reset-class XID does not hide an outstanding reboot.
  h.Xid("GPU-c", -1, 79, 1000);
  h.Xid("GPU-c", -1, 62, 2000);
  EXPECT_EQ(h.Verdict("GPU-c").reset_required.reason, "Xid79");
}

TEST(Health, RowRemapFailureAndRecoveryAction) {
  HealthTracker h;
  h.Observe("GPU-a", -1, Field::kRemapFailure, 1, 1000);
  EXPECT_EQ(h.Verdict("GPU-a").memory_errors.reason, "RowRemapFailure");
  h.Observe("GPU-a", -1, Field::kEnergyMj, 5, 2000);
  h.Observe("GPU-a", -1, Field::kEnergyMj, 1, 3000);  // a reset does not repair a remap failure
  EXPECT_TRUE(h.Verdict("GPU-a").failed());

  h.Observe("GPU-b", -1, Field::kRecoveryAction, 2, 1000);
  EXPECT_EQ(h.Verdict("GPU-b").reset_required.reason, "RecoveryAction");
  EXPECT_NE(h.Verdict("GPU-b").reset_required.message.find("node reboot"), std::string::npos);
  h.Observe("GPU-b", -1, Field::kRecoveryAction, 0, 2000);
  EXPECT_FALSE(h.Verdict("GPU-b").failed());

  h.Observe("GPU-c", -1, Field::kRemapPending, 1, 1000);
  EXPECT_FALSE(h.Verdict("GPU-c").failed());
  EXPECT_EQ(h.Verdict("GPU-c").reset_required.reason, "ResetWhenConvenient");
}

TEST(Health, OverheatingHasHysteresisAndDoesNotFailTheGpu) {
  HealthTracker h;
  h.Observe("GPU-a", -1, Field::kTempC, 91, 1000);
  EXPECT_TRUE(h.Verdict("GPU-a").overheating.active);
  EXPECT_FALSE(h.Verdict("GPU-a").failed());
  h.Observe("GPU-a", -1, Field::kTempC, 87, 2000);
  EXPECT_TRUE(h.Verdict("GPU-a").overheating.active);
  h.Observe("GPU-a", -1, Field::kTempC, 80, 3000);
  EXPECT_FALSE(h.Verdict("GPU-a").overheating.active);
  EXPECT_TRUE(h.Alerts(true).empty());
}

}  // namespace
}  // namespace gpuaas::telemetry
