#include "telemetry/hub.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "telemetry/scraper.h"

namespace gpuaas::telemetry {
namespace {

constexpr int64_t kNowMs = 1'800'000'000'000;
const std::string kUuid = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660";

TEST(Hub, IngestsNvidiasMigSample) {
  const std::string path =
      "test/testdata/fixtures/nvidia-cloud-native-docs_gpu-telemetry_dcgm-exporter-rst_mig-a100-metrics.prom";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  Hub hub;
  hub.SetKnownGpus({kUuid});
  absl::StatusOr<IngestResult> r = hub.IngestText(ss.str(), kNowMs);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->samples, 21);
  EXPECT_TRUE(r->unmatched_gpus.empty());
  // Kept: temperature ×2, power, energy, XID ×2, FB free/used, GR engine ×2.
  EXPECT_EQ(r->stored, 10);
  EXPECT_EQ(r->ignored, 11);  // clocks, PCIe, NVLink, tensor, DRAM, vGPU licence
  EXPECT_EQ(hub.series().Latest(kUuid, Field::kPowerW)->second, 409.692);
  EXPECT_EQ(hub.series().Latest(kUuid, Field::kEnergyMj)->second, 319159391);
  // The instance row goes to the instance.
  EXPECT_DOUBLE_EQ(hub.series().Latest(kUuid + "/13", Field::kGrEngineActive)->second, 0.995687);
  EXPECT_DOUBLE_EQ(hub.series().Latest(kUuid, Field::kGrEngineActive)->second, 0.995630);
  ASSERT_EQ(hub.Instances(kUuid).size(), 1u);
  EXPECT_EQ(hub.Instances(kUuid)[0].profile, "1g.5gb");
  EXPECT_EQ(r->xid_events, 0);
}

TEST(Hub, GpuLevelReadingsOnMigRowsAreNotSummedAndBlanksDropped) {
  const std::string text =
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-x\",GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"1\"} 400\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-x\",GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"2\"} 400\n"
      "DCGM_FI_DEV_MEMORY_TEMP{gpu=\"0\",UUID=\"GPU-x\"} 9223372036854775794\n"
      "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-x\",GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"1\"} 0.5\n"
      "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-x\",GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"2\"} 0.25\n";
  Hub hub;
  hub.SetKnownGpus({"GPU-x", "GPU-y"});
  absl::StatusOr<IngestResult> r = hub.IngestText(text, kNowMs);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blank, 1);
  EXPECT_EQ(r->stored, 3);  // power once, two instances
  EXPECT_TRUE(r->unmatched_gpus.empty());
  auto q = hub.series().Query("GPU-x", Field::kPowerW, kNowMs / 1000, kNowMs / 1000 + 1, 1, kNowMs / 1000);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].mean, 400);
  EXPECT_FALSE(hub.series().Find("GPU-x", Field::kMemTempC) && hub.series().Latest("GPU-x", Field::kMemTempC));
  // Utilization of the two 3g instances (3/7 of a GPU each).
  std::vector<UtilizationPoint> u = hub.Utilization({{"GPU-x", 1, 3.0 / 7}, {"GPU-x", 2, 3.0 / 7}},
                                                    kNowMs / 1000, kNowMs / 1000 + 1, 1, kNowMs / 1000)
                                        .value();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_NEAR(u[0].allocated_gpus, 6.0 / 7, 1e-9);
  EXPECT_NEAR(u[0].used_gpus, 0.75 * 3 / 7, 1e-9);
  EXPECT_NEAR(u[0].utilization(), 0.375, 1e-9);
}

