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

TEST(Assessment, GpuHoursUtilizationAndARightSize) {
  Hub hub;
  Feed(hub, "GPU-a", 0, 120, 0.3, 30000);
  Feed(hub, "GPU-b", 0, 120, 0.1, 20000);
  PoolUsage pool{"vision", "big", kT0, {{{"GPU-a", 0, 1}, "H200-SXM-141GB", "7g.141gb"},
                                        {{"GPU-b", 0, 1}, "H200-SXM-141GB", "7g.141gb"}}};
  PoolAssessment a = AssessPool(hub, pool, kT0, kT0 + 7200, kT0 + 7200, {});
  EXPECT_DOUBLE_EQ(a.allocated_gpus, 2);
  EXPECT_NEAR(a.allocated_gpu_hours, 4, 1e-9);
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
  PoolUsage idle{"p", "idle", kT0, {{{"GPU-a", -1, 1}, "H200-SXM-141GB", "full"}}};
  PoolAssessment a = AssessPool(hub, idle, kT0, kT0 + 7200, kT0 + 7200, {});
  EXPECT_TRUE(a.idle);
  EXPECT_EQ(a.idle_seconds, 7200);
  AssessmentOptions strict;
  strict.idle_for_s = 3 * 3600;
  EXPECT_FALSE(AssessPool(hub, idle, kT0, kT0 + 7200, kT0 + 7200, strict).idle);

  PoolUsage busy{"p", "busy", kT0, {{{"GPU-b", -1, 1}, "H200-SXM-141GB", "full"}}};
  PoolAssessment b = AssessPool(hub, busy, kT0, kT0 + 7200, kT0 + 7200, {});
  EXPECT_FALSE(b.idle);
  EXPECT_TRUE(b.suggestion.empty()) << b.suggestion;

  // Allocated an hour in: only that hour counts.
  PoolUsage late{"p", "late", kT0 + 3600, {{{"GPU-a", -1, 1}, "H200-SXM-141GB", "full"}}};
  EXPECT_NEAR(AssessPool(hub, late, kT0, kT0 + 7200, kT0 + 7200, {}).allocated_gpu_hours, 1, 1e-9);
}

TEST(Assessment, UsedGpuHoursOfAPoolsRunsOnOneItem) {
  Hub hub;
  Feed(hub, "GPU-a", -1, 120, 0.5, 1000);  // two hours at 50% SM activity
  Feed(hub, "GPU-b", -1, 120, 0.9, 1000);
  std::map<std::string, model::GpuCapacity> gpus;
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    model::GpuCapacity g;
    g.spec.uuid = uuid;
    g.spec.model = "H200-SXM-141GB";
    gpus[uuid] = g;
  }
  // One run on GPU-a for the first hour, in pool "train"; another pool's run on GPU-b.
  model::Profile run;
  run.spec.pool = "train";
  run.spec.devices = {{"GPU-a", ""}};
  run.spec.start = Time(std::chrono::seconds(kT0));
  run.spec.end = Time(std::chrono::seconds(kT0 + 3600));
  model::Profile other = run;
  other.spec.pool = "other";
  other.spec.devices = {{"GPU-b", ""}};
  const std::vector<model::Profile> runs = {run, other};
  const std::optional<double> used =
      UsedGpuHours(hub, runs, "train", LookupIn(gpus), "H200-SXM-141GB", "full", kT0, kT0 + 7200, kT0 + 7200);
  ASSERT_TRUE(used);
  EXPECT_NEAR(*used, 0.5, 1e-6);  // one hour at 0.5, counted only while the run lasted
  // No run of that item, or no readings in the window: no figure, not zero.
  EXPECT_FALSE(UsedGpuHours(hub, runs, "train", LookupIn(gpus), "H200-SXM-141GB", "3g.71gb", kT0, kT0 + 7200, kT0 + 7200));
  EXPECT_FALSE(UsedGpuHours(hub, runs, "train", LookupIn(gpus), "H200-SXM-141GB", "full", kT0 + 86400, kT0 + 90000, kT0 + 90000));
}

}  // namespace
}  // namespace gpuaas::telemetry
