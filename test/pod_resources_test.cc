// The node agent's PodResources client against a fake kubelet serving the real protobuf on a unix
// socket: device-plugin devices (GPUs, MIG devices with the "::N" suffix, time-sliced devices
// listed per container) and DRA claims; a kubelet that restarts and recreates its socket; and
// `gpuaas agent --pod-resources`, whose report and dcgm-exporter text name the pods.
#include <filesystem>
#include <thread>

#include "agent/pod_resources.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "telemetry/report.h"
#include "test/fake_kubelet.h"
#include "test/process.h"

namespace gpuaas::testing {
namespace {

using agent::PodDevice;
using nlohmann::json;

std::string TempSocket() {
  char tmpl[] = "/tmp/gpuaas-kubelet-XXXXXX";
  return std::string(mkdtemp(tmpl)) + "/kubelet.sock";
}

constexpr char kGpu0[] = "GPU-0b8c5a4e-5a9f-4f0e-9d2b-000000000000";
constexpr char kGpu1[] = "GPU-0b8c5a4e-5a9f-4f0e-9d2b-000000000001";
constexpr char kMig[] = "MIG-5d1b7c9e-3a4f-5b6c-8d7e-000000000002";

TEST(PodResources, EveryContainersDevicesAreListedAndAttachedToTheReport) {
  const std::string socket = TempSocket();
  FakeKubelet kubelet(socket);
  ASSERT_TRUE(kubelet.Start());
  v1::ListPodResourcesResponse r;
  AddDevices(r, "vision", "train-0", "trainer", "nvidia.com/gpu", {kGpu0});
  // The same MIG device time-sliced between two containers; EKS adds "::N" to shared ids.
  AddDevices(r, "vision", "infer-0", "server", "nvidia.com/mig-1g.18gb", {std::string(kMig) + "::0"});
  AddDevices(r, "vision", "infer-1", "server", "nvidia.com/mig-1g.18gb", {std::string(kMig) + "::1"});
  AddDevices(r, "kube-system", "nic", "agent", "rdma/hca", {"mlx5_0"});
  // A DRA claim: the kubelet names the driver, pool and device, not the UUID.
  v1::ContainerResources* c = r.add_pod_resources()->add_containers();
  r.mutable_pod_resources()->rbegin()->set_name("dra-0");
  r.mutable_pod_resources()->rbegin()->set_namespace_("nlp");
  c->set_name("main");
  v1::DynamicResource* dr = c->add_dynamic_resources();
  dr->set_claim_name("gpu-claim");
  dr->set_claim_namespace("nlp");
  v1::ClaimResource* cr = dr->add_claim_resources();
  cr->set_driver_name("gpu.nvidia.com");
  cr->set_pool_name("h200-01");
  cr->set_device_name("gpu-3");
  cr->add_cdi_devices()->set_name("k8s.gpu.nvidia.com/claim=0a1b-gpu-3");
  kubelet.Set(r);

  agent::PodResourcesClient client(socket);
  absl::StatusOr<std::vector<PodDevice>> devices = client.List();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 5u);
  EXPECT_EQ((*devices)[0], (PodDevice{"vision", "train-0", "trainer", "nvidia.com/gpu", kGpu0, "", "", "", ""}));
  EXPECT_EQ((*devices)[1].uuid, kMig) << "the ::N suffix is not part of the UUID";
  EXPECT_EQ((*devices)[2].uuid, kMig);
  EXPECT_EQ((*devices)[4], (PodDevice{"nlp", "dra-0", "main", "", "", "nlp/gpu-claim", "gpu.nvidia.com", "h200-01", "gpu-3"}));

  telemetry::NodeReport report;
  report.node = "h200-01";
  report.gpus.resize(2);
  report.gpus[0].uuid = kGpu0;
  report.gpus[0].readings[telemetry::Field::kPowerW] = 512;
  report.gpus[1].uuid = kGpu1;
  report.gpus[1].index = 1;
  report.gpus[1].mig_enabled = true;
  report.gpus[1].instances.push_back({1, "1g.18gb", 0, 1, kMig, {{telemetry::Field::kFbUsedMib, 9000}}, {}});
  agent::AttachPods(report, *devices);
  EXPECT_EQ(report.gpus[0].pods, (std::vector<telemetry::PodRef>{{"vision", "train-0", "trainer"}}));
  EXPECT_TRUE(report.gpus[1].pods.empty());
  EXPECT_EQ(report.gpus[1].instances[0].pods,
            (std::vector<telemetry::PodRef>{{"vision", "infer-0", "server"}, {"vision", "infer-1", "server"}}));