TEST(Hub, UnknownGpusAreCountedAndDroppedAndARefusedBodyChangesNothing) {
  Hub hub;
  hub.SetKnownGpus({"GPU-x"});
  // Readings of 1,000 made-up GPUs: counted, no series, no health state.
  std::string text;
  for (int i = 0; i < 1000; ++i) {
    text += fmt::format("DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-fake-{}\"}} 100\n", i);
  }
  text += "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-x\"} 300\n";
  absl::StatusOr<IngestResult> r = hub.IngestText(text, kNowMs);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->samples, 1001);
  EXPECT_EQ(r->unmatched, 1000);
  EXPECT_EQ(r->stored, 1);
  EXPECT_EQ(r->unmatched_gpus.size(), kMaxUnmatchedListed);  // the first of them
  EXPECT_EQ(hub.series().series_count(), 1u);
  EXPECT_FALSE(hub.series().Find("GPU-fake-7", Field::kPowerW));
  // The same for a JSON report.
  NodeReport rep;
  rep.node = "n";
  GpuReport made_up;
  made_up.uuid = "GPU-made-up";
  made_up.readings[Field::kPowerW] = 1;
  rep.gpus.push_back(made_up);
  absl::StatusOr<IngestResult> jr = hub.IngestReport(rep, kNowMs);
  ASSERT_TRUE(jr.ok());
  EXPECT_EQ(jr->unmatched, 1);
  EXPECT_EQ(hub.series().series_count(), 1u);
  // Once the inventory knows a GPU, its readings are kept (the resolution cache starts over).
  hub.SetKnownGpus({"GPU-x", "GPU-fake-7"});
  ASSERT_TRUE(hub.IngestText(text, kNowMs + 1000).ok());
  EXPECT_TRUE(hub.series().Find("GPU-fake-7", Field::kPowerW));
  const size_t series = hub.series().series_count();

  // A body refused further down (a sample stamped an hour ahead; a bad line) changes nothing.
  const std::string later = fmt::format(
      "DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-x\",GPU_I_ID=\"3\",GPU_I_PROFILE=\"1g.18gb\"}} 5\n"
      "DCGM_FI_DEV_POWER_USAGE{{gpu=\"0\",UUID=\"GPU-x\"}} 7 {}\n",
      kNowMs + 3600 * 1000);
  absl::StatusOr<IngestResult> ahead = hub.IngestText(later, kNowMs);
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ahead.status().message().find("ahead of the server's clock"), std::string::npos) << ahead.status();
  EXPECT_TRUE(hub.Instances("GPU-x").empty());  // the first line's instance was not learned
  absl::StatusOr<IngestResult> bad = hub.IngestText(
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-fake-7\"} 50\nDCGM_FI_DEV_GPU_TEMP{UUID=\"x} 2\n", kNowMs);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(hub.series().series_count(), series);
  // Huge label values and too many labels are refused.
  EXPECT_FALSE(hub.IngestText("DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-x\",Hostname=\"" + std::string(2000, 'h') + "\"} 1\n",
                              kNowMs).ok());
  std::string many = "DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-x\"";
  for (int i = 0; i < 100; ++i) many += fmt::format(",l{}=\"v\"", i);
  EXPECT_FALSE(hub.IngestText(many + "} 1\n", kNowMs).ok());
}

TEST(Hub, AdmissionRefusesTheWholeBodyWithItsOwnStatus) {
  Hub hub;
  std::vector<std::string> asked;
  GpuAdmission only_x = [&](std::string_view uuid) {
    asked.emplace_back(uuid);
    return uuid == "GPU-x" ? absl::OkStatus() : absl::PermissionDeniedError("not yours");
  };
  const std::string text =
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-x\"} 1\nDCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-x\"} 2\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-y\"} 3\n";
  absl::StatusOr<IngestResult> r = hub.IngestText(text, kNowMs, only_x);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_NE(r.status().message().find("line 3"), std::string::npos) << r.status();
  EXPECT_EQ(asked, (std::vector<std::string>{"GPU-x", "GPU-y"}));  // once per GPU
  EXPECT_EQ(hub.series().series_count(), 0u);                      // nothing of it applied
  NodeReport rep;
  rep.gpus.resize(2);
  rep.gpus[0].uuid = "GPU-x";
  rep.gpus[1].uuid = "GPU-y";
  rep.gpus[0].readings[Field::kPowerW] = 1;
  EXPECT_EQ(hub.IngestReport(rep, kNowMs, false, only_x).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(hub.series().series_count(), 0u);
  EXPECT_TRUE(hub.IngestText(text.substr(0, text.rfind("DCGM")), kNowMs, only_x).ok());
}

TEST(Hub, DevicesCountOnlyWithinTheirWindow) {
  Hub hub;
  const int64_t t0 = kNowMs / 1000;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(hub.IngestText("DCGM_FI_PROF_SM_ACTIVE{UUID=\"GPU-x\"} 0.5 " + std::to_string((t0 + i * 10) * 1000) + "\n", (t0 + 60) * 1000).ok());
  }
  // A run on the GPU from t0+20 to t0+40: two of the six 10-second steps.
  DeviceRef run{"GPU-x", -1, 1, t0 + 20, t0 + 40};
  std::vector<UtilizationPoint> u = hub.Utilization({run}, t0, t0 + 60, 10, t0 + 60).value();
  ASSERT_EQ(u.size(), 6u);
  double allocated = 0, used = 0;
  for (const UtilizationPoint& p : u) {
    allocated += p.allocated_gpus;
    used += p.used_gpus;
  }
  EXPECT_DOUBLE_EQ(allocated, 2);
  EXPECT_DOUBLE_EQ(used, 1);
  EXPECT_EQ(u[0].allocated_gpus, 0);
  EXPECT_EQ(u[2].utilization(), 0.5);
}

