#include "cluster/kubernetes/enforcement.h"

#include <string>

#include "cluster/kubernetes/resource_slices.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

using nlohmann::json;
using Owners = std::map<std::string, ClusterDriver::NodeOwner>;

ObservedNode GpuNode(const std::string& name, std::map<std::string, std::string> labels = {}) {
  ObservedNode n;
  n.name = name;
  n.labels = std::move(labels);
  return n;
}

NodeMeta Meta(json taints = json::array()) {
  NodeMeta m;
  m.resource_version = "7";
  m.taints = taints.dump();
  return m;
}

const json kMaintenance = {
    {"key", "maintenance"}, {"value", "planned"}, {"effect", "PreferNoSchedule"}};
const json kVision = {
    {"key", "gpuaas.io/pool"}, {"value", "vision.train"}, {"effect", "NoSchedule"}};

TEST(KubernetesEnforcement, ANodeAPoolHoldsIsLabelledAndTaintedKeepingItsOtherTaints) {
  NodeOwnerPlan plan;
  PlanNodeOwner(GpuNode("h200-a"), Meta(json::array({kMaintenance})),
                Owners{{"h200-a", {"vision.train", 0}}}, plan);
  ASSERT_EQ(plan.patches.size(), 1u);
  EXPECT_EQ(plan.patches[0].first, "h200-a");
  const json patch = json::parse(plan.patches[0].second);
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "7")
      << "at the version seen: a node changed meanwhile is a 409";
  EXPECT_EQ(patch["metadata"]["labels"], json({{"gpuaas.io/pool", "vision.train"}}));
  EXPECT_EQ(patch["spec"]["taints"], json::array({kMaintenance, kVision}));
  EXPECT_TRUE(plan.time_slices.empty());
}

TEST(KubernetesEnforcement, ANodeAsWantedIsNotWritten) {
  NodeOwnerPlan plan;
  PlanNodeOwner(GpuNode("h200-a", {{"gpuaas.io/pool", "vision.train"}}),
                Meta(json::array({kMaintenance, kVision})), Owners{{"h200-a", {"vision.train", 0}}},
                plan);
  PlanNodeOwner(GpuNode("h200-b"), Meta(json::array({kMaintenance})),
                Owners{{"h200-a", {"vision.train", 0}}}, plan);
  EXPECT_TRUE(plan.patches.empty());
}

TEST(KubernetesEnforcement, ANodeNoPoolHoldsLosesWhatGpuaasSetOnly) {
  NodeOwnerPlan plan;
  PlanNodeOwner(GpuNode("h200-a", {{"gpuaas.io/pool", "vision.train"},
                                   {"nvidia.com/device-plugin.config", "gpuaas-time-slicing-4"}}),
                Meta(json::array({kMaintenance, kVision})), Owners{}, plan);
  // The operator's own plugin config is left alone.
  PlanNodeOwner(GpuNode("h200-b", {{"gpuaas.io/pool", "vision.train"},
                                   {"nvidia.com/device-plugin.config", "a100"}}),
                Meta(json::array({kVision})), Owners{}, plan);
  ASSERT_EQ(plan.patches.size(), 2u);
  const json a = json::parse(plan.patches[0].second);
  EXPECT_EQ(a["metadata"]["labels"],
            json({{"gpuaas.io/pool", nullptr}, {"nvidia.com/device-plugin.config", nullptr}}));
  EXPECT_EQ(a["spec"]["taints"], json::array({kMaintenance}));
  const json b = json::parse(plan.patches[1].second);
  EXPECT_EQ(b["metadata"]["labels"], json({{"gpuaas.io/pool", nullptr}}));
  EXPECT_EQ(b["spec"]["taints"], json::array());
}

TEST(KubernetesEnforcement, ATimeSlicedPoolsNodesNameItsConfig) {
  NodeOwnerPlan plan;
  const Owners owners{{"h200-a", {"vision.serve", 4}}, {"h200-b", {"vision.serve", 4}}};
  PlanNodeOwner(GpuNode("h200-a"), Meta(), owners, plan);
  // Already right: not written, but its config is still wanted.
  PlanNodeOwner(
      GpuNode("h200-b", {{"gpuaas.io/pool", "vision.serve"},
                         {"nvidia.com/device-plugin.config", "gpuaas-time-slicing-4"}}),
      Meta(json::array(
          {{{"key", "gpuaas.io/pool"}, {"value", "vision.serve"}, {"effect", "NoSchedule"}}})),
      owners, plan);
  ASSERT_EQ(plan.patches.size(), 1u);
  EXPECT_EQ(
      json::parse(plan.patches[0].second)["metadata"]["labels"]["nvidia.com/device-plugin.config"],
      "gpuaas-time-slicing-4");
  EXPECT_EQ(plan.time_slices, (std::set<int64_t>{4}));
}

TEST(KubernetesEnforcement, AProjectsRulesAreItsDevicesThatACompletePoolNames) {
  const std::map<std::string, std::string> pool_devices = {{"h200-a/gpu-0", "GPU-aaa"},
                                                           {"h200-a/gpu-1", "GPU-bbb"},
                                                           {"h200-b/gpu-0-mig-9-0-1", "MIG-ccc"}};
  const DeviceTaintRules rules =
      ProjectDeviceTaintRules("vision", {"GPU-bbb", "MIG-ccc", "GPU-elsewhere"}, pool_devices);
  EXPECT_EQ(rules, (DeviceTaintRules{
                       {DeviceTaintRuleName("vision", "h200-a", "gpu-1"), {"h200-a", "gpu-1"}},
                       {DeviceTaintRuleName("vision", "h200-b", "gpu-0-mig-9-0-1"),
                        {"h200-b", "gpu-0-mig-9-0-1"}},
                   }));
  EXPECT_TRUE(ProjectDeviceTaintRules("vision", {}, pool_devices).empty());
}

}  // namespace
}  // namespace gpuaas::cluster::kubernetes
