// End to end: the gpuaas binary as a user runs it, server and client.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;

class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuaas-e2e-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // Static tokens as kube-apiserver's --token-auth-file takes them; the CLI reads GPUAAS_TOKEN.
    std::ofstream(dir_ + "/tokens") << "# token,user,role[,project]\n"
                                    << kOperatorToken << ",ops,operator\n"
                                    << kMemberToken << ",alice,member,vision\n";
    setenv("GPUAAS_TOKEN", kOperatorToken, 1);
  }
  std::string Auth() const { return "--token-auth-file " + dir_ + "/tokens "; }
  static constexpr const char* kOperatorToken = "operator-token-0123456789";
  static constexpr const char* kMemberToken = "member-token-0123456789ab";
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(E2eTest, DemoServerAnswersTheCli) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(Auth() + "--demo --db sqlite:" + dir_ + "/g.db", dir_ + "/log")) << server.Log();
  const std::string s = " --server " + server.Url();

  RunResult summary = RunGpuaas("summary" + s);
  ASSERT_EQ(summary.code, 0) << summary.out;
  EXPECT_NE(summary.out.find("Clusters: 2   Nodes: 18   GPUs: 144"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("H200-SXM-141GB   3g.71gb"), std::string::npos) << summary.out;

  RunResult nodes = RunGpuaas("get nodes" + s);
  ASSERT_EQ(nodes.code, 0) << nodes.out;
  std::vector<std::string> lines = Lines(nodes.out);
  ASSERT_EQ(lines.size(), 19u);  // header + 18 nodes
  EXPECT_EQ(lines[0].rfind("NAME ", 0), 0u);
  // Columns line up: every row has its second column where the header has CLUSTER.
  const size_t col = lines[0].find("CLUSTER");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find_first_not_of(' ', lines[i].find(' ')), col) << lines[i];
  }

  RunResult gpus = RunGpuaas("get gpus -o json -l gpuaas.io/cluster=beta" + s);
  ASSERT_EQ(gpus.code, 0) << gpus.out;
  nlohmann::json list = nlohmann::json::parse(gpus.out);
  EXPECT_EQ(list["kind"], "GpuCapacityList");
  EXPECT_EQ(list["items"].size(), 64u);

  RunResult yaml = RunGpuaas("get clusters alpha -o yaml" + s);
  ASSERT_EQ(yaml.code, 0);
  EXPECT_NE(yaml.out.find("kind: Cluster"), std::string::npos);
  EXPECT_NE(yaml.out.find("resourceVersion: \""), std::string::npos) << yaml.out;

  RunResult specs = RunGpuaas("get specs alpha.h200-01.3g.71gb" + s);
  ASSERT_EQ(specs.code, 0);
  EXPECT_NE(specs.out.find("nvidia.com/mig-3g.71gb"), std::string::npos);

  RunResult missing = RunGpuaas("get gpus gpu-nope" + s);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("Error from server (NotFound)"), std::string::npos) << missing.out;
  RunResult bad_kind = RunGpuaas("get widgets" + s);
  EXPECT_EQ(bad_kind.code, 1);
  EXPECT_NE(bad_kind.out.find("unknown resource"), std::string::npos);
  RunResult bad_sel = RunGpuaas("get gpus -l 'a in b'" + s);
  EXPECT_EQ(bad_sel.code, 1);
  EXPECT_NE(bad_sel.out.find("labelSelector"), std::string::npos) << bad_sel.out;

  RunResult version = RunGpuaas("version" + s);
  EXPECT_NE(version.out.find("Server Version: v"), std::string::npos) << version.out;

  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
}