TEST(Hub, XidGaugeRepeatsCountOnceAcrossScrapes) {
  Hub hub;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(hub.IngestText("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-x\",err_code=\"79\"} 79\n", kNowMs + i * 15000).ok());
  }
  EXPECT_TRUE(hub.Verdict("GPU-x").reset_required.active);
  EXPECT_EQ(hub.Alerts(false).size(), 1u);
}

NodeReport SampleReport() {
  NodeReport r;
  r.node = "h200-a";
  r.time_ms = kNowMs;
  GpuReport g;
  g.uuid = "GPU-1";
  g.name = "NVIDIA H200";
  g.memory_mib = 143771;
  g.mig_enabled = true;
  g.readings = {{Field::kPowerW, 420.5}, {Field::kEnergyMj, 123456789}, {Field::kTempC, 61},
                {Field::kEccDbeVolatile, 0}};
  g.instances = {{1, "3g.71gb", 0, 4, "MIG-a", {{Field::kSmActive, 0.5}, {Field::kFbUsedMib, 30000}}},
                 {2, "3g.71gb", 4, 4, "MIG-b", {{Field::kSmActive, 0.1}, {Field::kFbUsedMib, 1000}}}};
  GpuReport full;
  full.uuid = "GPU-2";
  full.index = 1;
  full.name = "NVIDIA H200";
  full.readings = {{Field::kPowerW, 650}, {Field::kGpuUtil, 97}, {Field::kSmActive, 0.8}};
  full.xid_events = {{48, -1, kNowMs - 5}};
  r.gpus = {g, full};
  return r;
}

TEST(Hub, ReportRoundTripsThroughJsonAndDcgmText) {
  const NodeReport r = SampleReport();
  absl::StatusOr<NodeReport> back = DecodeReport(EncodeReport(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);

  // The exporter text feeds the same readings as the JSON push.
  Hub a, b;
  ASSERT_TRUE(a.IngestReport(r, kNowMs).ok());
  const std::string text = RenderDcgmText(r);
  absl::StatusOr<IngestResult> res = b.IngestText(text, kNowMs);
  ASSERT_TRUE(res.ok()) << res.status() << "\n" << text;
  for (const auto& [dev, f] : std::vector<std::pair<std::string, Field>>{
           {"GPU-1", Field::kPowerW}, {"GPU-1/1", Field::kSmActive}, {"GPU-1/2", Field::kFbUsedMib},
           {"GPU-2", Field::kGpuUtil}, {"GPU-1", Field::kEnergyMj}}) {
    ASSERT_TRUE(a.series().Latest(dev, f)) << dev;
    ASSERT_TRUE(b.series().Latest(dev, f)) << dev;
    EXPECT_EQ(a.series().Latest(dev, f)->second, b.series().Latest(dev, f)->second) << dev;
  }
  EXPECT_TRUE(a.Verdict("GPU-2").memory_errors.active);
  EXPECT_TRUE(b.Verdict("GPU-2").memory_errors.active);
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"), std::string::npos);
  EXPECT_NE(text.find("GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"2\"} 0.1\n"), std::string::npos);
  EXPECT_EQ(a.FindInstance("GPU-1", 4, ""), 2);
  EXPECT_EQ(a.FindInstance("GPU-1", -1, "MIG-a"), 1);
}

TEST(Hub, ARetriedPushCountsItsXidsOnce) {
  Hub hub;
  const NodeReport r = SampleReport();
  ASSERT_TRUE(hub.IngestReport(r, kNowMs).ok());
  absl::StatusOr<IngestResult> again = hub.IngestReport(r, kNowMs);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->xid_events, 0);
  EXPECT_EQ(hub.Alerts(false).size(), 1u);
}

