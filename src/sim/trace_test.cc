#include "sim/trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace gpuaas::sim {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const char kTraces[] = "test/testdata/traces/alibaba-gpu-v2023/";

TEST(Trace, ParsesNodesByHeaderName) {
  auto nodes = ParseNodes(
      "model,sn,gpu,cpu_milli,memory_mib\r\nT4,a,2,104000,524288\r\n\nG2,b,8,96000,393216\n");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "a");
  EXPECT_EQ((*nodes)[0].gpu_model, "T4");
  EXPECT_EQ((*nodes)[1].gpus, 8);
  EXPECT_EQ((*nodes)[1].cpu_milli, 96000);
}

TEST(Trace, ParsesPodsWithAndWithoutTimes) {
  auto pods = ParsePods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_"
      "time\n"
      "p0,6000,12288,1,460,V100M16|V100M32,LS,Running,10,20\n"
      "p1,88000,327680,8,1000,,LS,Running,11,30\n"
      "p2,4000,8192,0,0,,BE,Failed,12,13\n");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 3u);
  EXPECT_TRUE((*pods)[0].shape.Shares());
  EXPECT_EQ((*pods)[0].shape.gpu_models, "V100M16|V100M32");
  EXPECT_EQ((*pods)[0].creation_time, 10);
  EXPECT_EQ((*pods)[1].shape.TotalGpuMilli(), 8000);
  EXPECT_EQ((*pods)[2].deletion_time, 13);
  auto short_pods = ParsePods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1000\n");
  ASSERT_TRUE(short_pods.ok());
  EXPECT_EQ((*short_pods)[0].creation_time, -1);
}

TEST(Trace, RejectsBadInputWithTheLine) {
  const std::string header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {"name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n", "line 1: missing column \"gpu_milli\""},
      {header + "p,1,1,1,1000\np,x,1,1,1000\n", "line 3: cpu_milli \"x\" is not an integer"},
      {header + "p,1,1,1,1001\n", "line 2: gpu_milli 1001 is outside 0..1000"},
      {header + "p,1,1,2,500\n", "line 2: a pod with 2 GPUs must take whole GPUs"},
      {header + "p,1,1,0,500\n", "line 2: gpu_milli 500 without a GPU"},
      {header + "p,1,1,1,0\n", "line 2: num_gpu 1 with gpu_milli 0"},
      {header + "p,-5,1,1,1000\n", "line 2: cpu_milli -5 is outside"},
      {header + "p,1,1\n", "line 2: column \"num_gpu\" is missing"},
      {header, "no pods"},
      {"", "empty file"},
  };
  for (const Case& c : cases) {
    auto pods = ParsePods(c.text);
    ASSERT_FALSE(pods.ok()) << c.text;
    EXPECT_EQ(pods.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(pods.status().message()).find(c.message), std::string::npos)
        << pods.status().message() << " vs " << c.message;
  }
  auto nodes = ParseNodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,17,G2\n");
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(std::string(nodes.status().message()).find("line 2: gpu 17 is outside 0..16"),
            std::string::npos);
  nodes = ParseNodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n");
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(std::string(nodes.status().message()).find("has GPUs but no model"), std::string::npos);
}

TEST(Trace, ReadsTheRealTrace) {
  if (!std::ifstream(std::string(kTraces) + "openb_node_list_gpu_node.csv")) {
    FAIL() << kTraces << " is not readable (the tests run from the repository's root)";
  }
  auto nodes = ParseNodes(Read(std::string(kTraces) + "openb_node_list_gpu_node.csv"));
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(nodes->size(), 1213u);
  int gpus = 0;
  for (const auto& n : *nodes) gpus += n.gpus;
  EXPECT_EQ(gpus, 6212);  // the capacity the paper's results are relative to
  auto pods = ParsePods(Read(std::string(kTraces) + "openb_pod_list_default.csv"));
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(pods->size(), 8152u);
  int64_t milli = 0;
  for (const auto& p : *pods) milli += p.shape.TotalGpuMilli();
  EXPECT_EQ(milli, 6086800);
  auto multi = ParsePods(Read(std::string(kTraces) + "openb_pod_list_multigpu20.csv"));
  ASSERT_TRUE(multi.ok()) << multi.status();  // five columns only
  EXPECT_EQ(multi->size(), 8324u);
}

}  // namespace
}  // namespace gpuaas::sim