  // The pods travel in the report to the server, and label dcgm-exporter's rows.
  absl::StatusOr<telemetry::NodeReport> back = telemetry::DecodeReport(telemetry::EncodeReport(report));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, report);
  const std::string text = telemetry::RenderDcgmText(report);
  EXPECT_NE(text.find(std::string("UUID=\"") + kGpu0 + "\",device=\"nvidia0\",modelName=\"\",Hostname=\"h200-01\","
                      "container=\"trainer\",namespace=\"vision\",pod=\"train-0\"} 512"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU_I_ID=\"1\",container=\"server\",namespace=\"vision\",pod=\"infer-0\"} 9000"), std::string::npos)
      << text;
  // Bad pods in a pushed report are refused with the field named.
  absl::StatusOr<telemetry::NodeReport> bad = telemetry::DecodeReport(
      R"({"node": "n", "gpus": [{"uuid": "GPU-1", "pods": [{"pod": "x"}]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpus[0].pods[0].namespace"), std::string_view::npos) << bad.status();
  std::filesystem::remove_all(std::filesystem::path(socket).parent_path());
}

TEST(PodResources, AKubeletThatRecreatesItsSocketIsFoundAgainAtOnce) {
  const std::string socket = TempSocket();
  FakeKubelet kubelet(socket);
  ASSERT_TRUE(kubelet.Start());
  v1::ListPodResourcesResponse r;
  AddDevices(r, "vision", "train-0", "trainer", "nvidia.com/gpu", {kGpu0});
  kubelet.Set(r);
  agent::PodResourcesClient client(socket, std::chrono::milliseconds(500));
  ASSERT_TRUE(client.List().ok());

  kubelet.Stop();  // the kubelet restarts: its socket goes away...
  absl::StatusOr<std::vector<PodDevice>> down = client.List();
  ASSERT_TRUE(absl::IsUnavailable(down.status())) << down.status();
  EXPECT_NE(down.status().message().find(socket), std::string_view::npos) << down.status();
  EXPECT_TRUE(absl::IsUnavailable(client.List().status()));

  AddDevices(r, "vision", "train-1", "trainer", "nvidia.com/gpu", {kGpu1});
  kubelet.Set(r);
  ASSERT_TRUE(kubelet.Start());  // ...and comes back on a new socket at the same path
  const auto asked = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<PodDevice>> up = client.List();
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(500))
      << "found again by the first call, without gRPC's reconnect backoff";
  EXPECT_EQ(up->size(), 2u);
  std::filesystem::remove_all(std::filesystem::path(socket).parent_path());
}

// `gpuaas agent --pod-resources SOCKET`: the report says which pod holds which GPU; a kubelet
// that does not answer is said, and the readings still go out.
TEST(PodResources, TheAgentReportsThePodsHoldingItsGpus) {
  const std::string socket = TempSocket();
  RunResult plain = RunGpuaas("agent --simulate --once --node h200-01 --gpus 2");
  ASSERT_EQ(plain.code, 0) << plain.out;
  const json report = json::parse(plain.out.substr(plain.out.find('{')));
  const std::string uuid = report["gpus"][1]["uuid"];

  FakeKubelet kubelet(socket);
  ASSERT_TRUE(kubelet.Start());
  v1::ListPodResourcesResponse r;
  AddDevices(r, "vision", "train-0", "trainer", "nvidia.com/gpu", {uuid});
  kubelet.Set(r);
  RunResult with = RunGpuaas("agent --simulate --once --node h200-01 --gpus 2 -o text --pod-resources " + socket);
  ASSERT_EQ(with.code, 0) << with.out;
  EXPECT_NE(with.out.find("UUID=\"" + uuid + "\""), std::string::npos) << with.out;
  EXPECT_NE(with.out.find("container=\"trainer\",namespace=\"vision\",pod=\"train-0\""), std::string::npos) << with.out;
  EXPECT_EQ(kubelet.lists(), 1);

  kubelet.Stop();
  RunResult down = RunGpuaas("agent --simulate --once --node h200-01 --gpus 2 --pod-resources " + socket);
  EXPECT_EQ(down.code, 1) << down.out;
  EXPECT_NE(down.out.find(socket), std::string::npos) << down.out;
  EXPECT_NE(down.out.find("\"gpus\""), std::string::npos) << "the readings are still reported: " << down.out;
  std::filesystem::remove_all(std::filesystem::path(socket).parent_path());
}

}  // namespace
}  // namespace gpuaas::testing