TEST(Hub, OneGpuIsOneGpuWhateverTheLetterCaseOfItsUuid) {
  for (const bool inventory : {true, false}) {
    SCOPED_TRACE(inventory ? "with an inventory" : "before the inventory is known");
    Hub hub;
    if (inventory) hub.SetKnownGpus({"GPU-ab12", "GPU-cd34"});
    // An XID under one spelling, then a reset under another: the same GPU, one health state.
    NodeReport failed{"n", "", kNowMs, {{"GPU-AB12", 0, "", 0, false, {{Field::kEnergyMj, 5e9}}, {}, {{79, -1, kNowMs}}}}};
    ASSERT_TRUE(hub.IngestReport(failed, kNowMs).ok());
    const std::string kept = inventory ? "GPU-ab12" : "GPU-AB12";  // the inventory's spelling, else the first
    EXPECT_TRUE(hub.Verdict(kept).reset_required.active);
    EXPECT_EQ(hub.Verdict(kept).reset_required.reason, "Xid79");
    ASSERT_TRUE(hub.IngestText("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"gpu-ab12\"} 300\n"
                               "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-CD34\"} 200\n",
                               kNowMs + 1000)
                    .ok());
    EXPECT_EQ(hub.series().Latest(kept, Field::kPowerW)->second, 300);
    EXPECT_FALSE(hub.series().Latest("gpu-ab12", Field::kPowerW).has_value());
    EXPECT_EQ(hub.series().Latest(inventory ? "GPU-cd34" : "GPU-CD34", Field::kPowerW)->second, 200);
    NodeReport reset{"n", "", kNowMs + 2000, {{"gpu-AB12", 0, "", 0, false, {{Field::kEnergyMj, 1}}, {}, {}}}};
    ASSERT_TRUE(hub.IngestReport(reset, kNowMs + 2000).ok());
    EXPECT_FALSE(hub.Verdict(kept).reset_required.active) << hub.Verdict(kept).reset_required.reason;
    EXPECT_EQ(hub.Alerts(true).size(), 0u);
  }
}

// Two agents reporting one node (a restarted agent while the old one still runs): the second's
// lower counters are not a reset, so an XID 79 GPU does not turn healthy; the second is reported.
// Once the first has gone quiet, the second's counters are a new history (a baseline), and its
// own counter drop, or a new boot of its node, is a reset.
TEST(Hub, AResetIsBelievedOnlyFromOneReportersOwnCounters) {
  Hub hub;
  hub.SetKnownGpus({"GPU-ab12"});
  auto report = [](const std::string& agent, const std::string& boot, int64_t t, double energy, bool xid) {
    NodeReport r{"n", "", t, {{"GPU-ab12", 0, "", 0, false, {{Field::kEnergyMj, energy}}, {}, {}}}, agent, boot};
    if (xid) r.gpus[0].xid_events.push_back({79, -1, t});
    return r;
  };
  ASSERT_TRUE(hub.IngestReport(report("old", "boot-1", kNowMs, 5e9, true), kNowMs, false, nullptr, "agent-token").ok());
  ASSERT_TRUE(hub.Verdict("GPU-ab12").reset_required.active);
  // The new agent's counter (its own simulation, or a counter read anew) is lower.
  ASSERT_TRUE(hub.IngestReport(report("new", "boot-1", kNowMs + 1000, 7, false), kNowMs + 1000, false, nullptr,
                               "agent-token")
                  .ok());
  EXPECT_TRUE(hub.Verdict("GPU-ab12").reset_required.active) << "a second agent's counters are not a reset";
  EXPECT_GT(hub.second_reporter_readings(), 0);
  bool reported = false;
  for (const Alert& a : hub.Alerts(false)) reported = reported || a.reason == "SecondReporter";
  EXPECT_TRUE(reported);
  // The old one keeps reporting, the new one too: still no reset.
  for (int i = 2; i < 6; ++i) {
    const int64_t t = kNowMs + i * 10'000;
    ASSERT_TRUE(hub.IngestReport(report("old", "boot-1", t, 5e9 + i, false), t, false, nullptr, "agent-token").ok());
    ASSERT_TRUE(hub.IngestReport(report("new", "boot-1", t + 1, 7 + i, false), t + 1, false, nullptr, "agent-token").ok());
  }
  EXPECT_TRUE(hub.Verdict("GPU-ab12").reset_required.active);
  // The old one stops; past the quiet time, the new one's counters are a baseline, not a reset.
  int64_t t = kNowMs + 60'000 + HealthTracker::kReporterQuietMs + 1;
  ASSERT_TRUE(hub.IngestReport(report("new", "boot-1", t, 20, false), t, false, nullptr, "agent-token").ok());
  EXPECT_TRUE(hub.Verdict("GPU-ab12").reset_required.active);
  // Its own counter then restarts: that is a reset.
  t += 10'000;
  ASSERT_TRUE(hub.IngestReport(report("new", "boot-1", t, 3, false), t, false, nullptr, "agent-token").ok());
  EXPECT_FALSE(hub.Verdict("GPU-ab12").reset_required.active);
  // Another XID 79; the node reboots and a new agent reports after the quiet time: the new boot
  // is the reset.
  t += 10'000;
  ASSERT_TRUE(hub.IngestReport(report("new", "boot-1", t, 4, true), t, false, nullptr, "agent-token").ok());
  ASSERT_TRUE(hub.Verdict("GPU-ab12").reset_required.active);
  t += HealthTracker::kReporterQuietMs + 1;
  ASSERT_TRUE(hub.IngestReport(report("after-reboot", "boot-2", t, 9e9, false), t, false, nullptr, "agent-token").ok());
  EXPECT_FALSE(hub.Verdict("GPU-ab12").reset_required.active) << "a reboot resets the GPU";
}

