#include "cluster/kubernetes/nodes.h"

#include <fstream>
#include <sstream>

#include "catalog/catalog.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

using nlohmann::json;

constexpr char kRecordedMixedNode[] =
    "test/testdata/fixtures/nvidia-cloud-native-docs_gpu-operator_output_mig-mixed-node-labels.json";

// The GPU Operator's recorded mixed-strategy node: an H100 80GB with all-balanced MIG (empty
// when the file cannot be read).
json MixedNodeLabels() {
  std::ifstream in(kRecordedMixedNode);
  if (!in) return json();
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// The GPU labels of that node, for tests that need a MIG node but not the recording.
json H100AllBalancedLabels() {
  return {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu.count", "1"},
          {"nvidia.com/gpu.memory", "81559"},                 {"nvidia.com/mig.capable", "true"},
          {"nvidia.com/mig.strategy", "mixed"},               {"nvidia.com/mig-1g.10gb.count", "2"},
          {"nvidia.com/mig-2g.20gb.count", "1"},              {"nvidia.com/mig-3g.40gb.count", "1"}};
}

json Node(const std::string& name, json labels, json capacity = json::object(), json allocatable = json::object(),
          bool ready = true) {
  return {{"kind", "Node"},
          {"apiVersion", "v1"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", json::object()},
          {"status",
           {{"capacity", capacity},
            {"allocatable", allocatable.empty() ? capacity : allocatable},
            {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

TEST(KubernetesNodes, TheGpuOperatorsMixedNodeIsOneH100WithItsAllBalancedInstancesPlacedLegally) {
  const json recorded = MixedNodeLabels();
  ASSERT_FALSE(recorded.is_null()) << "the recorded node labels in test/testdata/fixtures/";
  const json n = Node("mig-node", recorded,
                      {{"cpu", "128"}, {"memory", "1056451724Ki"}, {"nvidia.com/mig-1g.10gb", "2"},
                       {"nvidia.com/mig-2g.20gb", "1"}, {"nvidia.com/mig-3g.40gb", "1"}});
  absl::StatusOr<ObservedNode> node = ReadNode("lab", n.dump());
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->name, "mig-node");
  EXPECT_EQ(node->gpu_product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(node->cpu_cores, 128);
  EXPECT_EQ(node->memory_bytes, 1056451724LL * 1024);
  EXPECT_TRUE(node->schedulable);
  EXPECT_EQ(node->labels.at("nvidia.com/mig.config"), "all-balanced");
  EXPECT_EQ(node->labels.count("nvidia.com/gfd.timestamp"), 0u) << "changes every run; would look like a change";
  ASSERT_EQ(node->gpus.size(), 1u);
  const ObservedGpu& g = node->gpus[0];
  EXPECT_EQ(g.uuid, DerivedGpuUuid("lab", "mig-node", 0));
  EXPECT_EQ(g.memory_mib, 81559);
  EXPECT_TRUE(g.mig_enabled);
  std::map<std::string, int> profiles;
  catalog::Layout layout;
  const catalog::GpuModel* m = *catalog::ModelFromProduct(node->gpu_product);
  for (const ObservedMigInstance& mi : g.mig_instances) {
    ++profiles[mi.profile];
    EXPECT_TRUE(mi.uuid.starts_with("MIG-"));
    layout.push_back({catalog::FindProfile(*m, mi.profile), mi.start});
  }
  EXPECT_EQ(profiles, (std::map<std::string, int>{{"1g.10gb", 2}, {"2g.20gb", 1}, {"3g.40gb", 1}}));
  EXPECT_TRUE(catalog::ValidateLayout(*m, layout).ok()) << catalog::FormatLayout(layout);
  // The same node read again is the same observation: the driver reports no change.
  EXPECT_EQ(*ReadNode("lab", n.dump()), *node);
}

TEST(KubernetesNodes, FullGpusCordonsAndDevicesThePluginHoldsBack) {
  const json labels = {{"nvidia.com/gpu.product", "NVIDIA-H200"}, {"nvidia.com/gpu.count", "8"},
                       {"nvidia.com/gpu.memory", "143771"}, {"nvidia.com/gpu.replicas", "1"}};
  json n = Node("h200-a", labels, {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", "8"}},
                {{"cpu", "220"}, {"memory", "1Ti"}, {"nvidia.com/gpu", "7"}});
  absl::StatusOr<ObservedNode> node = ReadNode("lab", n.dump());
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_EQ(node->gpus.size(), 8u);
  EXPECT_EQ(node->memory_bytes, 2LL << 40);
  int unhealthy = 0;
  for (const ObservedGpu& g : node->gpus) {
    EXPECT_FALSE(g.mig_enabled);
    EXPECT_EQ(g.memory_mib, 143771);
    unhealthy += g.healthy ? 0 : 1;
  }
  EXPECT_EQ(unhealthy, 1) << "allocatable 7 of 8: one device held back by the plugin";
  EXPECT_TRUE(node->schedulable);

  n["spec"]["unschedulable"] = true;  // kubectl cordon
  EXPECT_FALSE(ReadNode("lab", n.dump())->schedulable);
  EXPECT_FALSE(ReadNode("lab", Node("h200-b", labels, {}, {}, /*ready=*/false).dump())->schedulable);
  // GPU names are stable per cluster, node and index, and differ between them.
  EXPECT_NE(DerivedGpuUuid("lab", "h200-a", 0), DerivedGpuUuid("lab", "h200-a", 1));
  EXPECT_NE(DerivedGpuUuid("lab", "h200-a", 0), DerivedGpuUuid("prod", "h200-a", 0));
}

TEST(KubernetesPods, CpuAndMemoryAreWhatContainersRequestElseTheirLimit) {
  EXPECT_EQ(ParseCpuMilli("500m"), 500);
  EXPECT_EQ(ParseCpuMilli("2"), 2000);
  EXPECT_EQ(ParseCpuMilli("1.5"), 1500);
  EXPECT_EQ(ParseCpuMilli(".25"), 250);
  EXPECT_EQ(ParseCpuMilli("0.0001"), 1);  // rounded up to a millicore
  for (const char* bad : {"", "m", "1.", "-1", "1e3", "two", "1.5m", "1 "}) EXPECT_EQ(ParseCpuMilli(bad), std::nullopt) << bad;
  json containers = json::array();
  containers.push_back({{"name", "main"},
                        {"resources", {{"requests", {{"cpu", "1500m"}, {"memory", "2Gi"}}}, {"limits", {{"cpu", "4"}, {"memory", "8Gi"}}}}}});
  containers.push_back({{"name", "helper"}, {"resources", {{"limits", {{"cpu", "2"}, {"memory", "512Mi"}}}}}});
  containers.push_back({{"name", "sidecar"}});
  const json pod = {{"metadata", {{"name", "p"}, {"namespace", "vision"}}},
                    {"spec", {{"nodeName", "n1"}, {"containers", containers}}},
                    {"status", {{"phase", "Running"}}}};
  absl::StatusOr<PodGpus> p = ReadPod(pod.dump());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->cpu_milli, 3500);
  EXPECT_EQ(p->memory_bytes, (int64_t{2} << 30) + (int64_t{512} << 20));
  EXPECT_FALSE(p->Holds());  // no GPU: its requests count, its devices do not
}

TEST(KubernetesPods, DevicesOfBoundUnfinishedPodsAreMarkedInUse) {
  const json pod = {{"metadata", {{"name", "p"}, {"namespace", "vision"}}},
                    {"spec",
                     {{"nodeName", "n1"},
                      {"containers",
                       {{{"resources", {{"limits", {{"nvidia.com/gpu", "1"}, {"cpu", "4"}}}}}},
                        {{"resources", {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/mig-1g.10gb", "2"}}}}}}}}}},
                    {"status", {{"phase", "Running"}}}};
  absl::StatusOr<PodGpus> p = ReadPod(pod.dump());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->key, "vision/p");
  EXPECT_TRUE(p->active);
  EXPECT_EQ(p->devices, (std::map<std::string, int64_t>{{"nvidia.com/gpu", 2}, {"nvidia.com/mig-1g.10gb", 2}}));
  json done = pod;
  done["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(ReadPod(done.dump())->active);
  json unbound = pod;
  unbound["spec"].erase("nodeName");
  EXPECT_FALSE(ReadPod(unbound.dump())->active);
  // A pod of DRA claims names them in its status (the claim of a template has a generated name).
  json claimed = {{"metadata", {{"name", "q"}, {"namespace", "vision"}}},
                  {"spec", {{"nodeName", "n1"}, {"resourceClaims", json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}})}}},
                  {"status",
                   {{"phase", "Running"},
                    {"resourceClaimStatuses", json::array({{{"name", "gpu"}, {"resourceClaimName", "q-gpu-7x2kd"}},
                                                           {{"name", "none"}, {"resourceClaimName", nullptr}}})}}}};
  absl::StatusOr<PodGpus> q = ReadPod(claimed.dump());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->claims, std::vector<std::string>{"vision/q-gpu-7x2kd"});
  EXPECT_TRUE(q->Holds());
  EXPECT_TRUE(q->devices.empty());
  EXPECT_TRUE(absl::IsInvalidArgument(ReadPod("{}").status()));

  ObservedNode node = *ReadNode("lab", Node("mig-node", H100AllBalancedLabels()).dump());
  ObservedGpu full;  // and one whole GPU beside the MIG one
  full.uuid = "GPU-x";
  node.gpus.push_back(full);
  PodGpus a{"ml/a", "mig-node", true, {{"nvidia.com/gpu", 1}, {"nvidia.com/mig-1g.10gb", 2}}};
  PodGpus b{"ml/b", "mig-node", true, {{"nvidia.com/mig-3g.40gb", 5}}};
  HeldDevices sticky;
  ObservedNode marked = node;
  MarkHeld({&a, &b}, {}, {}, sticky, marked);
  EXPECT_TRUE(marked.gpus[1].in_use);
  EXPECT_EQ(marked.gpus[1].pods, std::vector<std::string>{"ml/a"});
  int small = 0, large = 0;
  for (const ObservedMigInstance& mi : marked.gpus[0].mig_instances) {
    small += mi.in_use && mi.profile == "1g.10gb" ? 1 : 0;
    large += mi.in_use && mi.profile == "3g.40gb" ? 1 : 0;
    if (mi.in_use) {
      EXPECT_EQ(mi.pods, std::vector<std::string>{mi.profile == "1g.10gb" ? "ml/a" : "ml/b"});
    }
  }
  EXPECT_EQ(small, 2);
  EXPECT_EQ(large, 1) << "no more than the node has, and a pod does not share a device with itself";
  ASSERT_EQ(sticky["ml/a"].size(), 3u);
  EXPECT_EQ(sticky["ml/b"].size(), 1u);

  // A guess stays while the pod runs: with a gone, b keeps its instance, and c (asking for the
  // same profile as a did) gets the first free ones, not b's.
  const std::vector<std::string> a_had = sticky["ml/a"];
  PodGpus c{"ml/c", "mig-node", true, {{"nvidia.com/mig-1g.10gb", 1}}};
  PodGpus b1{"ml/b", "mig-node", true, {{"nvidia.com/mig-3g.40gb", 1}}};
  ObservedNode again = node;
  sticky.erase("ml/a");
  const std::vector<std::string> b_had = sticky["ml/b"];
  MarkHeld({&c, &b1}, {}, {}, sticky, again);
  EXPECT_EQ(sticky["ml/b"], b_had);
  ASSERT_EQ(sticky["ml/c"].size(), 1u);
  EXPECT_EQ(sticky["ml/c"][0], a_had[1]) << "the first free 1g.10gb";

  // Exact devices (DRA claims) come first: the instance a claim names is the pod's, and a
  // counted pod is placed around it.
  const std::string named = node.gpus[0].mig_instances[0].uuid;  // a 1g.10gb
  PodGpus d{"ml/d", "mig-node", true, {}, {"ml/claim"}};
  HeldDevices sticky2;
  ObservedNode exact = node;
  MarkHeld({&c, &d}, {{"ml/d", {named}}}, {}, sticky2, exact);
  EXPECT_EQ(sticky2["ml/d"], std::vector<std::string>{named});
  EXPECT_NE(sticky2["ml/c"][0], named);

  // Shared by time: more pods than GPUs spread over the GPUs, the least shared first.
  ObservedNode ts = *ReadNode("lab", Node("full", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                                   {"nvidia.com/gpu.count", "2"},
                                                   {"nvidia.com/gpu.memory", "81559"}})
                                      .dump());
  std::vector<PodGpus> sharers;
  for (int i = 0; i < 4; ++i) sharers.push_back({fmt::format("ml/s{}", i), "full", true, {{"nvidia.com/gpu", 1}}});
  HeldDevices sticky3;
  MarkHeld({&sharers[0], &sharers[1], &sharers[2], &sharers[3]}, {}, {}, sticky3, ts);
  EXPECT_EQ(ts.gpus[0].pods, (std::vector<std::string>{"ml/s0", "ml/s2"}));
  EXPECT_EQ(ts.gpus[1].pods, (std::vector<std::string>{"ml/s1", "ml/s3"}));

  // A project's pods go to the devices its pools hold, then to devices no pool holds, and only
  // then to another project's.
  ObservedNode owned = *ReadNode("lab", Node("full", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                                      {"nvidia.com/gpu.count", "3"},
                                                      {"nvidia.com/gpu.memory", "81559"}})
                                         .dump());
  const std::map<std::string, std::string> owners = {{owned.gpus[0].uuid, "other"}, {owned.gpus[2].uuid, "ml"}};
  PodGpus two{"ml/two", "full", true, {{"nvidia.com/gpu", 2}}};
  HeldDevices sticky4;
  MarkHeld({&two}, {}, owners, sticky4, owned);
  EXPECT_EQ(sticky4["ml/two"], (std::vector<std::string>{owned.gpus[2].uuid, owned.gpus[1].uuid}));
  EXPECT_FALSE(owned.gpus[0].in_use);
}

TEST(KubernetesNodes, NodesWithoutGpusAndObjectsThatAreNotNodes) {
  EXPECT_TRUE(absl::IsNotFound(ReadNode("lab", Node("cpu-only", {{"kubernetes.io/os", "linux"}}).dump()).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ReadNode("lab", "{\"kind\":\"Node\"}").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ReadNode("lab", "not json").status()));
  // A GPU the catalogue does not know is listed (the inventory flags its node), not dropped.
  absl::StatusOr<ObservedNode> unknown = ReadNode(
      "lab", Node("odd", {{"nvidia.com/gpu.product", "NVIDIA-Quantum-9000"}, {"nvidia.com/gpu.count", "2"},
                          {"nvidia.com/gpu.memory", "200000"}, {"nvidia.com/mig.strategy", "mixed"},
                          {"nvidia.com/mig-1g.10gb.count", "4"}})
                 .dump());
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->gpu_product, "NVIDIA-Quantum-9000");
  ASSERT_EQ(unknown->gpus.size(), 2u);
  EXPECT_EQ(unknown->gpus[0].memory_mib, 200000);
  EXPECT_FALSE(unknown->gpus[0].mig_enabled) << "no geometry to place instances with";
  // Labels that are wrong for a known product are refused, naming the node.
  absl::StatusOr<ObservedNode> bad =
      ReadNode("lab", Node("bad", {{"nvidia.com/gpu.product", "NVIDIA-H200"}, {"nvidia.com/gpu.count", "many"}}).dump());
  ASSERT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("node bad"), std::string_view::npos) << bad.status();
}

TEST(KubernetesNodes, MetaIsWhatAWriteAtTheSeenVersionNeeds) {
  json n = Node("h200-a", {{"nvidia.com/gpu.product", "NVIDIA-H200"}});
  n["metadata"]["resourceVersion"] = "42";
  n["metadata"]["annotations"] = {{std::string(kCordonAnnotation), "true"}};
  n["spec"]["unschedulable"] = true;
  n["spec"]["taints"] = json::array({{{"key", "maintenance"}, {"effect", "NoSchedule"}}});
  const NodeMeta meta = ReadNodeMeta(n.dump());
  EXPECT_EQ(meta.resource_version, "42");
  EXPECT_TRUE(meta.cordoned_for_mig);
  EXPECT_TRUE(meta.unschedulable);
  EXPECT_EQ(json::parse(meta.taints), n["spec"]["taints"]);

  // Nothing set: no taints, schedulable, not cordoned by gpuaas; what is not JSON likewise.
  const NodeMeta plain = ReadNodeMeta(Node("h200-b", json::object()).dump());
  EXPECT_EQ(plain.taints, "[]");
  EXPECT_FALSE(plain.unschedulable);
  EXPECT_FALSE(plain.cordoned_for_mig);
  EXPECT_EQ(ReadNodeMeta("not json"), NodeMeta{});
  // A field of the wrong type is ignored, not thrown on.
  json odd = Node("odd", json::object());
  odd["spec"]["unschedulable"] = "yes";
  odd["spec"]["taints"] = "none";
  EXPECT_EQ(ReadNodeMeta(odd.dump()), NodeMeta{});
}

}  // namespace
}  // namespace gpuaas::cluster::kubernetes
