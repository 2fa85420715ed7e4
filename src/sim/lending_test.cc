// Lending mode on a generated trace: lent time comes only out of idle pool time, the owners wait
// at most the grace for it, and without lending nothing is lent and every borrower gives up.
#include "sim/lending.h"

#include <random>

#include "fmt/format.h"
#include "gtest/gtest.h"

namespace gpuaas::sim {
namespace {

std::vector<TracePod> Trace(int pods, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TracePod> out;
  int64_t t = 0;
  for (int i = 0; i < pods; ++i) {
    TracePod p;
    p.name = fmt::format("pod-{}", i);
    p.shape.num_gpu = std::uniform_int_distribution<int>(1, 4)(rng);
    p.shape.gpu_milli = 1000;
    t += std::uniform_int_distribution<int64_t>(0, 600)(rng);
    p.creation_time = t;
    p.deletion_time = t + std::uniform_int_distribution<int64_t>(60, 7200)(rng);
    out.push_back(p);
  }
  return out;
}

TEST(LendingSim, LentTimeComesOutOfIdleTimeAndOwnersWaitAtMostTheGrace) {
  const std::vector<TracePod> trace = Trace(2000, 7);
  LendingConfig c;
  c.grace = 30;
  c.idle_after = 300;
  absl::StatusOr<LendingResult> on = RunLending(trace, 42, c);
  ASSERT_TRUE(on.ok()) << on.status();
  c.lending = false;
  absl::StatusOr<LendingResult> off = RunLending(trace, 42, c);
  ASSERT_TRUE(off.ok()) << off.status();

  // The same split and pools either way.
  EXPECT_EQ(on->owner_pods, off->owner_pods);
  EXPECT_EQ(on->pool_gpus, off->pool_gpus);
  EXPECT_NEAR(on->idle_gpu_hours, off->idle_gpu_hours, 1e-6);
  EXPECT_GT(on->borrower_pods, 400);
  EXPECT_GT(on->idle_gpu_hours, 0);
  // Without lending: nothing lent, nobody reclaimed or delayed, every borrower gives up.
  EXPECT_EQ(off->lent_gpu_hours, 0);
  EXPECT_EQ(off->reclaims, 0);
  EXPECT_EQ(off->owners_delayed, 0);
  EXPECT_EQ(off->borrowers_gave_up, off->borrower_pods);
  // With it: some idle time is lent, never more than there was, and reclaims cost the owners at
  // most the grace.
  EXPECT_GT(on->lent_gpu_hours, 0);
  EXPECT_LE(on->lent_gpu_hours, on->idle_gpu_hours);
  EXPECT_GT(on->borrowers_completed, 0);
  EXPECT_EQ(on->borrowers_completed + on->borrowers_gave_up, on->borrower_pods);
  EXPECT_GT(on->reclaims, 0);
  EXPECT_LE(on->delay_p50_s, 30.0 + 1e-9);
}

TEST(LendingSim, RefusesWhatItCannotRun) {
  std::vector<TracePod> trace = Trace(10, 1);
  trace[3].deletion_time = -1;
  EXPECT_FALSE(RunLending(trace, 1, {}).ok());
  LendingConfig c;
  c.projects = 1;
  EXPECT_FALSE(RunLending(Trace(10, 1), 1, c).ok());
  c = {};
  c.borrower_share = 1.5;
  EXPECT_FALSE(RunLending(Trace(10, 1), 1, c).ok());
}

}  // namespace
}  // namespace gpuaas::sim