TEST(Hub, BadReportsAreRefusedWithTheField) {
  struct Case {
    std::string json, want;
  };
  for (const Case& c : std::vector<Case>{
           {"[", "not valid JSON"},
           {"{\"gpus\":[]}", "report.node: required"},
           {"{\"node\":\"n\"}", "report.gpus: required"},
           {"{\"node\":\"n\",\"gpus\":[{\"uuid\":\"x\"}]}", "gpus[0].uuid: \"x\" is not a GPU UUID"},
           {"{\"node\":\"n\",\"gpus\":[{\"uuid\":\"GPU-1\",\"readings\":{\"powr_w\":1}}]}",
            "gpus[0].readings: unknown reading \"powr_w\""},
           {"{\"node\":\"n\",\"gpus\":[{\"uuid\":\"GPU-1\",\"readings\":{\"power_w\":\"1\"}}]}",
            "gpus[0].readings.power_w: must be a number"},
           {"{\"node\":\"n\",\"gpus\":[{\"uuid\":\"GPU-1\",\"xid_events\":[{\"xid\":0}]}]}",
            "gpus[0].xid_events[0].xid: must be positive"},
       }) {
    absl::StatusOr<NodeReport> r = DecodeReport(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(std::string(r.status().message()).find(c.want), std::string::npos) << r.status();
  }
}

TEST(Scraper, TargetsFailAloneAndSayWhy) {
  Hub hub;
  Scraper s(hub, {"http://a:9400/metrics", "http://b:9400/metrics", "http://c:9400/metrics"},
            [](const std::string& url) -> absl::StatusOr<std::string> {
              if (url.starts_with("http://a")) return std::string("DCGM_FI_DEV_POWER_USAGE{UUID=\"GPU-a\"} 300\n");
              if (url.starts_with("http://b")) return absl::UnavailableError("connection refused");
              return std::string("DCGM_FI_DEV_POWER_USAGE{UUID=\"GPU-c\"} 300");  // no final newline
            });
  s.ScrapeAll(kNowMs);
  EXPECT_TRUE(s.targets().at("http://a:9400/metrics").up);
  EXPECT_EQ(s.targets().at("http://a:9400/metrics").samples, 1);
  EXPECT_FALSE(s.targets().at("http://b:9400/metrics").up);
  EXPECT_EQ(s.targets().at("http://b:9400/metrics").last_error, "connection refused");
  EXPECT_NE(s.targets().at("http://c:9400/metrics").last_error.find("line 1"), std::string::npos);
  EXPECT_TRUE(hub.series().Latest("GPU-a", Field::kPowerW));
  EXPECT_FALSE(hub.series().Latest("GPU-c", Field::kPowerW));  // a bad scrape stores nothing
}

}  // namespace
}  // namespace gpuaas::telemetry

namespace gpuaas::telemetry {
namespace {

TEST(Hub, TheSimulationYieldsToRealSources) {
  Hub hub;
  NodeReport sim{"n", "", kNowMs, {{"GPU-1", 0, "", 0, false, {{Field::kPowerW, 100}}, {}, {}}}};
  ASSERT_TRUE(hub.IngestReport(sim, kNowMs, /*simulated=*/true).ok());
  EXPECT_FALSE(hub.HasRealSource("GPU-1"));
  NodeReport real = sim;
  real.time_ms += 1000;
  real.gpus[0].readings[Field::kPowerW] = 500;
  ASSERT_TRUE(hub.IngestReport(real, kNowMs).ok());
  EXPECT_TRUE(hub.HasRealSource("GPU-1"));
  sim.time_ms += 2000;
  absl::StatusOr<IngestResult> r = hub.IngestReport(sim, kNowMs, /*simulated=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stored, 0);
  EXPECT_EQ(hub.series().Latest("GPU-1", Field::kPowerW)->second, 500);
}

}  // namespace
}  // namespace gpuaas::telemetry