TEST_F(E2eTest, PoolLifecycleThroughTheCli) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(Auth() + "--demo --db sqlite:" + dir_ + "/g.db", dir_ + "/log")) << server.Log();
  const std::string s = " --server " + server.Url();
  RunResult project = RunGpuaas("project create vision --quota-full H200-SXM-141GB=4" + s);
  ASSERT_EQ(project.code, 0) << project.out;
  EXPECT_NE(project.out.find("projects/vision created"), std::string::npos);
  RunResult over = RunGpuaas("pool request huge -p vision --item H200-SXM-141GB/full=5" + s);
  EXPECT_EQ(over.code, 1);
  EXPECT_NE(over.out.find("Error from server (QuotaExceeded)"), std::string::npos) << over.out;
  // Six 4g.71gb: four exist in the demo fleet, two need idle GPUs reconfigured.
  RunResult req = RunGpuaas("pool request train -p vision --item H200-SXM-141GB/4g.71gb=6 "
                            "--item H200-SXM-141GB/full=2" + s);
  ASSERT_EQ(req.code, 0) << req.out;
  RunResult approve = RunGpuaas("pool approve train -p vision --reason ok" + s);
  ASSERT_EQ(approve.code, 0) << approve.out;
  std::string ready;
  for (int i = 0; i < 400 && ready != "True"; ++i) {
    RunResult get = RunGpuaas("pool get train -p vision -o json" + s);
    ASSERT_EQ(get.code, 0) << get.out;
    nlohmann::json p = nlohmann::json::parse(get.out);
    for (const auto& c : p["status"].value("conditions", nlohmann::json::array())) {
      if (c["type"] == "Ready") ready = c["status"];
    }
    if (ready != "True") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(ready, "True") << RunGpuaas("pool get train -p vision" + s).out;
  RunResult table = RunGpuaas("pool get train -p vision" + s);
  EXPECT_NE(table.out.find("Devices:"), std::string::npos);
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), 1 + 1 + 2 + 5 + 2 + 1 + 8) << table.out;
  RunResult layouts = RunGpuaas("get miglayouts" + s);
  EXPECT_NE(layouts.out.find("Applied"), std::string::npos) << layouts.out;
  // A workload runs on the pool's devices and leaves a Profile.
  RunResult run = RunGpuaas("workload run infer -p vision --pool train --resource nvidia.com/mig-4g.71gb=1 "
                            "--priority inference" + s);
  ASSERT_EQ(run.code, 0) << run.out;
  std::string phase;
  for (int i = 0; i < 400 && phase != "Running"; ++i) {
    nlohmann::json w = nlohmann::json::parse(RunGpuaas("get workloads -o json" + s).out);
    phase = w["items"][0]["status"].value("phase", "");
    if (phase != "Running") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(phase, "Running");
  EXPECT_NE(RunGpuaas("get profiles" + s).out.find("infer"), std::string::npos);
  EXPECT_EQ(RunGpuaas("workload delete infer -p vision" + s).code, 0);
  RunResult reject = RunGpuaas("pool reject train -p vision --reason late" + s);
  EXPECT_EQ(reject.code, 1);
  EXPECT_NE(reject.out.find("already approved"), std::string::npos);
  ASSERT_EQ(RunGpuaas("pool release train -p vision" + s).code, 0);
  EXPECT_EQ(server.Stop(), 0);
}

