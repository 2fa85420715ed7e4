// Remote write end to end, against the real receivers of Debian 12 (scripts/install-deps.sh):
// Prometheus 2.42 with --web.enable-remote-write-receiver and VictoriaMetrics 1.79.5, each on a
// loopback port. dcgm-exporter text for 100 GPUs in pools is pushed into a gpuaas server that
// writes to both; every sample is read back through each receiver's query API with its value,
// timestamp and labels. Then VictoriaMetrics is stopped for 30 s (nothing that fits the queue is
// lost), stopped again while more arrives than the queue holds (the rest is counted as dropped),
// and gpuaas restarts and replays old readings (Prometheus refuses them with a 400, which is not
// retried; VictoriaMetrics, deduplicating, keeps one point per timestamp). Last, each panel of
// the Grafana dashboard in deploy/grafana runs against the Prometheus.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process.h"
#include "test_certs.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kGpus = 100;
constexpr int kQueue = 1000;  // samples per receiver; three rounds of 100 GPUs x 3 readings fit

// A free loopback port, for VictoriaMetrics (which does not log the port it bound to).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// One reading as pushed: series identity (metric, GPU) and its point.
using Key = std::tuple<std::string, std::string, int64_t>;  // metric, gpu, t_ms

// What a receiver holds: every raw sample of gpuaas's series, through /api/v1/query with a range
// selector (both receivers answer it with the raw points), and each series' labels.
struct Held {
  std::map<Key, double> points;
  std::map<std::pair<std::string, std::string>, json> labels;  // (metric, gpu) -> labels
  int duplicates = 0;
};

Held ReadBack(int port, int64_t at_ms) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30);
  Held h;
  auto r = c.Get("/api/v1/query",
                 httplib::Params{{"query", R"q({__name__=~"gpuaas_(power_w|sm_active|temp_c)"}[3h])q"},
                                 {"time", std::to_string(at_ms / 1000.0)},
                                 {"nocache", "1"}},
                 httplib::Headers{});
  if (!r || r->status != 200) return h;
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || j["status"] != "success") return h;
  for (const json& s : j["data"]["result"]) {
    const std::string metric = s["metric"]["__name__"], gpu = s["metric"].value("gpu", "");
    h.labels[{metric, gpu}] = s["metric"];
    for (const json& v : s["values"]) {
      const auto t = static_cast<int64_t>(std::llround(v[0].get<double>() * 1000));
      if (!h.points.emplace(Key{metric, gpu, t}, std::stod(v[1].get<std::string>())).second) ++h.duplicates;
    }
  }
  return h;
}

class RemoteWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/prometheus") || !fs::exists("/usr/bin/victoria-metrics")) {
      GTEST_SKIP() << "prometheus or victoria-metrics is not installed (scripts/install-deps.sh installs both)";
    }
    char tmpl[] = "/tmp/gpuaas-rw-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // Prometheus: no scraping, only the receiver.
    std::ofstream(dir_ + "/prometheus.yml") << "global:\n  scrape_interval: 15s\n";
    ASSERT_TRUE(prom_.Start("/usr/bin/prometheus --config.file=" + dir_ + "/prometheus.yml --storage.tsdb.path=" + dir_ +
                                "/prom --web.listen-address=127.0.0.1:0 --web.enable-remote-write-receiver",
                            dir_ + "/prometheus.log", R"(msg="Listening on" address=127\.0\.0\.1:(\d+))", 60))
        << prom_.Log();
    prom_port_ = std::stoi(prom_.match());
    vm_port_ = FreePort();
    StartVm();
    // 100 whole H200s on 25 nodes; every one in one of two pools of project vision.
    std::ofstream(dir_ + "/fleet.yaml") << "clusters:\n  - name: lab\n    nodePools:\n"
                                        << "      - {name: h200, count: 25, model: H200-SXM-141GB, gpusPerNode: 4}\n";
    StartServer();
    const std::string s = " --server " + server_.Url();
    ASSERT_EQ(RunGpuaas("project create vision --quota-full H200-SXM-141GB=100" + s).code, 0);
    for (const auto& [pool, n] : {std::pair<std::string, int>{"train", 60}, {"infer", 40}}) {
      RunResult req = RunGpuaas("pool request " + pool + " --item H200-SXM-141GB/full=" + std::to_string(n) + " -p vision" + s);
      ASSERT_EQ(req.code, 0) << req.out;
      ASSERT_EQ(RunGpuaas("pool approve " + pool + " --reason ok -p vision" + s).code, 0);
    }
    // Which pool holds which GPU, as the API says.
    httplib::Client c(server_.Url());
    ASSERT_TRUE(Eventually(
        [&] {
          owner_.clear();
          for (const std::string pool : {"train", "infer"}) {
            auto r = c.Get("/apis/gpuaas.io/v1/namespaces/vision/gpupools/" + pool);
            if (!r || r->status != 200) return false;
            const json obj = json::parse(r->body);  // held: a range-for over a temporary's member dangles
            for (const json& d : obj["status"].value("allocation", json::array())) {
              owner_[d["gpuUUID"]] = pool;
            }
          }
          return owner_.size() == kGpus;
        },
        60s));
    auto gpus = c.Get("/apis/gpuaas.io/v1/gpucapacities");
    ASSERT_TRUE(gpus && gpus->status == 200);
    const json list = json::parse(gpus->body);
    for (const json& g : list["items"]) gpu_node_[g["spec"]["uuid"]] = g["spec"]["node"];
    ASSERT_EQ(gpu_node_.size(), static_cast<size_t>(kGpus));
    // An hour ago, on a minute: rounds 0-3, 4-7 and 8-10 fall in three minutes.
    const int64_t now_s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    t0_ms_ = (now_s - 3600) / 60 * 60 * 1000;
  }
  void TearDown() override {
    server_.Stop();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void StartVm() {
    ASSERT_TRUE(vm_.Start("/usr/bin/victoria-metrics -httpListenAddr=127.0.0.1:" + std::to_string(vm_port_) +
                              " -storageDataPath=" + dir_ + "/vm -dedup.minScrapeInterval=1ms -search.latencyOffset=0s",
                          dir_ + "/vm.log", "started VictoriaMetrics", 60))
        << vm_.Log();
    // Ready once it answers.
    httplib::Client c("127.0.0.1", vm_port_);
    ASSERT_TRUE(Eventually([&] { auto r = c.Get("/health"); return r && r->status == 200; }, 30s));
  }
  void StartServer() {
    ASSERT_TRUE(server_.Start("--insecure-no-auth --fleet " + dir_ + "/fleet.yaml --db sqlite:" + dir_ +
                                  "/g.db --telemetry-remote-write http://127.0.0.1:" + std::to_string(prom_port_) +
                                  "/api/v1/write --telemetry-remote-write http://127.0.0.1:" + std::to_string(vm_port_) +
                                  "/api/v1/write --telemetry-remote-write-queue " + std::to_string(kQueue) +
                                  // One shard: the queue's arithmetic below is exact.
                                  " --telemetry-remote-write-shards 1" +
                                  // History older than half an hour is read back from VictoriaMetrics.
                                  " --telemetry-hot-window 1800 --telemetry-query-timeout 2 --telemetry-query "
                                  "http://127.0.0.1:" + std::to_string(vm_port_),
                              dir_ + "/server.log"))
        << server_.Log();
  }

  // Round r: power, SM activity and temperature of every GPU at t0 + 15 s * r, as dcgm-exporter
  // writes them (its labels, explicit timestamps), pushed in one body.
  void Push(int r) {
    const int64_t t = t0_ms_ + 15'000 * r;
    std::string text;
    int i = 0;
    for (const auto& [uuid, node] : gpu_node_) {
      const std::string labels = "{gpu=\"" + std::to_string(i % 4) + "\",UUID=\"" + uuid +
                                 "\",device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"" + node +
                                 "\",container=\"\",namespace=\"\",pod=\"\"}";
      const double power = 100 + i + r * 0.125, sm = std::fmod(0.01 * (i + r), 1.0), temp = 30 + (i + r) % 50;
      text += "DCGM_FI_DEV_POWER_USAGE" + labels + " " + std::to_string(power) + " " + std::to_string(t) + "\n";
      text += "DCGM_FI_PROF_SM_ACTIVE" + labels + " " + std::to_string(sm) + " " + std::to_string(t) + "\n";
      text += "DCGM_FI_DEV_GPU_TEMP" + labels + " " + std::to_string(temp) + " " + std::to_string(t) + "\n";
      pushed_[Key{"gpuaas_power_w", uuid, t}] = std::stod(std::to_string(power));
      pushed_[Key{"gpuaas_sm_active", uuid, t}] = std::stod(std::to_string(sm));
      pushed_[Key{"gpuaas_temp_c", uuid, t}] = std::stod(std::to_string(temp));
      ++i;
    }
    httplib::Client c(server_.Url());
    auto res = c.Post("/api/v1/telemetry", text, "text/plain; version=0.0.4");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    last_push_ = res->body;
  }

  // The sender's metric `name` for the receiver on `port`.
  double Metric(const std::string& name, int port) {
    httplib::Client c(server_.Url());
    auto r = c.Get("/metrics");
    if (!r) return -1;
    const std::regex re(name + R"(\{url="http://127\.0\.0\.1:)" + std::to_string(port) + R"(/api/v1/write"\} (\S+))");
    std::smatch m;
    return std::regex_search(r->body, m, re) ? std::stod(m[1]) : -1;
  }
  bool Sent(int port, double total) {
    return Eventually([&] { return Metric("gpuaas_remote_storage_samples_total", port) >= total; }, 60s) &&
           Metric("gpuaas_remote_storage_samples_total", port) == total;
  }
  // GET /api/v1/metrics/query for a GPU's readings of `metric` in [from, to) by `step`.
  httplib::Result Chart(const std::string& gpu, const std::string& metric, int64_t from, int64_t to, int64_t step) {
    httplib::Client c(server_.Url());
    c.set_read_timeout(30);
    return c.Get("/api/v1/metrics/query",
                 httplib::Params{{"series", "gpu:" + gpu + ":" + metric},
                                 {"from", std::to_string(from)},
                                 {"to", std::to_string(to)},
                                 {"step", std::to_string(step)}},
                 httplib::Headers{});
  }

  // The sender's lines of /metrics, for failure messages.
  std::string SenderState() {
    httplib::Client c(server_.Url());
    auto r = c.Get("/metrics");
    std::string out;
    for (const std::string& l : Lines(r ? r->body : "")) {
      if (l.starts_with("gpuaas_remote_storage") || l.starts_with("gpuaas_telemetry_samples")) out += l + "\n";
    }
    return out;
  }
  void FlushVm() {
    httplib::Client c("127.0.0.1", vm_port_);
    c.Get("/internal/force_flush");
  }

  // Every pushed point of rounds [from, to) is held with its value, and every series' labels
  // are the GPU's: node, cluster, model, the project and pool holding it.
  void ExpectHeld(const Held& h, int from, int to, const std::string& who) {
    int missing = 0, wrong = 0;
    for (const auto& [key, v] : pushed_) {
      const int64_t round = (std::get<2>(key) - t0_ms_) / 15'000;
      if (round < from || round >= to) continue;
      auto it = h.points.find(key);
      if (it == h.points.end()) {
        ++missing;
      } else if (it->second != v) {
        ++wrong;
      }
    }
    EXPECT_EQ(missing, 0) << who;
    EXPECT_EQ(wrong, 0) << who;
    EXPECT_EQ(h.duplicates, 0) << who;
    int bad_labels = 0;
    for (const auto& [id, labels] : h.labels) {
      const std::string& gpu = id.second;
      const json want = {{"__name__", id.first}, {"cluster", "lab"},  {"gpu", gpu},         {"model", "H200-SXM-141GB"},
                         {"node", gpu_node_[gpu]}, {"project", "vision"}, {"pool", owner_[gpu]}};
      if (labels != want) {
        if (++bad_labels < 3) ADD_FAILURE() << who << ": " << labels.dump() << " != " << want.dump();
      }
    }
    EXPECT_EQ(h.labels.size(), static_cast<size_t>(3 * kGpus)) << who;
  }

  std::string dir_;
  Background prom_, vm_;
  int prom_port_ = 0, vm_port_ = 0;
  ServerProcess server_;
  std::map<std::string, std::string> owner_;     // GPU UUID -> pool
  std::map<std::string, std::string> gpu_node_;  // GPU UUID -> node
  std::map<Key, double> pushed_;
  int64_t t0_ms_ = 0;
  std::string last_push_;
};

TEST_F(RemoteWriteTest, EverySampleReachesPrometheusAndVictoriaMetricsThroughOutagesAndRestarts) {
  // 1. Three rounds: 900 samples reach both receivers, each read back as pushed.
  for (int r = 0; r < 3; ++r) Push(r);
  ASSERT_TRUE(Sent(prom_port_, 900)) << SenderState() << last_push_;
  ASSERT_TRUE(Sent(vm_port_, 900)) << server_.Log();
  FlushVm();
  const int64_t after = t0_ms_ + 15'000 * 20;
  ExpectHeld(ReadBack(prom_port_, after), 0, 3, "prometheus");
  ExpectHeld(ReadBack(vm_port_, after), 0, 3, "victoria-metrics");

  // The GPU charts of that hour-old minute come back from VictoriaMetrics (older than the half
  // hour kept in memory), as the store would answer them: each minute's mean and max of the raw
  // readings (rounds 0-2 so far, all in the first minute).
  const std::string gpu = gpu_node_.begin()->first;  // the first GPU pushed: i = 0
  {
    auto r = Chart(gpu, "power_w", t0_ms_ / 1000, t0_ms_ / 1000 + 120, 60);
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    const json points = json::parse(r->body)["points"];
    ASSERT_EQ(points.size(), 2u) << r->body;
    EXPECT_EQ(points[0]["t"], t0_ms_ / 1000);
    EXPECT_DOUBLE_EQ(points[0]["value"].get<double>(), (100 + 100.125 + 100.25) / 3) << r->body;
    EXPECT_DOUBLE_EQ(points[0]["max"].get<double>(), 100.25);
    EXPECT_TRUE(points[1]["value"].is_null()) << r->body;  // nothing pushed there yet
  }

  // 2. VictoriaMetrics is down for 30 s while three more rounds arrive: they wait in its queue
  // (900 of 1,000) and reach it once it is back; Prometheus is not held up meanwhile.
  const auto down = std::chrono::steady_clock::now();
  ASSERT_EQ(vm_.Stop(), 0);
  for (int r = 3; r < 6; ++r) Push(r);
  ASSERT_TRUE(Sent(prom_port_, 1800));
  EXPECT_EQ(Metric("gpuaas_remote_storage_samples_pending", vm_port_), 900);
  // Meanwhile the history is unavailable: a chart reaching back there is a 503 that says why,
  // at once; the hot half hour still answers.
  {
    const auto asked = std::chrono::steady_clock::now();
    auto r = Chart(gpu, "power_w", t0_ms_ / 1000, t0_ms_ / 1000 + 120, 60);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_NE(r->body.find("telemetry history at http://127.0.0.1:" + std::to_string(vm_port_) + " is unavailable"),
              std::string::npos)
        << r->body;
    EXPECT_LT(std::chrono::steady_clock::now() - asked, 10s);
    const int64_t now_s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto hot = Chart(gpu, "power_w", now_s - 600, now_s, 60);
    ASSERT_TRUE(hot);
    EXPECT_EQ(hot->status, 200) << hot->body;
  }
  std::this_thread::sleep_until(down + 30s);
  EXPECT_GT(Metric("gpuaas_remote_storage_samples_retried_total", vm_port_), 0);
  StartVm();
  ASSERT_TRUE(Sent(vm_port_, 1800)) << server_.Log();
  EXPECT_EQ(Metric("gpuaas_remote_storage_samples_dropped_total", vm_port_), 0);
  FlushVm();
  ExpectHeld(ReadBack(vm_port_, after), 0, 6, "victoria-metrics after 30 s down");

  // 3. Down again while five rounds (1,500 samples) arrive, 15 s apart as agents push (here as
  // soon as Prometheus has taken the last one): the queue keeps the first 1,000, the other 500
  // are counted as dropped, and what was kept arrives.
  ASSERT_EQ(vm_.Stop(), 0);
  for (int r = 6; r < 11; ++r) {
    Push(r);
    ASSERT_TRUE(Sent(prom_port_, 300 * (r + 1))) << SenderState();
  }
  EXPECT_EQ(Metric("gpuaas_remote_storage_samples_dropped_total", vm_port_), 500);
  EXPECT_EQ(Metric("gpuaas_remote_storage_samples_pending", vm_port_), kQueue);
  StartVm();
  ASSERT_TRUE(Sent(vm_port_, 2800)) << server_.Log();
  ASSERT_TRUE(Sent(prom_port_, 3300)) << SenderState();
  FlushVm();
  const Held vm = ReadBack(vm_port_, after);
  ExpectHeld(vm, 0, 9, "victoria-metrics, rounds kept");
  EXPECT_EQ(vm.points.size(), 2800u);
  ExpectHeld(ReadBack(prom_port_, after), 0, 11, "prometheus, all rounds");

  // 4. gpuaas restarts (its raw samples are gone; the rollups of closed minutes come back from
  // the store, so a replay older than those is refused by the hub itself) and an agent replays
  // round 9, which the hub takes again: Prometheus refuses it (400, out of order: it holds round
  // 10), which drops the batch after one try; VictoriaMetrics takes it and, deduplicating
  // (-dedup.minScrapeInterval=1ms), still holds one point per timestamp.
  server_.Stop();
  StartServer();
  Push(9);
  ASSERT_TRUE(Eventually([&] { return Metric("gpuaas_remote_storage_samples_failed_total", prom_port_) == 300; }, 60s))
      << SenderState() << server_.Log();
  EXPECT_EQ(Metric("gpuaas_remote_storage_samples_retried_total", prom_port_), 0);
  EXPECT_EQ(Metric("gpuaas_remote_storage_samples_total", prom_port_), 0);
  ASSERT_TRUE(Sent(vm_port_, 300));
  FlushVm();
  const Held again = ReadBack(vm_port_, after);
  EXPECT_EQ(again.duplicates, 0);
  // Rounds 0-8 and 100 samples of round 9 were there; the replay adds the 200 the second outage
  // dropped, and the 100 it repeats are kept once.
  EXPECT_EQ(again.points.size(), 3000u);
  ExpectHeld(again, 0, 10, "victoria-metrics after the replay");
  const Held prom_again = ReadBack(prom_port_, after);
  EXPECT_EQ(prom_again.duplicates, 0);
  EXPECT_EQ(prom_again.points.size(), 3300u);

  // 5. Each panel of the Grafana dashboard runs against the Prometheus without error, and the
  // per-project and per-pool ones find the pools.
  std::ifstream in("deploy/grafana/gpuaas-gpus.json");
  ASSERT_TRUE(in.good()) << "deploy/grafana/gpuaas-gpus.json";
  const json dashboard = json::parse(in);
  httplib::Client p("127.0.0.1", prom_port_);
  int queries = 0;
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel.value("targets", json::array())) {
      std::string expr = target["expr"];
      expr = std::regex_replace(expr, std::regex(R"(\$__range)"), "3h");
      expr = std::regex_replace(expr, std::regex(R"(\$__(rate_)?interval)"), "1m");
      expr = std::regex_replace(expr, std::regex(R"(\$\{?(cluster|project|pool|node|gpu)\}?)"), ".*");
      auto r = p.Get("/api/v1/query", httplib::Params{{"query", expr}, {"time", std::to_string((t0_ms_ + 150'000) / 1000)}},
                     httplib::Headers{});
      ASSERT_TRUE(r) << expr;
      const json j = json::parse(r->body, nullptr, false);
      EXPECT_EQ(j.value("status", ""), "success") << panel["title"] << ": " << expr << ": " << r->body;
      ++queries;
      if (panel["title"] == "SM activity by pool") {
        EXPECT_EQ(j["data"]["result"].size(), 2u) << r->body;  // train and infer
      }
    }
  }
  EXPECT_GE(queries, 10);
}


// The same over HTTPS with a bearer token, both ways: VictoriaMetrics behind its own vmauth
// (Debian's package), which serves TLS with a certificate of the test's CA and passes only
// requests bearing the token. The token file is read at each request: a wrong token gets the
// batch refused (not retried), the right one again gets the next through.
TEST(RemoteWriteTls, WritesAndReadsBackOverHttpsWithABearerToken) {
  if (!fs::exists("/usr/bin/victoria-metrics") || !fs::exists("/usr/bin/vmauth")) {
    GTEST_SKIP() << "victoria-metrics is not installed (scripts/install-deps.sh installs it)";
  }
  char tmpl[] = "/tmp/gpuaas-rwtls-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const TestPki pki = MakeTestPki();
  std::ofstream(dir + "/ca.pem") << pki.ca.cert_pem;
  std::ofstream(dir + "/server.pem") << pki.server.cert_pem;
  std::ofstream(dir + "/server.key") << pki.server.key_pem;
  std::ofstream(dir + "/token") << "s3cret-0123456789\n";
  const int vm_port = FreePort();
  Background vm, auth;
  ASSERT_TRUE(vm.Start("/usr/bin/victoria-metrics -httpListenAddr=127.0.0.1:" + std::to_string(vm_port) +
                           " -storageDataPath=" + dir + "/vm -dedup.minScrapeInterval=1ms",
                       dir + "/vm.log", "started VictoriaMetrics", 60))
      << vm.Log();
  const int auth_port = FreePort();
  std::ofstream(dir + "/auth.yml") << "users:\n  - bearer_token: \"s3cret-0123456789\"\n    url_prefix: \"http://127.0.0.1:"
                                   << vm_port << "\"\n";
  ASSERT_TRUE(auth.Start("/usr/bin/vmauth -auth.config=" + dir + "/auth.yml -httpListenAddr=127.0.0.1:" +
                             std::to_string(auth_port) + " -tls -tlsCertFile=" + dir + "/server.pem -tlsKeyFile=" + dir +
                             "/server.key",
                         dir + "/vmauth.log", "started vmauth", 60))
      << auth.Log();
  std::ofstream(dir + "/fleet.yaml") << "clusters:\n  - name: lab\n    nodePools:\n"
                                     << "      - {name: h200, count: 2, model: H200-SXM-141GB, gpusPerNode: 4}\n";
  const std::string receiver = "https://127.0.0.1:" + std::to_string(auth_port);
  ServerProcess server;
  ASSERT_TRUE(server.Start("--insecure-no-auth --fleet " + dir + "/fleet.yaml --db sqlite:" + dir +
                               "/g.db --telemetry-remote-write " + receiver + "/api/v1/write --telemetry-query " + receiver +
                               " --telemetry-bearer-token-file " + dir + "/token --telemetry-ca-file " + dir +
                               "/ca.pem --telemetry-hot-window 1800",
                           dir + "/server.log"))
      << server.Log();
  httplib::Client c(server.Url());
  auto gpus = c.Get("/apis/gpuaas.io/v1/gpucapacities");
  ASSERT_TRUE(gpus && gpus->status == 200);
  const json list = json::parse(gpus->body);
  std::vector<std::string> uuids;
  for (const json& g : list["items"]) uuids.push_back(g["spec"]["uuid"]);
  ASSERT_EQ(uuids.size(), 8u);
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const int64_t t0 = (now_s - 3600) / 60 * 60;
  auto push = [&](int round) {
    std::string text;
    for (size_t i = 0; i < uuids.size(); ++i) {
      text += "DCGM_FI_DEV_POWER_USAGE{UUID=\"" + uuids[i] + "\"} " + std::to_string(200 + 10 * round + i) + " " +
              std::to_string((t0 + 15 * round) * 1000) + "\n";
    }
    auto r = c.Post("/api/v1/telemetry", text, "text/plain; version=0.0.4");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  };
  auto metric = [&](const std::string& name) {
    auto r = c.Get("/metrics");
    const std::regex re("gpuaas_remote_storage_" + name + R"(\{[^}]*\} (\S+))");
    std::smatch m;
    return r && std::regex_search(r->body, m, re) ? std::stod(m[1]) : -1.0;
  };
  push(0);
  ASSERT_TRUE(Eventually([&] { return metric("samples_total") == 8; }, 30s)) << server.Log() << auth.Log();
  // A wrong token: refused, dropped, not retried.
  std::ofstream(dir + "/token", std::ios::trunc) << "wrong-token-0123456789\n";
  push(1);
  ASSERT_TRUE(Eventually([&] { return metric("samples_failed_total") == 8; }, 30s)) << server.Log();
  EXPECT_EQ(metric("samples_retried_total"), 0);
  std::ofstream(dir + "/token", std::ios::trunc) << "s3cret-0123456789\n";
  push(2);
  ASSERT_TRUE(Eventually([&] { return metric("samples_total") == 16; }, 30s)) << server.Log();
  // Read back through vmauth over TLS: the first GPU's first minute, rounds 0 and 2 (round 1
  // was refused).
  httplib::Client(("http://127.0.0.1:" + std::to_string(vm_port)).c_str()).Get("/internal/force_flush");
  auto r = c.Get("/api/v1/metrics/query", httplib::Params{{"series", "gpu:" + uuids[0] + ":power_w"},
                                                          {"from", std::to_string(t0)},
                                                          {"to", std::to_string(t0 + 60)},
                                                          {"step", "60"}},
                 httplib::Headers{});
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer") << server.Log();
  const json points = json::parse(r->body)["points"];
  ASSERT_EQ(points.size(), 1u);
  EXPECT_DOUBLE_EQ(points[0]["value"].get<double>(), (200.0 + 220.0) / 2) << r->body;
  EXPECT_DOUBLE_EQ(points[0]["max"].get<double>(), 220.0);
  server.Stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
