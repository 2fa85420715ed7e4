#include "agent/nvidia_smi.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "telemetry/hub.h"

namespace gpuaas::agent {

using telemetry::Field;
using telemetry::GpuReport;
using telemetry::NodeReport;
using telemetry::RecoveryAction;
using telemetry::Hub;

namespace {

const std::string kDir = "test/testdata/fixtures/";

std::optional<NodeReport> Load(const std::string& name) {
  std::ifstream in(kDir + name);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<NodeReport> r = ParseNvidiaSmiXml(ss.str(), "n", 1);
  EXPECT_TRUE(r.ok()) << name << ": " << r.status();
  if (!r.ok()) return std::nullopt;
  return *r;
}

TEST(NvidiaSmi, EveryCaptureParsesWithItsGpus) {
  ASSERT_TRUE(std::filesystem::exists(kDir)) << kDir;
  const std::vector<std::pair<std::string, size_t>> captures = {
      {"nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-a100.xml", 1},
      {"nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-b200.xml", 8},
      {"nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-gb200.xml", 4},
      {"nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-h100.xml", 8},
      {"nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-l40s.xml", 1},
      {"nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-t4.xml", 1},
      {"telegraf_nvidia_smi_testdata_a100-sxm4-v12.xml", 1},
      {"telegraf_nvidia_smi_testdata_a10g.xml", 1},
      {"telegraf_nvidia_smi_testdata_rtx-3080-v13.xml", 1},
      {"telegraf_nvidia_smi_testdata_tesla-t4.xml", 1},
  };
  for (const auto& [file, gpus] : captures) {
    std::optional<NodeReport> r = Load(file);
    ASSERT_TRUE(r) << file;
    EXPECT_EQ(r->gpus.size(), gpus) << file;
    for (const GpuReport& g : r->gpus) {
      EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u) << file;
      EXPECT_GT(g.memory_mib, 0) << file;
      EXPECT_TRUE(g.readings.count(Field::kTempC)) << file;
      // Whatever is there is plausible: no "N/A" read as a number.
      for (const auto& [f, v] : g.readings) {
        EXPECT_GE(v, 0) << file << " " << Info(f).series;
        EXPECT_LT(v, 1e6) << file << " " << Info(f).series;
      }
    }
  }
}

TEST(NvidiaSmi, H100CaptureV13) {
  std::optional<NodeReport> r = Load("nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-h100.xml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->driver_version, "580.105.08");
  const GpuReport& g = r->gpus[0];
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(g.mig_enabled);
  EXPECT_EQ(g.memory_mib, 81559);
  EXPECT_DOUBLE_EQ(g.readings.at(Field::kPowerW), 68.57);  // <average_power_draw>
  EXPECT_DOUBLE_EQ(g.readings.at(Field::kTempC), 29);
  EXPECT_DOUBLE_EQ(g.readings.at(Field::kGpuUtil), 0);
  EXPECT_DOUBLE_EQ(g.readings.at(Field::kEccDbeVolatile), 0);
  EXPECT_DOUBLE_EQ(g.readings.at(Field::kRemapFailure), 0);
  EXPECT_DOUBLE_EQ(g.readings.at(Field::kRecoveryAction), 0);  // <gpu_recovery_action>None
  EXPECT_FALSE(g.readings.count(Field::kEnergyMj));            // not in the XML
}

TEST(NvidiaSmi, MigCaptureV12AndOlderSchemas) {
  std::optional<NodeReport> mig = Load("telegraf_nvidia_smi_testdata_a100-sxm4-v12.xml");
  ASSERT_TRUE(mig);
  const GpuReport& g = mig->gpus[0];
  EXPECT_TRUE(g.mig_enabled);
  EXPECT_FALSE(g.readings.count(Field::kGpuUtil));  // N/A under MIG
  EXPECT_DOUBLE_EQ(g.readings.at(Field::kPowerW), 67.03);  // v12: <power_draw>
  ASSERT_EQ(g.instances.size(), 4u);
  EXPECT_EQ(g.instances[0].gi, 3);
  EXPECT_EQ(g.instances[3].gi, 6);
  EXPECT_DOUBLE_EQ(g.instances[0].readings.at(Field::kFbTotalMib), 19968);
  EXPECT_DOUBLE_EQ(g.instances[0].readings.at(Field::kFbUsedMib), 12);

  std::optional<NodeReport> a10g = Load("telegraf_nvidia_smi_testdata_a10g.xml");
  ASSERT_TRUE(a10g);
  EXPECT_DOUBLE_EQ(a10g->gpus[0].readings.at(Field::kPowerW), 25.58);  // v11: <power_readings>
  std::optional<NodeReport> t4 = Load("nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-t4.xml");
  ASSERT_TRUE(t4);
  EXPECT_DOUBLE_EQ(t4->gpus[0].readings.at(Field::kPowerW), 33.51);  // average N/A: the instant draw
  EXPECT_DOUBLE_EQ(t4->gpus[0].readings.at(Field::kEccSbeAggregate), 1);
  EXPECT_FALSE(t4->gpus[0].readings.count(Field::kRemapFailure));  // <remapped_rows>N/A
  std::optional<NodeReport> rtx = Load("telegraf_nvidia_smi_testdata_rtx-3080-v13.xml");
  ASSERT_TRUE(rtx);
  EXPECT_DOUBLE_EQ(rtx->gpus[0].readings.at(Field::kGpuUtil), 65);
  EXPECT_FALSE(rtx->gpus[0].readings.count(Field::kEccDbeVolatile));  // no ECC on a GeForce
}

TEST(NvidiaSmi, ReportsFeedTheHubAndBadInputIsRefused) {
  std::optional<NodeReport> r = Load("nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-b200.xml");
  ASSERT_TRUE(r);
  Hub hub;
  r->time_ms = 1'800'000'000'000;
  ASSERT_TRUE(hub.IngestReport(*r, r->time_ms).ok());
  EXPECT_TRUE(hub.series().Latest(r->gpus[7].uuid, Field::kPowerW));
  EXPECT_FALSE(hub.Verdict(r->gpus[0].uuid).failed());
  EXPECT_EQ(ParseNvidiaSmiXml("<nvidia_smi_log><gpu>", "n", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseNvidiaSmiXml("<other/>", "n", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(ParseNvidiaSmiXml("<nvidia_smi_log><gpu><uuid>x</uuid></gpu></nvidia_smi_log>", "n", 0)
                            .status()
                            .message())
                .find("no UUID"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuaas::agent
