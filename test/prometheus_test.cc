// A real Prometheus (Debian's package, installed by scripts/install-deps.sh) scrapes gpuaas's
// /metrics and a simulated agent's dcgm-exporter endpoint; the values come back through
// Prometheus's HTTP API.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <utility>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string FindPrometheus() {
  for (const char* p : {"/usr/bin/prometheus", "/usr/local/bin/prometheus"}) {
    if (fs::exists(p)) return p;
  }
  return "";
}

TEST(Prometheus, ScrapesGpuaasAndTheAgent) {
  const std::string prometheus = FindPrometheus();
  if (prometheus.empty()) GTEST_SKIP() << "prometheus is not installed (scripts/install-deps.sh installs it)";
  char tmpl[] = "/tmp/gpuaas-prom-XXXXXX";
  const std::string dir = mkdtemp(tmpl);

  ServerProcess server;
  ASSERT_TRUE(server.Start("--demo --insecure-no-auth --db sqlite::memory: --telemetry-interval 1", dir + "/server.log"))
      << server.Log();
  Background agent;
  ASSERT_TRUE(agent.Start(Bin() + " agent --simulate --gpus 2 --node prom-node --interval 1 --listen 127.0.0.1:0",
                          dir + "/agent.log", R"(serving dcgm-exporter metrics on http://127\.0\.0\.1:(\d+)/metrics)"))
      << agent.Log();
  const std::string server_target = server.Url().substr(std::string("http://").size());
  std::ofstream(dir + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                         << "scrape_configs:\n"
                                         << "  - job_name: gpuaas\n    static_configs:\n      - targets: ['"
                                         << server_target << "']\n"
                                         << "  - job_name: agent\n    static_configs:\n      - targets: ['127.0.0.1:"
                                         << agent.match() << "']\n";
  // Port 0: Prometheus binds a free port itself and logs which (the query loop below waits until
  // it is ready).
  Background prom;
  ASSERT_TRUE(prom.Start(prometheus + " --config.file=" + dir + "/prometheus.yml --storage.tsdb.path=" + dir +
                             "/data --web.listen-address=127.0.0.1:0",
                         dir + "/prometheus.log", R"(msg="Listening on" address=127\.0\.0\.1:(\d+))", 60))
      << prom.Log();

  httplib::Client c("127.0.0.1", std::stoi(prom.match()));
  auto query = [&](const std::string& q) {
    auto r = c.Get("/api/v1/query", httplib::Params{{"query", q}}, httplib::Headers{});
    if (!r || r->status != 200) return json();
    json j = json::parse(r->body, nullptr, false);
    return j.is_object() && j["status"] == "success" ? j["data"]["result"] : json();
  };
  json healthy, power, up;
  for (int i = 0; i < 300; ++i) {
    healthy = query("sum(gpuaas_fleet_gpu_health{health=\"healthy\"})");
    power = query("DCGM_FI_DEV_POWER_USAGE{Hostname=\"prom-node\"}");
    up = query("sum(up)");
    if (healthy.size() == 1 && power.size() == 2 && up.size() == 1 && up[0]["value"][1] == "2") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(healthy.size(), 1u) << prom.Log();
  EXPECT_EQ(healthy[0]["value"][1], "144");  // the demo fleet, all healthy
  ASSERT_EQ(power.size(), 2u) << prom.Log();
  for (const json& s : power) {
    const double w = std::stod(s["value"][1].get<std::string>());
    EXPECT_GE(w, 70);
    EXPECT_LE(w, 700);
    EXPECT_EQ(s["metric"]["UUID"].get<std::string>().rfind("GPU-", 0), 0u);
  }
  EXPECT_EQ(up[0]["value"][1], "2");
  // gpuaas's own samples counter is scraped too: the demo feeds simulated readings.
  json samples = query("gpuaas_telemetry_samples_total");
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_GT(std::stod(samples[0]["value"][1].get<std::string>()), 0);

  // Both expositions pass Prometheus's own linter (names, types, units, HELP).
  if (fs::exists("/usr/bin/promtool")) {
    for (const auto& [name, url] : {std::pair<std::string, std::string>{"gpuaas", server.Url()},
                                    {"agent", "http://127.0.0.1:" + agent.match()}}) {
      httplib::Client target(url);
      auto body = target.Get("/metrics");
      ASSERT_TRUE(body && body->status == 200) << name;
      const std::string file = dir + "/" + name + ".prom", out = dir + "/" + name + ".lint";
      std::ofstream(file) << body->body;
      const int rc = std::system(("/usr/bin/promtool check metrics < " + file + " > " + out + " 2>&1").c_str());
      std::ifstream lint(out);
      const std::string said((std::istreambuf_iterator<char>(lint)), std::istreambuf_iterator<char>());
      if (name == "gpuaas") {
        EXPECT_EQ(rc, 0) << name << ": " << said;
        EXPECT_EQ(said, "") << name;
        continue;
      }
      // The agent speaks dcgm-exporter's format, whose names the Grafana dashboards and alerts
      // of DCGM users query: counters without "_total" and the labels modelName and Hostname.
      // Those are the only findings allowed; anything else (a parse error, a missing HELP or
      // TYPE, a bad unit) fails.
      std::istringstream lines(said);
      int findings = 0;
      for (std::string line; std::getline(lines, line);) {
        ++findings;
        const bool inherited = line.rfind("DCGM_FI_", 0) == 0 &&
                               (line.ends_with("counter metrics should have \"_total\" suffix") ||
                                line.ends_with("label names should be written in 'snake_case' not 'camelCase'"));
        EXPECT_TRUE(inherited) << line;
      }
      EXPECT_GT(findings, 0) << "the agent no longer speaks dcgm-exporter's names?";
    }
  }

  EXPECT_EQ(prom.Stop(), 0) << prom.Log();
  EXPECT_EQ(agent.Stop(), 0);
  EXPECT_EQ(server.Stop(), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