// `gpuaas defrag plan|apply` as an operator meets it: a pool that lets its idle instances move
// is left alone on a GPU; the plan moves its instance, says what the fleet gains, and applying
// it moves the pool.
TEST_F(E2eTest, DefragmentationThroughTheCli) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(Auth() + "--demo --db sqlite:" + dir_ + "/g.db", dir_ + "/log")) << server.Log();
  const std::string s = " --server " + server.Url();
  ASSERT_EQ(RunGpuaas("project create vision" + s).code, 0);
  auto ready = [&](const std::string& pool) {
    for (int i = 0; i < 400; ++i) {
      RunResult get = RunGpuaas("pool get " + pool + " -p vision -o json" + s);
      const nlohmann::json p = nlohmann::json::parse(get.out, nullptr, false);
      for (const auto& c : p["status"].value("conditions", nlohmann::json::array())) {
        if (c["type"] == "Ready" && c["status"] == "True") return p;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return nlohmann::json();
  };
  for (const std::string pool : {"first", "movable", "other"}) {
    const std::string flag = pool == "movable" ? " --move-idle-instances" : "";
    ASSERT_EQ(RunGpuaas("pool request " + pool + " -p vision --cluster alpha --item H200-SXM-141GB/3g.71gb=1" + flag + s).code, 0);
    ASSERT_EQ(RunGpuaas("pool approve " + pool + " -p vision --reason ok" + s).code, 0);
    ASSERT_FALSE(ready(pool).is_null()) << pool;
  }
  ASSERT_EQ(RunGpuaas("pool release first -p vision" + s).code, 0);
  RunResult plan;
  for (int i = 0; i < 100 && plan.out.find("moved instances") == std::string::npos; ++i) {
    plan = RunGpuaas("defrag plan" + s);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("vision/movable 3g.71gb on GPU-"), std::string::npos) << plan.out;
  // What the fleet gains: an emptied H200 can hand out a 7g.141gb.
  EXPECT_TRUE(std::regex_search(plan.out, std::regex(R"(H200-SXM-141GB +7g\.141gb +0 +1)"))) << plan.out;
  EXPECT_EQ(RunGpuaas("defrag plan --token " + std::string(kMemberToken) + s).code, 1) << "operators only";
  RunResult apply = RunGpuaas("defrag apply" + s);
  ASSERT_EQ(apply.code, 0) << apply.out;
  const nlohmann::json moved = ready("movable");
  ASSERT_FALSE(moved.is_null());
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(E2eTest, TokensAndRoles) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(Auth() + "--demo --db sqlite:" + dir_ + "/g.db", dir_ + "/log")) << server.Log();
  const std::string s = " --server " + server.Url();
  // The demo prints tokens to try it with.
  EXPECT_NE(server.Log().find("demo operator token:"), std::string::npos) << server.Log();
  RunResult anon = RunGpuaas("get gpus --token ''" + s);
  EXPECT_EQ(anon.code, 1);
  EXPECT_NE(anon.out.find("Unauthorized"), std::string::npos) << anon.out;
  ASSERT_EQ(RunGpuaas("project create vision" + s).code, 0);
  ASSERT_EQ(RunGpuaas("project create other" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool request theirs -p other --item H200-SXM-141GB/full=1" + s).code, 0);
  const std::string member = std::string(" --token ") + kMemberToken + s;
  RunResult mine = RunGpuaas("pool request mine -p vision --item H200-SXM-141GB/full=1" + member);
  EXPECT_EQ(mine.code, 0) << mine.out;
  // Another project's pool does not exist for a member, whichever way it is asked for.
  EXPECT_NE(RunGpuaas("pool get theirs -p other" + member).out.find("NotFound"), std::string::npos);
  EXPECT_NE(RunGpuaas("pool release theirs -p other" + member).out.find("NotFound"), std::string::npos);
  // Approval is for operators: refused before anything is looked up, so it tells nothing either.
  EXPECT_NE(RunGpuaas("pool approve theirs -p other" + member).out.find("Forbidden"), std::string::npos);
  ASSERT_EQ(RunGpuaas("workload run w -p other --pool theirs --resource nvidia.com/gpu=1" + s).code, 0);
  EXPECT_TRUE(nlohmann::json::parse(RunGpuaas("get workloads -o json" + member).out)["items"].empty());
  EXPECT_NE(RunGpuaas("workload delete w -p other" + member).out.find("NotFound"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(RunGpuaas("get profiles -o json" + member).out)["items"].empty());
  RunResult list = RunGpuaas("pool list -o json" + member);
  EXPECT_EQ(nlohmann::json::parse(list.out)["items"].size(), 1u) << list.out;
  EXPECT_EQ(nlohmann::json::parse(RunGpuaas("project list -o json" + member).out)["items"].size(), 1u);
  // Members cannot approve, even their own pools.
  EXPECT_NE(RunGpuaas("pool approve mine -p vision" + member).out.find("Forbidden"), std::string::npos);
  // API tokens: created by an operator, stored hashed, revoked at once.
  RunResult created = RunGpuaas("token create --user bob --role member --project vision" + s);
  ASSERT_EQ(created.code, 0) << created.out;
  // The message, then the token alone on the last line (stdout), for scripts.
  const std::string bob = Lines(created.out).back();
  EXPECT_TRUE(std::regex_match(bob, std::regex("[0-9a-f]{16}\\.[0-9a-f]{48}"))) << created.out;
  EXPECT_NE(created.out.find("it is shown only now"), std::string::npos) << created.out;
  EXPECT_EQ(RunGpuaas("pool list --token " + bob + s).code, 0);
  EXPECT_EQ(RunGpuaas("token list" + s).out.find(bob.substr(bob.find('.') + 1)), std::string::npos)
      << "secrets are never listed";
  ASSERT_EQ(RunGpuaas("token revoke " + bob.substr(0, bob.find('.')) + s).code, 0);
  EXPECT_NE(RunGpuaas("pool list --token " + bob + s).out.find("Unauthorized"), std::string::npos);
  EXPECT_EQ(server.Stop(), 0);
}

// SIGKILL while a pool is being provisioned (its MIG layouts requested, not yet in place), then
// a restart: the pool converges to Ready with the same devices, none allocated twice.
TEST_F(E2eTest, KilledDuringProvisioningConverges) {
  const std::string args = Auth() + "--demo --db sqlite:" + dir_ + "/g.db";
  nlohmann::json before;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start(args, dir_ + "/log1")) << server.Log();
    const std::string s = " --server " + server.Url();
    ASSERT_EQ(RunGpuaas("project create vision" + s).code, 0);
    ASSERT_EQ(RunGpuaas("pool request big -p vision --item H200-SXM-141GB/4g.71gb=10" + s).code, 0);
    ASSERT_EQ(RunGpuaas("pool approve big -p vision" + s).code, 0);
    // Wait for the allocation to be recorded, then kill the server at once.
    for (int i = 0; i < 100; ++i) {
      before = nlohmann::json::parse(RunGpuaas("pool get big -p vision -o json" + s).out);
      if (!before["status"].value("allocation", nlohmann::json::array()).empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_FALSE(before["status"]["allocation"].empty());
    EXPECT_EQ(server.Stop(SIGKILL), -SIGKILL);
  }
  ServerProcess again;
  ASSERT_TRUE(again.Start(args, dir_ + "/log2")) << again.Log();
  const std::string s = " --server " + again.Url();
  nlohmann::json after;
  std::string ready;
  for (int i = 0; i < 400 && ready != "True"; ++i) {
    after = nlohmann::json::parse(RunGpuaas("pool get big -p vision -o json" + s).out);
    for (const auto& c : after["status"].value("conditions", nlohmann::json::array())) {
      if (c["type"] == "Ready") ready = c["status"];
    }
    if (ready != "True") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(ready, "True") << after.dump(2);
  std::set<std::string> keys_before, keys_after;
  for (const auto& d : before["status"]["allocation"]) keys_before.insert(d["gpuUUID"].get<std::string>() + "@" + d["placement"]["start"].dump());
  for (const auto& d : after["status"]["allocation"]) keys_after.insert(d["gpuUUID"].get<std::string>() + "@" + d["placement"]["start"].dump());
  EXPECT_EQ(keys_after.size(), 10u) << "no device twice";
  EXPECT_EQ(keys_before, keys_after) << "the restart kept the allocation it had recorded";
  EXPECT_EQ(again.Stop(), 0);
}

TEST_F(E2eTest, UnreachableServerIsExplained) {
  RunResult r = RunGpuaas("get gpus --server http://127.0.0.1:1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cannot reach the gpuaas server at http://127.0.0.1:1"), std::string::npos)
      << r.out;
}

TEST_F(E2eTest, RestartKeepsTheInventoryAndWritesNothingNew) {
  const std::string db = Auth() + "--demo --db sqlite:" + dir_ + "/g.db";
  std::string first_rev;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start(db, dir_ + "/log1")) << server.Log();
    RunResult r = RunGpuaas("get clusters alpha -o json --server " + server.Url());
    first_rev = nlohmann::json::parse(r.out)["metadata"]["resourceVersion"];
    // SIGKILL: no clean shutdown, the next start must still find everything.
    EXPECT_EQ(server.Stop(SIGKILL), -SIGKILL);
  }
  ServerProcess again;
  ASSERT_TRUE(again.Start(db, dir_ + "/log2")) << again.Log();
  RunResult r = RunGpuaas("get clusters alpha -o json --server " + again.Url());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["metadata"]["resourceVersion"], first_rev);
  EXPECT_EQ(again.Log().find("created"), std::string::npos) << again.Log();
  EXPECT_EQ(again.Stop(), 0);
}

