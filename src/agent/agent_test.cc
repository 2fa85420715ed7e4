#include "agent/agent.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "agent/nvml.h"
#include "agent/simulator.h"
#include "gtest/gtest.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "telemetry/hub.h"
#include "telemetry/prom_text.h"

namespace gpuaas::agent {
namespace {

using telemetry::Field;
constexpr int64_t kT0 = 1'800'000'000'000;

TEST(Faults, Parse) {
  absl::StatusOr<Fault> f = ParseFault("xid=79@GPU-abc+30s");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, Fault::Kind::kXid);
  EXPECT_EQ(f->xid, 79);
  EXPECT_EQ(f->target, "GPU-abc");
  EXPECT_EQ(f->after_ms, 30000);
  EXPECT_EQ(ParseFault("dbe@1")->kind, Fault::Kind::kDoubleBitEcc);
  EXPECT_EQ(ParseFault("reset@0+2m")->after_ms, 120000);
  for (const char* bad : {"xid=79", "xid=x@0", "boom@0", "dbe@", "hot@0+5h", "xid=-1@0"}) {
    EXPECT_EQ(ParseFault(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(Simulator, PlausibleReadingsAndCountersThatOnlyGrow) {
  Simulator sim("n1", SyntheticGpus("n1", 2), {});
  double last_energy = 0;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<telemetry::NodeReport> r = sim.Read(kT0 + i * 10'000);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->gpus.size(), 2u);
    const telemetry::Readings& g = r->gpus[0].readings;
    EXPECT_GE(g.at(Field::kPowerW), 70);
    EXPECT_LE(g.at(Field::kPowerW), 700);
    EXPECT_GE(g.at(Field::kSmActive), 0);
    EXPECT_LE(g.at(Field::kSmActive), 1);
    EXPECT_LT(g.at(Field::kFbUsedMib), r->gpus[0].memory_mib);
    EXPECT_GE(g.at(Field::kEnergyMj), last_energy);
    if (i > 0) {
      // Energy grows by power × time: between 70 W and 700 W over 10 s.
      EXPECT_GE(g.at(Field::kEnergyMj) - last_energy, 70 * 10 * 1000 - 1);
      EXPECT_LE(g.at(Field::kEnergyMj) - last_energy, 700 * 10 * 1000 + 1);
    }
    last_energy = g.at(Field::kEnergyMj);
  }
  EXPECT_NE(SyntheticGpus("n1", 1)[0].uuid, SyntheticGpus("n2", 1)[0].uuid);
  EXPECT_EQ(SyntheticGpus("n1", 1)[0].uuid, SyntheticGpus("n1", 1)[0].uuid);
}

TEST(Simulator, InjectedFaultsReachTheHealthRules) {
  std::vector<SimGpu> gpus = SyntheticGpus("n1", 3);
  Simulator sim("n1", gpus, {*ParseFault("xid=79@0"), *ParseFault("dbe@" + gpus[1].uuid + "+20s"),
                             *ParseFault("reset@1+60s")});
  telemetry::Hub hub;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(hub.IngestReport(*sim.Read(kT0 + i * 10'000), kT0 + i * 10'000).ok());
  EXPECT_EQ(hub.Verdict(gpus[0].uuid).reset_required.reason, "Xid79");
  EXPECT_TRUE(hub.Verdict(gpus[1].uuid).memory_errors.active);
  EXPECT_FALSE(hub.Verdict(gpus[2].uuid).failed());
  // A GPU off the bus reports no readings, only its XID.
  absl::StatusOr<telemetry::NodeReport> r = sim.Read(kT0 + 50'000);
  EXPECT_TRUE(r->gpus[0].readings.empty());
  // GPU 1 is reset at 60 s: energy restarts, volatile ECC clears, the GPU is healthy again.
  for (int i = 6; i < 9; ++i) ASSERT_TRUE(hub.IngestReport(*sim.Read(kT0 + i * 10'000), kT0 + i * 10'000).ok());
  EXPECT_FALSE(hub.Verdict(gpus[1].uuid).failed());
  EXPECT_TRUE(hub.Verdict(gpus[0].uuid).failed());
}

TEST(Simulator, ItsExporterTextIsStrictPrometheusText) {
  SimGpu mig = SyntheticGpus("n1", 1)[0];
  mig.instances = {{1, "3g.71gb", 0, 4, "MIG-1", 3, 67710}, {2, "3g.71gb", 4, 4, "MIG-2", 3, 67710}};
  Simulator sim("n1", {mig, SyntheticGpus("n2", 1)[0]}, {*ParseFault("xid=31@0")});
  std::vector<telemetry::NodeReport> reports = {*sim.Read(kT0), *sim.Read(kT0 + 1000)};
  const std::string text = telemetry::RenderDcgmText(reports);
  telemetry::Hub hub;
  absl::StatusOr<telemetry::IngestResult> r = hub.IngestText(text, kT0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blank, 0);
  ASSERT_TRUE(hub.series().Latest(mig.uuid + "/2", Field::kSmActive));
  EXPECT_NE(text.find("GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"2\""), std::string::npos);
}

TEST(Inventory, SimulatedGpusComeFromTheServersGpuCapacities) {
  model::GpuCapacity a;
  a.metadata.name = "gpu-a";
  a.metadata.labels = {{"gpuaas.io/node", "alpha.h200-0"}};
  a.spec = {"alpha", "alpha.h200-0", "GPU-a", 0, "H200-SXM-141GB", "H200", 143771, true};
  a.status.mig_mode = model::MigMode::kEnabled;
  a.status.mig_instances = {{"3g.71gb", 0, 4, "MIG-x", false}, {"1g.18gb", 4, 1, "MIG-y", false}};
  model::GpuCapacity b = a;
  b.metadata.name = "gpu-b";
  b.metadata.labels = {{"gpuaas.io/node", "alpha.h200-1"}};
  b.spec.uuid = "GPU-b";
  b.spec.node = "alpha.h200-1";
  b.status.mig_mode = model::MigMode::kDisabled;
  b.status.mig_instances.clear();
  const std::string body = "{\"items\":[" + model::Encode(a) + "," + model::Encode(b) + "]}";
  auto all = SimGpusFromInventory(body, "");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].first, "alpha.h200-0");
  const SimGpu& g = (*all)[0].second[0];
  ASSERT_EQ(g.instances.size(), 2u);
  EXPECT_EQ(g.instances[0].gi, 1);
  EXPECT_EQ(g.instances[0].compute_slices, 3);
  EXPECT_EQ(g.instances[1].start, 4);
  EXPECT_EQ(g.instances[1].uuid, "MIG-y");
  auto one = SimGpusFromInventory(body, "h200-1");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_TRUE((*one)[0].second[0].instances.empty());
  EXPECT_EQ(SimGpusFromInventory(body, "nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SimGpusFromInventory("[]", "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Nvml, WithoutTheLibraryItSaysSo) {
  absl::StatusOr<std::unique_ptr<GpuSource>> s = OpenNvml("n", "/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.status().message()).find("cannot load NVML"), std::string::npos);
  EXPECT_NE(std::string(s.status().message()).find("--simulate"), std::string::npos);
  std::ostringstream out, err;
  AgentOptions o;
  o.once = true;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  EXPECT_EQ(RunAgent(o, out, err), 1);
  EXPECT_NE(err.str().find("cannot load NVML"), std::string::npos);
}

TEST(Nvml, ReadsThroughTheLibraryWithUnitsConverted) {
  absl::StatusOr<std::unique_ptr<GpuSource>> s = OpenNvml("n", FAKE_NVML_PATH);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<telemetry::NodeReport> r = (*s)->Read(kT0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->driver_version, "570.124.06");
  ASSERT_EQ(r->gpus.size(), 2u);
  const telemetry::GpuReport& g0 = r->gpus[0];
  EXPECT_EQ(g0.uuid, "GPU-fake-0");
  EXPECT_DOUBLE_EQ(g0.readings.at(Field::kPowerW), 412.345);  // mW -> W
  EXPECT_DOUBLE_EQ(g0.readings.at(Field::kEnergyMj), 987654321);
  EXPECT_DOUBLE_EQ(g0.readings.at(Field::kGpuUtil), 87);
  EXPECT_DOUBLE_EQ(g0.readings.at(Field::kFbUsedMib), 40000);
  EXPECT_DOUBLE_EQ(g0.readings.at(Field::kRemapCorrectable), 1);
  ASSERT_EQ(g0.xid_events.size(), 1u);
  EXPECT_EQ(g0.xid_events[0].xid, 79);
  EXPECT_EQ(g0.xid_events[0].gi, -1);
  const telemetry::GpuReport& g1 = r->gpus[1];
  EXPECT_TRUE(g1.mig_enabled);
  EXPECT_EQ(g1.readings.count(Field::kGpuUtil), 0u);  // not on MIG
  EXPECT_DOUBLE_EQ(g1.readings.at(Field::kEccDbeVolatile), 2);
  ASSERT_EQ(g1.instances.size(), 2u);
  EXPECT_EQ(g1.instances[1].gi, 2);
  EXPECT_EQ(g1.instances[1].profile, "3g.71gb");
  EXPECT_EQ(g1.instances[1].start, 4);
  EXPECT_EQ(g1.instances[1].uuid, "MIG-bbbb");
  EXPECT_DOUBLE_EQ(g1.instances[1].readings.at(Field::kFbUsedMib), 10240);
  // The event was delivered once.
  EXPECT_TRUE((*s)->Read(kT0 + 1000)->gpus[0].xid_events.empty());

  std::ostringstream out, err;
  AgentOptions o;
  o.once = true;
  o.node = "gpu-node-1";
  o.output = "text";
  o.nvml_library = FAKE_NVML_PATH;
  ASSERT_EQ(RunAgent(o, out, err), 0) << err.str();
  telemetry::Hub hub;
  ASSERT_TRUE(hub.IngestText(out.str(), kT0).ok()) << out.str();
  EXPECT_DOUBLE_EQ(hub.series().Latest("GPU-fake-1/2", Field::kFbUsedMib)->second, 10240);
}

TEST(NvidiaSmiSource, ACaptureBecomesDcgmExporterText) {
  const std::string capture = "test/testdata/fixtures/nvidia-k8s-test-infra_nvidia-smi-q-x_hardware_qx-h100.xml";
  std::ostringstream out, err;
  AgentOptions o;
  o.once = true;
  o.output = "text";
  o.node = "h100-node";
  o.nvidia_smi_xml = capture;
  ASSERT_TRUE(std::ifstream(capture).good()) << capture;
  ASSERT_EQ(RunAgent(o, out, err), 0) << err.str();
  telemetry::Hub hub;
  absl::StatusOr<telemetry::IngestResult> r = hub.IngestText(out.str(), kT0);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string text = out.str();
  EXPECT_GT(std::count(text.begin(), text.end(), '\n'), 8 * 5);
  EXPECT_NE(out.str().find("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-000000000000\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"h100-node\"} 68.57"),
            std::string::npos)
      << out.str().substr(0, 2000);
  o.nvidia_smi_xml = "/nonexistent.xml";
  std::ostringstream out2, err2;
  EXPECT_EQ(RunAgent(o, out2, err2), 1);
  EXPECT_NE(err2.str().find("cannot read /nonexistent.xml"), std::string::npos);
  o.simulate = true;
  EXPECT_EQ(RunAgent(o, out2, err2), 2);
}

}  // namespace
}  // namespace gpuaas::agent
