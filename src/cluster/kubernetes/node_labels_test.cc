#include "cluster/kubernetes/node_labels.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

// The real labels of a GPU Operator node (mixed strategy, all-balanced on one H100 80GB HBM3),
// as NVIDIA's GPU Operator docs record them; tests run from the repository root.
constexpr char kMixedFixture[] = "test/testdata/fixtures/nvidia-cloud-native-docs_gpu-operator_output_mig-mixed-node-labels.json";

TEST(NodeLabels, TheOperatorsMixedStrategyNodeReadsAsItsMigDevices) {
  ASSERT_TRUE(std::filesystem::exists(kMixedFixture)) << kMixedFixture;
  std::ifstream in(kMixedFixture);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<std::string, std::string> labels;
  for (const auto& [k, v] : j.items()) labels[k] = v.get<std::string>();
  absl::StatusOr<NodeGpus> n = ReadNodeLabels(labels);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->model->name, "H100-SXM5-80GB");
  EXPECT_EQ(n->gpus, 1);
  EXPECT_EQ(n->memory_mib, 81559);
  EXPECT_TRUE(n->mig_capable);
  EXPECT_EQ(n->mig_strategy, MigStrategy::kMixed);
  EXPECT_EQ(n->mig_devices, (std::map<std::string, int64_t>{{"1g.10gb", 2}, {"2g.20gb", 1}, {"3g.40gb", 1}}));
  EXPECT_EQ(n->mig_config, "all-balanced");
  EXPECT_EQ(n->mig_config_state, "success");
  EXPECT_EQ(n->replicas, 1);  // gpu.replicas "0": no time slicing
}

TEST(NodeLabels, TheSingleStrategyCountsMigDevicesNotGpus) {
  // gpu-operator-mig.rst: all-1g.10gb on one H100 under the single strategy.
  absl::StatusOr<NodeGpus> n = ReadNodeLabels({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"},
                                               {"nvidia.com/gpu.count", "7"},
                                               {"nvidia.com/mig.strategy", "single"},
                                               {"nvidia.com/mig.capable", "true"}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->gpus, 1);
  EXPECT_EQ(n->mig_devices, (std::map<std::string, int64_t>{{"1g.10gb", 7}}));
  // Eight GPUs of all-3g.40gb: 16 devices.
  n = ReadNodeLabels({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"}, {"nvidia.com/gpu.count", "16"}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->gpus, 8);
}

TEST(NodeLabels, TimeSlicingAndWholeGpus) {
  absl::StatusOr<NodeGpus> n = ReadNodeLabels({{"nvidia.com/gpu.product", "NVIDIA-H200-SHARED"},
                                               {"nvidia.com/gpu.count", "8"},
                                               {"nvidia.com/gpu.replicas", "10"},
                                               {"nvidia.com/mig.capable", "true"}});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->model->name, "H200-SXM-141GB");
  EXPECT_EQ(n->gpus, 8);
  EXPECT_EQ(n->replicas, 10);
  EXPECT_EQ(n->mig_strategy, MigStrategy::kNone);
  EXPECT_TRUE(n->mig_devices.empty());
}

TEST(NodeLabels, BadLabelsAreRefusedWithTheLabelNamed) {
  EXPECT_EQ(ReadNodeLabels({{"kubernetes.io/hostname", "cpu-1"}}).status().code(), absl::StatusCode::kNotFound);
  struct Case {
    std::map<std::string, std::string> labels;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"nvidia.com/gpu.product", "NVIDIA-Z9"}}, "gpu.product"},
      {{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-INVALID"}, {"nvidia.com/gpu.count", "0"}}, "INVALID"},
      {{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu.count", "-1"}}, "gpu.count"},
      {{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu.count", "eight"}}, "gpu.count"},
      {{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/mig-9g.99gb.count", "1"}}, "9g.99gb"},
      {{{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-5g.50gb"}, {"nvidia.com/gpu.count", "1"}}, "5g.50gb"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NodeGpus> n = ReadNodeLabels(c.labels);
    ASSERT_FALSE(n.ok()) << c.says;
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << n.status();
    EXPECT_NE(n.status().message().find(c.says), std::string_view::npos) << n.status();
  }
}

}  // namespace
}  // namespace gpuaas::cluster::kubernetes
