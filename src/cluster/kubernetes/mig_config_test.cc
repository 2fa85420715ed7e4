#include "cluster/kubernetes/mig_config.h"

#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas::cluster::kubernetes {
namespace {

// mig-parted's own example (examples/config.yaml), abridged: the configs an operator keeps.
constexpr char kOperatorsConfig[] = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.5gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
  gpuaas-n1-100:
    - devices: [0]
      mig-enabled: false
)";

TEST(MigConfig, ANodesConfigJoinsTheOperatorsAndReplacesItsEarlierOnes) {
  const GpuMigSpec split{true, {{"1g.18gb", 2}, {"2g.35gb", 1}, {"3g.71gb", 1}}};
  const std::map<int, GpuMigSpec> want = {{0, split}, {1, {}}, {2, split}, {3, {}}};
  absl::StatusOr<std::string> doc = MergeMigConfig(kOperatorsConfig, "gpuaas-n1-200", "gpuaas-n1-", want);
  ASSERT_TRUE(doc.ok()) << doc.status();
  const YAML::Node y = YAML::Load(*doc);
  EXPECT_EQ(y["version"].as<std::string>(), "v1");
  EXPECT_TRUE(y["mig-configs"]["all-disabled"]) << "the operator's configs are kept";
  EXPECT_TRUE(y["mig-configs"]["all-1g.5gb"]);
  EXPECT_FALSE(y["mig-configs"]["gpuaas-n1-100"]) << "the node's earlier config is gone";
  ASSERT_EQ(y["mig-configs"]["gpuaas-n1-200"].size(), 2u) << "GPUs that want the same share an entry:\n" << *doc;
  EXPECT_EQ(ReadMigConfig(*doc, "gpuaas-n1-200", 4).value(), want);
  // devices: all, read back for every GPU.
  absl::StatusOr<std::map<int, GpuMigSpec>> all = ReadMigConfig(*doc, "all-1g.5gb", 2);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->at(1), (GpuMigSpec{true, {{"1g.5gb", 7}}}));
  EXPECT_TRUE(absl::IsNotFound(ReadMigConfig(*doc, "nope", 2).status()));
  // A fresh ConfigMap.
  EXPECT_TRUE(MergeMigConfig("", "gpuaas-n2-1", "gpuaas-n2-", want).ok());
}

TEST(MigConfig, WhatIsNotAMigPartedConfigIsRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(MergeMigConfig("version: v2\n", "x", "x-", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MergeMigConfig("- a list\n", "x", "x-", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MergeMigConfig("version: v1\nmig-configs: [1]\n", "x", "x-", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MergeMigConfig("{{{", "x", "x-", {}).status()));
}

}  // namespace
}  // namespace gpuaas::cluster::kubernetes
