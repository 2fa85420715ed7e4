#include "telemetry/assessment.h"

#include "gtest/gtest.h"

namespace gpuaas::telemetry {
namespace {

constexpr int64_t kT0 = 1'800'000'000;

// Feeds `minutes` of one reading a minute per device.
void Feed(Hub& hub, const std::string& gpu, int gi, int minutes, double sm, double fb) {
  for (int m = 0; m < minutes; ++m) {
    GpuReport g{gpu, 0, "NVIDIA H200", 143771, gi >= 0, {}, {}, {}};
    if (gi >= 0) {
      g.instances = {{gi, "7g.141gb", 0, 8, "", {{Field::kSmActive, sm}, {Field::kFbUsedMib, fb}}}};
    } else {
      g.readings = {{Field::kSmActive, sm}, {Field::kFbUsedMib, fb}};
    }
    ASSERT_TRUE(hub.IngestReport({"n", "", (kT0 + m * 60) * 1000, {g}}, (kT0 + m * 60) * 1000).ok());
  }
}

// A meter of `pool` from `since`: `devices` (HeldDeviceKey names) of one item, and what its
// invoice would count allocated.
model::UsageRecord Meter(const std::string& pool, int64_t since, std::optional<int64_t> end, const std::string& profile,
                         std::vector<std::string> devices) {
  model::UsageRecord m;
  m.spec.pool = pool;
  m.spec.start = Time(std::chrono::seconds(since));
  if (end) m.spec.end = Time(std::chrono::seconds(*end));
  const int64_t n = static_cast<int64_t>(devices.size());
  m.spec.held = std::vector<model::UsageRecord::Held>{
      {"H200-SXM-141GB", profile, n, Time(std::chrono::seconds(since)), std::move(devices)}};
  return m;
}

PoolUsage Usage(const std::string& name, int64_t since, std::vector<AssessedDevice> devices, const Hub& hub,
                const std::string& profile, std::vector<std::string> keys, double allocated_gpu_hours) {
  PoolUsage u{"p", name, since, std::move(devices), allocated_gpu_hours, {}};
  u.metered = MeteredDevices(hub, {Meter(name, since, std::nullopt, profile, std::move(keys))}, name, "", "", kT0 + 7200);
  return u;
}

TEST(Assessment, GpuHoursUtilizationAndARightSize) {
  Hub hub;
  Feed(hub, "GPU-a", 0, 120, 0.3, 30000);
  Feed(hub, "GPU-b", 0, 120, 0.1, 20000);
  const PoolUsage pool = Usage("big", kT0,
                               {{{"GPU-a", 0, 1}, "H200-SXM-141GB", "7g.141gb"}, {{"GPU-b", 0, 1}, "H200-SXM-141GB", "7g.141gb"}},
                               hub, "7g.141gb", {"GPU-a@0", "GPU-b@0"}, 4);
  PoolAssessment a = AssessPool(hub, pool, kT0, kT0 + 7200, kT0 + 7200, {}).value();
  EXPECT_DOUBLE_EQ(a.allocated_gpus, 2);
  EXPECT_NEAR(a.allocated_gpu_hours, 4, 1e-9) << "as the invoice counts them";
  EXPECT_NEAR(a.used_gpu_hours, 0.3 * 2 + 0.1 * 2, 1e-6);
  EXPECT_NEAR(a.utilization, 0.2, 1e-6);
  EXPECT_FALSE(a.idle);
  EXPECT_NEAR(a.peak_fb_used_mib, 30000, 1e-3);
  EXPECT_NEAR(a.peak_sm_gpu_fraction, 0.3, 1e-6);
  // 1g.35gb holds the memory but not the SMs (1/7 < 0.3), 2g.35gb neither (2/7); 3g.71gb does.
  EXPECT_NE(a.suggestion.find("3g.71gb would hold it"), std::string::npos) << a.suggestion;
}

TEST(Assessment, IdlePoolsAndPoolsThatNeedTheirSize) {
  Hub hub;
  Feed(hub, "GPU-a", -1, 120, 0.01, 1000);
  Feed(hub, "GPU-b", -1, 120, 0.9, 120000);
  const PoolUsage idle = Usage("idle", kT0, {{{"GPU-a", -1, 1}, "H200-SXM-141GB", "full"}}, hub, "full", {"GPU-a"}, 2);
  PoolAssessment a = AssessPool(hub, idle, kT0, kT0 + 7200, kT0 + 7200, {}).value();
  EXPECT_TRUE(a.idle);
  EXPECT_EQ(a.idle_seconds, 7200);
  AssessmentOptions strict;
  strict.idle_for_s = 3 * 3600;
  EXPECT_FALSE(AssessPool(hub, idle, kT0, kT0 + 7200, kT0 + 7200, strict)->idle);

  const PoolUsage busy = Usage("busy", kT0, {{{"GPU-b", -1, 1}, "H200-SXM-141GB", "full"}}, hub, "full", {"GPU-b"}, 2);
  PoolAssessment b = AssessPool(hub, busy, kT0, kT0 + 7200, kT0 + 7200, {}).value();
  EXPECT_FALSE(b.idle);
  EXPECT_TRUE(b.suggestion.empty()) << b.suggestion;

  // Allocated an hour in (and a half minute): only that time counts, to the second.
  const PoolUsage late =
      Usage("late", kT0 + 3630, {{{"GPU-a", -1, 1}, "H200-SXM-141GB", "full"}}, hub, "full", {"GPU-a"}, 3570.0 / 3600);
  PoolAssessment l = AssessPool(hub, late, kT0, kT0 + 7200, kT0 + 7200, {}).value();
  EXPECT_NEAR(l.used_gpu_hours, 0.01 * 3570 / 3600, 1e-9);
  EXPECT_NEAR(l.covered_gpu_hours, 3570.0 / 3600, 1e-9);
}

// Used GPU-hours are the devices' a meter billed, while it billed them: the one definition of
// invoices and the assessment.
TEST(Assessment, UsedGpuHoursAreTheMeteredDevicesWhileTheyWereBilled) {
  Hub hub;
  Feed(hub, "GPU-a", -1, 120, 0.5, 1000);  // two hours at 50% SM activity
  Feed(hub, "GPU-b", -1, 120, 0.9, 1000);
  // "train" held GPU-a for the first hour; "other" held GPU-b.
  const std::vector<model::UsageRecord> meters = {Meter("train", kT0, kT0 + 3600, "full", {"GPU-a"}),
                                                  Meter("other", kT0, std::nullopt, "full", {"GPU-b"})};
  const std::optional<GpuHoursUsed> used =
      UsedGpuHours(hub, MeteredDevices(hub, meters, "train", "H200-SXM-141GB", "full", kT0 + 7200), kT0, kT0 + 7200, kT0 + 7200)
          .value();
  ASSERT_TRUE(used);
  EXPECT_NEAR(used->used, 0.5, 1e-6);  // one hour at 0.5, counted only while billed
  EXPECT_NEAR(used->measured, 1, 1e-6);
  // No device of that item, or no readings in the window: no figure, not zero.
  EXPECT_TRUE(MeteredDevices(hub, meters, "train", "H200-SXM-141GB", "3g.71gb", kT0 + 7200).empty());
  EXPECT_FALSE(UsedGpuHours(hub, MeteredDevices(hub, meters, "train", "", "", kT0 + 7200), kT0 + 86400, kT0 + 90000,
                            kT0 + 90000)
                   .value());
  // A meter without device names (written before it had them) names none.
  model::UsageRecord old = meters[0];
  old.spec.held.reset();
  old.spec.items = {{"H200-SXM-141GB", "full", 1}};
  EXPECT_TRUE(MeteredDevices(hub, {old}, "train", "", "", kT0 + 7200).empty());
}

}  // namespace
}  // namespace gpuaas::telemetry