TEST_F(E2eTest, ServerRefusesBadFlags) {
  RunResult remote = RunGpuaas("server --listen 0.0.0.0:0 --db sqlite::memory:");
  EXPECT_EQ(remote.code, 2);
  EXPECT_NE(remote.out.find("loopback"), std::string::npos) << remote.out;
  RunResult both = RunGpuaas("server --demo --synthetic-gpus 8 --db sqlite::memory:");
  EXPECT_EQ(both.code, 2);
  std::ofstream(dir_ + "/bad.yaml") << "clusters:\n  - name: x\n    nodePools:\n      - {name: p, count: 1, model: Z9}\n";
  RunResult fleet = RunGpuaas("server --fleet " + dir_ + "/bad.yaml --db sqlite::memory:");
  EXPECT_EQ(fleet.code, 2);
  EXPECT_NE(fleet.out.find("unknown GPU model \"Z9\""), std::string::npos) << fleet.out;
  RunResult port = RunGpuaas("server --listen 127.0.0.1:99999 --db sqlite::memory:");
  EXPECT_EQ(port.code, 2);
}

TEST_F(E2eTest, FleetFileServesItsGpus) {
  std::ofstream(dir_ + "/fleet.yaml") << R"(clusters:
  - name: lab
    nodePools:
      - {name: l40s, count: 2, model: L40S-48GB, gpusPerNode: 4}
      - {name: a30, count: 1, model: A30-24GB, gpusPerNode: 2, migNodes: 1, migLayouts: ["2g.12gb 1g.6gb 1g.6gb"]}
)";
  ServerProcess server;
  ASSERT_TRUE(server.Start(Auth() + "--fleet " + dir_ + "/fleet.yaml --db sqlite::memory:", dir_ + "/log"))
      << server.Log();
  RunResult r = RunGpuaas("summary -o json --server " + server.Url());
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json s = nlohmann::json::parse(r.out);
  EXPECT_EQ(s["physical"]["gpus"], 10);
  EXPECT_EQ(s["physical"]["migEnabled"], 2);
  EXPECT_EQ(s["logical"]["count"], 8 + 2 * 3);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace gpuaas::testing
