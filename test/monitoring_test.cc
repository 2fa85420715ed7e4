// Monitoring end to end: the gpuaas server, a simulated node agent injecting XID 79 and a
// double-bit ECC error on two GPUs, and (where installed) a real Prometheus scraping both.
#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kOperatorToken = "operator-token-0123456789";
constexpr const char* kMemberToken = "member-token-0123456789ab";
constexpr const char* kAgentToken = "agent-token-0123456789abcd";
constexpr const char* kNodeOneToken = "node-one-token-0123456789";

class MonitoringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuaas-mon-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/tokens") << kOperatorToken << ",ops,operator\n"
                                    << kMemberToken << ",alice,member,vision\n"
                                    << kAgentToken << ",node-agent,agent,lab/h200-01+h200-02\n"
                                    << kNodeOneToken << ",node-one,agent,lab/h200-01\n";
    std::ofstream(dir_ + "/fleet.yaml") << R"(clusters:
  - name: lab
    nodePools:
      - {name: h200, count: 2, model: H200-SXM-141GB, gpusPerNode: 4}
)";
    setenv("GPUAAS_TOKEN", kOperatorToken, 1);
    ASSERT_TRUE(server_.Start("--token-auth-file " + dir_ + "/tokens --fleet " + dir_ + "/fleet.yaml --db sqlite:" +
                                  dir_ + "/g.db",
                              dir_ + "/server.log"))
        << server_.Log();
    client_ = std::make_unique<httplib::Client>(server_.Url());
    client_->set_read_timeout(30);
  }
  void TearDown() override { fs::remove_all(dir_); }

  json Get(const std::string& path, const char* token = kOperatorToken, int want = 200) {
    auto res = client_->Get(path, {{"Authorization", std::string("Bearer ") + token}});
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, want) << path << ": " << res->body;
    return json::parse(res->body, nullptr, false);
  }
  std::vector<json> Gpus() {
    std::vector<json> gpus;
    const json list = Get("/apis/gpuaas.io/v1/gpucapacities");
    for (const json& g : list["items"]) gpus.push_back(g);
    std::sort(gpus.begin(), gpus.end(), [](const json& a, const json& b) {
      return std::make_pair(a["spec"]["node"].get<std::string>(), a["spec"]["index"].get<int>()) <
             std::make_pair(b["spec"]["node"].get<std::string>(), b["spec"]["index"].get<int>());
    });
    return gpus;
  }
  static std::string Cond(const json& obj, const std::string& type) {
    for (const json& c : obj["status"].value("conditions", json::array())) {
      if (c["type"] == type) return c["status"].get<std::string>() + "/" + c["reason"].get<std::string>();
    }
    return "-";
  }

  std::string dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(MonitoringTest, AgentFaultsBecomeConditionsAlertsExclusionAndSeries) {
  std::vector<json> gpus = Gpus();
  ASSERT_EQ(gpus.size(), 8u);
  const std::string x = gpus[1]["spec"]["uuid"], y = gpus[6]["spec"]["uuid"], z = gpus[3]["spec"]["uuid"];
  const std::string x_name = gpus[1]["metadata"]["name"], y_name = gpus[6]["metadata"]["name"];

  Background agent;
  ASSERT_TRUE(agent.Start(Bin() + " agent --simulate --server " + server_.Url() + " --token " + kAgentToken +
                              " --interval 1 --listen 127.0.0.1:0 --inject xid=79@" + x + " --inject dbe@" + y,
                          dir_ + "/agent.log", R"(serving dcgm-exporter metrics on http://127\.0\.0\.1:(\d+)/metrics)"))
      << agent.Log();

  // Conditions: XID 79 asks for a node reboot, the double-bit ECC error is a memory error.
  json gx, gy;
  for (int i = 0; i < 200; ++i) {
    gx = Get("/apis/gpuaas.io/v1/gpucapacities/" + x_name);
    gy = Get("/apis/gpuaas.io/v1/gpucapacities/" + y_name);
    if (Cond(gx, "ResetRequired") == "True/Xid79" && Cond(gy, "MemoryErrors").starts_with("True")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(Cond(gx, "ResetRequired"), "True/Xid79") << gx.dump(2) << agent.Log();
  EXPECT_EQ(gx["status"]["health"], "Unhealthy");
  EXPECT_EQ(Cond(gx, "Healthy"), "False/ResetRequired");
  EXPECT_EQ(Cond(gy, "MemoryErrors"), "True/Xid48") << gy.dump(2);
  EXPECT_EQ(gy["status"]["health"], "Unhealthy");
  EXPECT_EQ(Cond(gy, "Healthy"), "False/MemoryErrors");
  EXPECT_EQ(Cond(Get("/apis/gpuaas.io/v1/gpucapacities/" + std::string(gpus[0]["metadata"]["name"])), "Healthy"),
            "True/Healthy");

  // Alerts: one XID 79 however many reports repeat the GPU's state, with NVIDIA's action. Two
  // more reports arrive first (the samples counter moves twice).
  auto samples = [&] {
    auto r = client_->Get("/metrics");
    const std::string key = "\ngpuaas_telemetry_samples_total ";
    const size_t at = r ? r->body.find(key) : std::string::npos;
    return at == std::string::npos ? int64_t{-1} : std::stoll(r->body.substr(at + key.size()));
  };
  int64_t seen = samples();
  int reports = 0;
  for (int i = 0; i < 300 && reports < 2; ++i) {  // up to 15 s
    const int64_t now = samples();
    if (now > seen) {
      ++reports;
      seen = now;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_EQ(reports, 2) << agent.Log();
  json alerts = Get("/api/v1/alerts?active=true")["items"];
  int xid79 = 0, ecc = 0;
  for (const json& a : alerts) {
    if (a["gpu"] == x && a["source"] == "XID 79") {
      ++xid79;
      EXPECT_EQ(a["severity"], "critical");
      EXPECT_NE(a["action"].get<std::string>().find("reboot the node"), std::string::npos);
      EXPECT_EQ(a["node"], gpus[1]["spec"]["node"]);
    }
    if (a["gpu"] == y && a["condition"] == "MemoryErrors") ++ecc;
  }
  EXPECT_EQ(xid79, 1) << alerts.dump(2);
  EXPECT_GE(ecc, 1) << alerts.dump(2);
  Get("/api/v1/alerts", kMemberToken, 403);
  RunResult cli_alerts = RunGpuaas("alerts --server " + server_.Url());
  ASSERT_EQ(cli_alerts.code, 0) << cli_alerts.out;
  EXPECT_NE(cli_alerts.out.find("XID 79"), std::string::npos) << cli_alerts.out;
  EXPECT_NE(cli_alerts.out.find("reboot the node"), std::string::npos) << cli_alerts.out;

  // Exclusion: all eight GPUs cannot be had, six can, and never the two failed ones.
  ASSERT_EQ(RunGpuaas("project create vision --quota-full H200-SXM-141GB=16 --server " + server_.Url()).code, 0);
  const std::string s = " -p vision --server " + server_.Url();
  ASSERT_EQ(RunGpuaas("pool request all --item H200-SXM-141GB/full=8" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool approve all --reason ok" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool request six --item H200-SXM-141GB/full=6" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool approve six --reason ok" + s).code, 0);
  json all, six;
  for (int i = 0; i < 200; ++i) {
    all = Get("/apis/gpuaas.io/v1/namespaces/vision/gpupools/all");
    six = Get("/apis/gpuaas.io/v1/namespaces/vision/gpupools/six");
    if (Cond(six, "Ready") == "True/Ready" && Cond(all, "Allocated").starts_with("False")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(Cond(six, "Ready"), "True/Ready") << six.dump(2);
  std::set<std::string> held;
  for (const json& d : six["status"]["allocation"]) held.insert(d["gpuUUID"]);
  EXPECT_EQ(held.size(), 6u);
  EXPECT_EQ(held.count(x) + held.count(y), 0u);
  EXPECT_EQ(Cond(all, "Allocated"), "False/Unschedulable") << all.dump(2);
  EXPECT_NE(all.dump().find("unhealthy"), std::string::npos) << all.dump(2);

  // Series: a GPU's power, a pool's utilization, and what a member may ask.
  const std::string now = std::to_string(std::time(nullptr) + 1);
  const std::string from = std::to_string(std::time(nullptr) - 60);
  json power = Get("/api/v1/metrics/query?series=gpu:" + z + ":power_w&from=" + from + "&to=" + now + "&step=5");
  int with_data = 0;
  for (const json& p : power["points"]) {
    if (p["value"].is_null()) continue;
    ++with_data;
    EXPECT_GE(p["value"].get<double>(), 70);
    EXPECT_LE(p["value"].get<double>(), 700);
  }
  EXPECT_GT(with_data, 0) << power.dump();
  RunResult cli_power = RunGpuaas("metrics gpu:" + z + ":power_w --since 5m --step 5 --server " + server_.Url());
  ASSERT_EQ(cli_power.code, 0) << cli_power.out;
  EXPECT_GT(Lines(cli_power.out).size(), 1u) << cli_power.out;
  EXPECT_EQ(Lines(cli_power.out)[0].rfind("TIME", 0), 0u) << cli_power.out;
  EXPECT_EQ(RunGpuaas("metrics gpu:" + z + ":power_w --since soon --server " + server_.Url()).code, 1);
  json util;
  for (int i = 0; i < 100; ++i) {
    util = Get("/api/v1/metrics/query?series=pool:vision/six:utilization&from=" + from + "&step=5", kMemberToken);
    bool any = false;
    for (const json& p : util["points"]) any |= !p["value"].is_null();
    if (any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(util["devices"], 6);
  bool any = false;
  for (const json& p : util["points"]) {
    if (p["value"].is_null()) continue;
    any = true;
    EXPECT_GE(p["value"].get<double>(), 0);
    EXPECT_LE(p["value"].get<double>(), 1);
  }
  EXPECT_TRUE(any) << util.dump();
  // A workload's series follows its runs (Profiles): the device it runs on, from its start.
  ASSERT_EQ(RunGpuaas("workload run w -p vision --pool six --resource nvidia.com/gpu=1 --server " + server_.Url()).code, 0);
  json wl;
  bool wl_data = false;
  // Up to 60 s: on a loaded machine (the whole suite on two cores) the next readings can take a while.
  for (int i = 0; i < 300 && !wl_data; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    wl = Get("/api/v1/metrics/query?series=workload:vision/w:utilization&from=" + from + "&step=5", kMemberToken);
    for (const json& p : wl["points"]) wl_data |= !p["value"].is_null();
  }
  EXPECT_TRUE(wl_data) << wl.dump();
  EXPECT_EQ(wl["devices"], 1);
  EXPECT_TRUE(wl["points"][0]["value"].is_null()) << "before the run started: " << wl.dump();
  // A pool's power, as the README's metric list says: its devices' GPU power, weighted.
  json pool_power = Get("/api/v1/metrics/query?series=pool:vision/six:power_w&from=" + from + "&step=5", kMemberToken);
  bool powered = false;
  for (const json& p : pool_power["points"]) powered |= !p["value"].is_null() && p["value"].get<double>() > 0;
  EXPECT_TRUE(powered) << pool_power.dump();
  json allocated = Get("/api/v1/metrics/query?series=project:vision:allocated_gpus&from=" + from + "&step=30");
  EXPECT_EQ(allocated["points"].back()["value"], 6.0) << allocated.dump();
  // The cluster holds the pool's devices though the pool names no cluster; fleet_power_w counts
  // every GPU of the cluster, allocated or not.
  json in_lab = Get("/api/v1/metrics/query?series=cluster:lab:allocated_gpus&from=" + from + "&step=30");
  EXPECT_EQ(in_lab["points"].back()["value"], 6.0) << in_lab.dump();
  json lab_power = Get("/api/v1/metrics/query?series=cluster:lab:fleet_power_w&from=" + from + "&step=30");
  EXPECT_GT(lab_power["devices"].get<int>(), in_lab["devices"].get<int>()) << lab_power.dump();
  Get("/api/v1/metrics/query?series=pool:vision/six:fleet_power_w", kOperatorToken, 400);
  Get("/api/v1/metrics/query?series=gpu:" + z + ":power_w", kMemberToken, 403);
  json bad = Get("/api/v1/metrics/query?series=gpu:" + z, kOperatorToken, 400);
  EXPECT_NE(bad["detail"].get<std::string>().find("SCOPE:ID:METRIC"), std::string::npos);
  Get("/api/v1/metrics/query?series=gpu:" + z + ":power_w&from=10&to=5", kOperatorToken, 400);
  Get("/api/v1/metrics/query?series=pool:other/six:utilization", kMemberToken, 404);
  // Numbers out of range are refused with the parameter named, never overflowed.
  for (const std::string q : {"&step=9223372036854775807", "&step=0", "&from=0&to=99999999999", "&step=nan"}) {
    json refused = Get("/api/v1/metrics/query?series=gpu:" + z + ":power_w" + q, kOperatorToken, 400);
    EXPECT_EQ(refused["reason"], "BadRequest") << q;
  }
  const std::string later = std::to_string(std::time(nullptr) + 10 * 365 * 86400);
  for (const std::string& q : std::vector<std::string>{"?to=" + later, "?idleBelow=nan", "?idleBelow=inf", "?idleFor=-1",
                                                     "?step=99999999999"}) {
    json refused = Get("/api/v1/assessment" + q, kOperatorToken, 400);
    EXPECT_EQ(refused["reason"], "BadRequest") << q;
  }
  json assessment = Get("/api/v1/assessment?from=" + from);
  ASSERT_EQ(assessment["pools"].size(), 1u) << assessment.dump(2);
  EXPECT_EQ(assessment["pools"][0]["pool"], "six");
  EXPECT_GT(assessment["pools"][0]["allocatedGpuHours"].get<double>(), 0);

  // Fleet gauges for Prometheus.
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gpuaas_fleet_gpu_health{model=\"H200-SXM-141GB\",health=\"unhealthy\"} 2"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("gpuaas_alerts_active{severity=\"critical\"}"), std::string::npos);

  // The agent's own exporter speaks dcgm-exporter.
  httplib::Client exporter("127.0.0.1", std::stoi(agent.match()));
  auto text = exporter.Get("/metrics");
  ASSERT_TRUE(text);
  EXPECT_NE(text->get_header_value("Content-Type").find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(text->body.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"3\",UUID=\"" + z + "\""), std::string::npos);
  EXPECT_EQ(agent.Stop(), 0) << agent.Log();
  EXPECT_EQ(server_.Stop(), 0) << server_.Log();
}

TEST_F(MonitoringTest, PushedTextIsStrictAndRolesAreEnforced) {
  const std::string z = Gpus()[3]["spec"]["uuid"];
  // No alerts yet: said as kubectl says it, not a bare header.
  RunResult none = RunGpuaas("alerts --server " + server_.Url());
  EXPECT_EQ(none.code, 0);
  EXPECT_EQ(none.out, "No active alerts found (--all shows resolved ones too).\n");
  auto post = [&](const std::string& body, const char* token, const char* type = "text/plain; version=0.0.4") {
    return client_->Post("/api/v1/telemetry", {{"Authorization", std::string("Bearer ") + token}}, body, type);
  };
  const std::string text = "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS{gpu=\"3\",UUID=\"" + z +
                           "\",err_code=\"43\"} 43\nDCGM_FI_DEV_GPU_TEMP{gpu=\"3\",UUID=\"" + z +
                           "\"} 9223372036854775794\nDCGM_FI_DEV_POWER_USAGE{gpu=\"3\",UUID=\"GPU-unknown\"} 5\n";
  for (int i = 0; i < 3; ++i) {  // the XID gauge repeats: one event
    auto r = post(text, kOperatorToken);  // operators may push for any GPU
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["samples"], 3);
    EXPECT_EQ(j["blank"], 1);
    EXPECT_EQ(j["unmatchedGpus"], json::array({"GPU-unknown"}));
  }
  int xid43 = 0;
  const json alerts = Get("/api/v1/alerts");
  for (const json& a : alerts["items"]) xid43 += a["source"] == "XID 43" ? 1 : 0;
  EXPECT_EQ(xid43, 1);
  // An agent pushes for the GPUs of its token's nodes only: a body that also names a GPU of
  // another node, or one the inventory does not know, is refused whole. The check ignores case.
  const std::string w = Gpus()[6]["spec"]["uuid"];  // on h200-02
  std::string z_lower = z;
  std::transform(z_lower.begin(), z_lower.end(), z_lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string own = "DCGM_FI_DEV_GPU_TEMP{gpu=\"3\",UUID=\"" + z + "\"} 41\n";
  for (const std::string& body : {own, "DCGM_FI_DEV_GPU_TEMP{gpu=\"3\",UUID=\"" + z_lower + "\"} 42\n"}) {
    auto mine = post(body, kNodeOneToken);
    ASSERT_TRUE(mine);
    EXPECT_EQ(mine->status, 200) << mine->body;
  }
  for (const std::string& intruder : {w, std::string("GPU-unknown")}) {
    auto foreign = post(own + "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\",UUID=\"" + intruder + "\",err_code=\"79\"} 79\n",
                        kNodeOneToken);
    ASSERT_TRUE(foreign);
    EXPECT_EQ(foreign->status, 403) << foreign->body;
    EXPECT_NE(foreign->body.find("lab/h200-01 only"), std::string::npos) << foreign->body;
  }
  const json after = Get("/api/v1/alerts");  // held: a temporary's member would dangle in the loop
  for (const json& a : after["items"]) EXPECT_NE(a["source"], "XID 79") << a.dump();
  // Malformed text: 400 with the line, nothing stored.
  auto bad = post("DCGM_FI_DEV_POWER_USAGE{UUID=\"" + z + "\"} 1\nDCGM_FI_DEV_POWER_USAGE{UUID=\"x} 2\n", kAgentToken);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->get_header_value("Content-Type"), "application/problem+json");
  EXPECT_NE(bad->body.find("line 2"), std::string::npos) << bad->body;
  EXPECT_EQ(Get("/api/v1/metrics/query?series=gpu:" + z + ":power_w", kOperatorToken, 404)["status"], 404);
  // JSON reports are checked field by field.
  auto bad_json = post(R"({"node":"n","gpus":[{"uuid":"GPU-1","readings":{"power":1}}]})", kAgentToken, "application/json");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_NE(bad_json->body.find("unknown reading \\\"power\\\""), std::string::npos) << bad_json->body;
  auto other = post("x", kAgentToken, "application/xml");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 415);
  // Who may push: operators and agents; members may not; agents may do nothing else.
  ASSERT_EQ(post(text, kMemberToken)->status, 403);
  auto anonymous = client_->Post("/api/v1/telemetry", text, "text/plain");
  ASSERT_TRUE(anonymous);
  ASSERT_EQ(anonymous->status, 401);
  EXPECT_EQ(anonymous->get_header_value("WWW-Authenticate"), "Bearer realm=\"gpuaas\"");
  auto agent_writes = client_->Post("/apis/gpuaas.io/v1/projects", {{"Authorization", std::string("Bearer ") + kAgentToken}},
                                    R"({"metadata":{"name":"p"}})", "application/json");
  ASSERT_TRUE(agent_writes);
  EXPECT_EQ(agent_writes->status, 403);
  EXPECT_EQ(server_.Stop(), 0);
}

TEST_F(MonitoringTest, RollupsSurviveARestart) {
  // Two closed minutes of readings pushed with their own timestamps, then a restart.
  const std::string z = Gpus()[3]["spec"]["uuid"];
  const int64_t t0 = (std::time(nullptr) / 60 - 5) * 60;
  std::string text;
  for (int s = 0; s < 150; s += 10) {
    text = "DCGM_FI_DEV_POWER_USAGE{UUID=\"" + z + "\"} " + std::to_string(s < 60 ? 100 : 300) + " " +
           std::to_string((t0 + s) * 1000) + "\n";
    auto r = client_->Post("/api/v1/telemetry", {{"Authorization", std::string("Bearer ") + kAgentToken}}, text,
                           "text/plain");
    ASSERT_TRUE(r && r->status == 200);
  }
  ASSERT_EQ(server_.Stop(), 0);  // a graceful stop writes the closed rollups
  ServerProcess again;
  ASSERT_TRUE(again.Start("--token-auth-file " + dir_ + "/tokens --fleet " + dir_ + "/fleet.yaml --db sqlite:" + dir_ +
                              "/g.db",
                          dir_ + "/server2.log"))
      << again.Log();
  EXPECT_NE(again.Log().find("rollup buckets restored"), std::string::npos) << again.Log();
  httplib::Client c(again.Url());
  // From more than an hour back the minute rollups answer.
  auto r = c.Get("/api/v1/metrics/query?series=gpu:" + z + ":power_w&from=" + std::to_string(t0 - 3600) + "&to=" +
                     std::to_string(t0 + 120) + "&step=60",
                 {{"Authorization", std::string("Bearer ") + kOperatorToken}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  ASSERT_GE(j["points"].size(), 2u);
  const json& last = j["points"][j["points"].size() - 2];  // minute t0
  const json& next = j["points"].back();                   // minute t0 + 60
  EXPECT_EQ(last["value"], 100.0) << j.dump();
  EXPECT_EQ(next["value"], 300.0) << j.dump();
  EXPECT_EQ(again.Stop(), 0);
}

}  // namespace
}  // namespace gpuaas::testing

namespace gpuaas::testing {
namespace {

// Made-up GPUs cost nothing to keep: their readings are counted and dropped.
TEST_F(MonitoringTest, ReadingsOfAHundredThousandMadeUpGpusLeaveMemoryBounded) {
  // Again without a sanitizer's quarantine (freed memory it holds back would read as growth).
  ASSERT_EQ(server_.Stop(), 0);
  setenv("ASAN_OPTIONS", "quarantine_size_mb=0:thread_local_quarantine_size_kb=0", 1);
  ASSERT_TRUE(server_.Start("--token-auth-file " + dir_ + "/tokens --fleet " + dir_ + "/fleet.yaml --db sqlite:" +
                                dir_ + "/g.db",
                            dir_ + "/server.log"))
      << server_.Log();
  unsetenv("ASAN_OPTIONS");
  client_ = std::make_unique<httplib::Client>(server_.Url());
  client_->set_read_timeout(30);
  auto push = [&](int from, int n) {
    std::string text;
    text.reserve(static_cast<size_t>(n) * 80);
    for (int i = from; i < from + n; ++i) {
      text += "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-made-up-" + std::to_string(i) + "\"} 100\n";
    }
    return client_->Post("/api/v1/telemetry", {{"Authorization", std::string("Bearer ") + kOperatorToken}}, text,
                         "text/plain");
  };
  // The baseline, in the same run: the same pushes, 10 x 10,000 readings, all of one made-up
  // GPU, so that what the pushes themselves cost (request buffers, a sanitizer's quarantine) is
  // measured apart from what 100,000 distinct GPUs would keep.
  auto same = [&](int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-made-up-00000\"} " + std::to_string(i) + "\n";
    return client_->Post("/api/v1/telemetry", {{"Authorization", std::string("Bearer ") + kOperatorToken}}, text,
                         "text/plain");
  };
  ASSERT_EQ(push(0, 1000)->status, 200);  // warm up
  const int64_t start = server_.RssKiB();
  ASSERT_GT(start, 0);
  for (int chunk = 0; chunk < 10; ++chunk) ASSERT_EQ(same(10000)->status, 200);
  const int64_t before = server_.RssKiB();
  for (int chunk = 0; chunk < 10; ++chunk) {
    auto r = push(1000 + chunk * 10000, 10000);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["unmatched"], 10000);
  }
  const int64_t after = server_.RssKiB();
  // Stated bound (docs/security.md): 100,000 made-up GPUs cost at most 16 MiB more than the
  // same bytes naming one GPU.
  EXPECT_LT((after - before) - (before - start), 16 * 1024)
      << "baseline pushes: " << start << " -> " << before << " KiB; made-up GPUs: " << before << " -> " << after << " KiB";
  EXPECT_EQ(Gpus().size(), 8u);  // and the server still answers
  EXPECT_EQ(server_.Stop(), 0) << server_.Log();
}

}  // namespace
}  // namespace gpuaas::testing
