// `gpuaas sim` as a user runs it: the real binary on the real trace.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "process.h"

namespace gpuaas::testing {
namespace {

const std::string kTrace =
    "--nodes test/testdata/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv "
    "--pods test/testdata/traces/alibaba-gpu-v2023/openb_pod_list_default.csv ";

bool TracePresent() {
  return static_cast<bool>(
      std::ifstream("test/testdata/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"));
}

TEST(SimCli, CsvPrintsTheMeanCurve) {
  ASSERT_TRUE(TracePresent()) << "test/testdata/traces/ (the tests run from the repository's root)";
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
  ASSERT_TRUE(TracePresent()) << "test/testdata/traces/ (the tests run from the repository's root)";
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
      "sim --nodes test/testdata/traces/alibaba-gpu-v2023/openb_pod_list_default.csv " +
      std::string("--pods test/testdata/traces/alibaba-gpu-v2023/openb_pod_list_default.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("line 1: missing column \"sn\""), std::string::npos) << r.out;
}

// The MIG modes on a one-GPU node: seven 1g.10gb pods fill the GPU, six leave (their instances
// stay, free), and a 3g.40gb pod finds no room until the free instances are destroyed.
TEST(SimCli, MigModesGoThroughThePoolAllocatorAndDefragmentSideBySide) {
  char dir_template[] = "/tmp/gpuaas-sim-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  std::ofstream(dir + "/nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,1,G2\n";
  std::ofstream pods(dir + "/pods.csv");
  pods << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n";
  for (int i = 0; i < 7; ++i) pods << "small-" << i << ",1000,1024,1,100," << i << "," << (i == 6 ? 100 : 10) << "\n";
  pods << "large,1000,1024,1,460,20,30\ncpu,1000,1024,0,0,25,26\n";
  pods.close();
  const std::string files = "--nodes " + dir + "/nodes.csv --pods " + dir + "/pods.csv ";
  RunResult r = RunGpuaas("sim " + files + "--mode mig-churn --seeds 1");
  ASSERT_EQ(r.code, 0) << r.out;
  // DEFRAG MODEL GPU-PODS ACCEPTED FAILED FAILED-FRAGMENTED OF-THEM-MIG DEFRAGS INSTANCES-REMOVED
  // RECOVERED TIME-AVG-ALLOC, one row without defragmentation and one with.
  std::map<std::string, std::vector<std::string>> rows;
  for (const std::string& l : Lines(r.out)) {
    std::istringstream in(l);
    std::vector<std::string> fields{std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
    if (!fields.empty() && (fields[0] == "off" || fields[0] == "on")) rows[fields[0]] = {fields.begin() + 2, fields.end() - 1};
  }
  EXPECT_EQ(rows["off"], (std::vector<std::string>{"8.0", "7.0", "1.0", "1.0", "1.0", "0.0", "0.0", "0.0"})) << r.out;
  EXPECT_EQ(rows["on"], (std::vector<std::string>{"8.0", "8.0", "0.0", "0.0", "0.0", "1.0", "6.0", "1.0"})) << r.out;

  r = RunGpuaas("sim " + files + "--mode mig --seeds 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\ngpuaas "), std::string::npos) << r.out;
  r = RunGpuaas("sim " + files + "--mode mig --policy bestfit");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("the pool allocator, which the MIG modes replay through"), std::string::npos) << r.out;
  r = RunGpuaas("sim " + files + "--mode mig-churn --mig-model L40S-48GB");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("not a MIG-capable model"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
