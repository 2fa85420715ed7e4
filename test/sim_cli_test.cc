// `gpuaas sim` as a user runs it: the real binary on the real trace.
#include <gtest/gtest.h>

#include <fstream>

#include "process.h"

namespace gpuaas::testing {
namespace {

const std::string kTrace =
    "--nodes ../shared/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv "
    "--pods ../shared/traces/alibaba-gpu-v2023/openb_pod_list_default.csv ";

bool TracePresent() {
  return static_cast<bool>(
      std::ifstream("../shared/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"));
}

TEST(SimCli, CsvPrintsTheMeanCurve) {
  if (!TracePresent()) GTEST_SKIP() << "../shared/traces not present";
  RunResult r = RunGpuaas("sim " + kTrace + "--policy bestfit --seeds 42 --format csv");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 132u) << r.out;  // header and 0..130
  EXPECT_EQ(lines[0], "arrived,alloc_ratio,frag_ratio");
  EXPECT_EQ(lines[1].rfind("0,", 0), 0u);
  EXPECT_EQ(lines[131].rfind("130,", 0), 0u);
  // Until the cluster fills up every pod fits: allocation follows arrival.
  EXPECT_EQ(lines[51].rfind("50,50.", 0), 0u) << lines[51];
}

TEST(SimCli, TableAndErrors) {
  if (!TracePresent()) GTEST_SKIP() << "../shared/traces not present";
  RunResult r = RunGpuaas("sim " + kTrace + "--policy random,dotprod --seeds 42");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1213 nodes, 6212 GPUs, 8152 pods"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nrandom "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ndotprod "), std::string::npos) << r.out;

  r = RunGpuaas("sim " + kTrace + "--policy tetris");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--policy \"tetris\": unknown policy"), std::string::npos) << r.out;
  r = RunGpuaas("sim " + kTrace + "--seeds 9-3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("bad range"), std::string::npos) << r.out;
  r = RunGpuaas("sim " + kTrace + "--seeds 42,x");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("bad seed \"x\""), std::string::npos) << r.out;
  r = RunGpuaas("sim --nodes /nonexistent.csv --pods /nonexistent.csv");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cannot read /nonexistent.csv"), std::string::npos) << r.out;
  r = RunGpuaas("sim " + kTrace + "--policy random,fgd --format csv");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("one mean curve"), std::string::npos) << r.out;
  r = RunGpuaas(
      "sim --nodes ../shared/traces/alibaba-gpu-v2023/openb_pod_list_default.csv " +
      std::string("--pods ../shared/traces/alibaba-gpu-v2023/openb_pod_list_default.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("line 1: missing column \"sn\""), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpuaas::testing
