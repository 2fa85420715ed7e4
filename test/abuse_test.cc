// The server as an attacker meets it: the real binary (the dev build carries the address and
// undefined-behaviour sanitizers), tried with a member token, agent tokens and no token, one
// class of abuse at a time (docs/security.md lists them). Every bad request must get a 4xx
// problem+json, change no stored state, and leave the server answering everyone else; at the
// end the server stops cleanly and its log holds no sanitizer report.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kOperator = "operator-token-0123456789";
constexpr const char* kMember = "member-token-0123456789ab";
constexpr const char* kNodeOne = "node-one-token-0123456789";  // agent of lab/h200-01
constexpr const char* kNone = "";

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

class AbuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuaas-abuse-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/tokens") << kOperator << ",ops,operator\n"
                                    << kMember << ",alice,member,vision\n"
                                    << kNodeOne << ",node-one,agent,lab/h200-01\n";
    std::ofstream(dir_ + "/fleet.yaml") << R"(clusters:
  - name: lab
    nodePools:
      - {name: h200, count: 2, model: H200-SXM-141GB, gpusPerNode: 4}
)";
    ASSERT_TRUE(server_.Start("--token-auth-file " + dir_ + "/tokens --fleet " + dir_ + "/fleet.yaml --db sqlite:" +
                                  dir_ + "/g.db",
                              dir_ + "/server.log"))
        << server_.Log();
    client_ = std::make_unique<httplib::Client>(server_.Url());
    client_->set_read_timeout(30);
    bystander_ = std::make_unique<httplib::Client>(server_.Url());
    bystander_->set_read_timeout(10);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static httplib::Headers With(const char* token, httplib::Headers more = {}) {
    if (*token != '\0') more.emplace("Authorization", std::string("Bearer ") + token);
    return more;
  }
  httplib::Result Get(const std::string& path, const char* token = kOperator) {
    return client_->Get(path, With(token));
  }
  json GetJson(const std::string& path, const char* token = kOperator) {
    auto r = Get(path, token);
    EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no answer");
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  httplib::Result Send(const std::string& method, const std::string& path, const std::string& body,
                       const char* token = kOperator, const std::string& type = "application/json") {
    if (method == "PUT") return client_->Put(path, With(token), body, type);
    if (method == "PATCH") return client_->Patch(path, With(token), body, type);
    return client_->Post(path, With(token), body, type);
  }

  // What the server holds: every kind's objects with their versions, the tokens, the alerts and
  // the telemetry series. A refused request must leave all of it as it was.
  std::string State() {
    std::string s;
    for (const char* path : {"/apis/gpuaas.io/v1/projects", "/apis/gpuaas.io/v1/gpupools",
                             "/apis/gpuaas.io/v1/workloads", "/apis/gpuaas.io/v1/profiles",
                             "/apis/gpuaas.io/v1/gpucapacities", "/apis/gpuaas.io/v1/nodecapacities",
                             "/apis/gpuaas.io/v1/specandcounts", "/api/v1/tokens", "/api/v1/alerts"}) {
      const json list = GetJson(path);
      s += std::string(path) + ":";
      for (const json& item : list.value("items", json::array())) {
        s += item.contains("metadata") ? item["metadata"].value("name", "") + "@" +
                                             item["metadata"].value("resourceVersion", "") + " "
                                       : item.dump() + " ";
      }
      s += "\n";
    }
    auto metrics = Get("/metrics", kNone);
    const std::string key = "\ngpuaas_telemetry_series ";
    const size_t at = metrics ? metrics->body.find(key) : std::string::npos;
    s += "series:" + (at == std::string::npos ? "?" : metrics->body.substr(at + key.size(), 12)) + "\n";
    return s;
  }

  // Each request: a 4xx problem+json (`want`, or any 4xx when 0) whose body says `says`.
  struct Bad {
    std::string what, method, path, body;
    const char* token = kOperator;
    int want = 0;
    std::string says;
    std::string type = "application/json";
  };
  void ExpectRefused(const std::vector<Bad>& cases) {
    const std::string before = State();
    for (const Bad& b : cases) {
      SCOPED_TRACE(b.what);
      auto r = b.method == "GET" ? client_->Get(b.path, With(b.token))
               : b.method == "DELETE" ? client_->Delete(b.path, With(b.token))
                                      : Send(b.method, b.path, b.body, b.token, b.type);
      ASSERT_TRUE(r) << "no answer";
      if (b.want != 0) {
        EXPECT_EQ(r->status, b.want) << r->body;
      } else {
        EXPECT_TRUE(r->status >= 400 && r->status < 500) << r->status << " " << r->body;
      }
      EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json") << r->body;
      EXPECT_NE(r->body.find(b.says), std::string::npos) << "wanted \"" << b.says << "\" in " << r->body;
      // Another client is still served.
      auto other = bystander_->Get("/readyz");
      ASSERT_TRUE(other) << "the server stopped answering";
      EXPECT_EQ(other->status, 200);
    }
    EXPECT_EQ(State(), before) << "a refused request changed stored state";
  }

  // The GPUs, sorted by node and index.
  std::vector<json> Gpus() {
    std::vector<json> gpus;
    const json list = GetJson("/apis/gpuaas.io/v1/gpucapacities");
    for (const json& g : list["items"]) gpus.push_back(g);
    std::sort(gpus.begin(), gpus.end(), [](const json& a, const json& b) {
      return std::make_pair(a["spec"]["node"].get<std::string>(), a["spec"]["index"].get<int>()) <
             std::make_pair(b["spec"]["node"].get<std::string>(), b["spec"]["index"].get<int>());
    });
    return gpus;
  }
  std::string Health(const std::string& gpu_name) {
    return GetJson("/apis/gpuaas.io/v1/gpucapacities/" + gpu_name)["status"].value("health", "");
  }
  bool WaitHealth(const std::string& gpu_name, const std::string& want) {
    for (int i = 0; i < 100; ++i) {
      if (Health(gpu_name) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // Projects "vision" (with an approved pool of one full H200, Ready) and "rival".
  void MakeProjectWithPool() {
    auto r = Send("POST", "/apis/gpuaas.io/v1/projects",
                  R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"rival"}})");
    ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "");
    r = Send("POST", "/apis/gpuaas.io/v1/projects",
             R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"vision"}})");
    ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "");
    r = Send("POST", "/apis/gpuaas.io/v1/namespaces/vision/gpupools",
             R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"train"},
                 "spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":1}]}})");
    ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "");
    r = Send("PUT", "/apis/gpuaas.io/v1/namespaces/vision/gpupools/train/approval",
             R"({"approve":true,"reason":"abuse test"})");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
    for (int i = 0; i < 100; ++i) {
      const json p = GetJson("/apis/gpuaas.io/v1/namespaces/vision/gpupools/train");
      for (const json& c : p["status"].value("conditions", json::array())) {
        if (c["type"] == "Ready" && c["status"] == "True") return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "the pool did not become Ready: "
           << GetJson("/apis/gpuaas.io/v1/namespaces/vision/gpupools/train").dump(2);
  }

  std::string dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> client_, bystander_;
};

TEST_F(AbuseTest, EveryClassOfAbuseIsRefusedAndChangesNothing) {
  MakeProjectWithPool();
  const std::vector<json> gpus = Gpus();
  ASSERT_EQ(gpus.size(), 8u);
  const std::string own = gpus[1]["spec"]["uuid"], own_name = gpus[1]["metadata"]["name"];      // on h200-01
  const std::string other = gpus[6]["spec"]["uuid"], other_name = gpus[6]["metadata"]["name"];  // on h200-02
  const std::string ns = "/apis/gpuaas.io/v1/namespaces/vision";
  const int64_t now = std::time(nullptr);

  // 1. Agent tokens read nothing of a tenant (and the fleet inventory still).
  ExpectRefused({
      {"agent lists every project's pools", "GET", "/apis/gpuaas.io/v1/gpupools", "", kNodeOne, 403, "node agent"},
      {"agent lists workloads", "GET", "/apis/gpuaas.io/v1/workloads", "", kNodeOne, 403, "node agent"},
      {"agent lists profiles", "GET", "/apis/gpuaas.io/v1/profiles", "", kNodeOne, 403, "node agent"},
      {"agent lists projects", "GET", "/apis/gpuaas.io/v1/projects", "", kNodeOne, 403, "node agent"},
      {"agent reads a pool", "GET", ns + "/gpupools/train", "", kNodeOne, 403, "members only"},
      {"agent reads invoices of a metric", "GET", "/api/v1/metrics/query?series=pool:vision/train:utilization", "",
       kNodeOne, 403, "members only"},
      // Another project looks the same to a member whether it exists or not.
      {"member reads another project", "GET", "/apis/gpuaas.io/v1/namespaces/rival/gpupools", "", kMember, 404,
       R"(projects \"rival\" not found)"},
      {"member reads a project that does not exist", "GET", "/apis/gpuaas.io/v1/namespaces/nothing/gpupools", "",
       kMember, 404, R"(projects \"nothing\" not found)"},
  });
  EXPECT_EQ(GetJson("/apis/gpuaas.io/v1/gpucapacities", kNodeOne)["items"].size(), 8u);

  // 2. An agent changes the health of its own node's GPUs only, whatever the spelling.
  const std::string xid79 = R"({"node":"h200-01","gpus":[{"uuid":")" + other +
                            R"(","readings":{"energy_mj":5},"xid_events":[{"xid":79}]}]})";
  ExpectRefused({
      {"agent fails a GPU of another node", "POST", "/api/v1/telemetry", xid79, kNodeOne, 403, "lab/h200-01 only"},
      {"agent fails a GPU in capitals of another node", "POST", "/api/v1/telemetry",
       "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\",UUID=\"" + Upper(other) + "\"} 79\n", kNodeOne, 403, "lab/h200-01 only",
       "text/plain"},
      {"agent pushes for a made-up GPU", "POST", "/api/v1/telemetry",
       "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\",UUID=\"GPU-made-up\"} 79\n", kNodeOne, 403, "not in the inventory",
       "text/plain"},
  });
  // Its own GPU in capitals fails it; in lower case, a reset (the energy counter restarts)
  // heals the same GPU: one health state, kept under the inventory's spelling.
  auto push = [&](const std::string& body, const char* token, const std::string& type) {
    auto r = Send("POST", "/api/v1/telemetry", body, token, type);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  };
  push(R"({"node":"h200-01","gpus":[{"uuid":")" + Upper(own) +
           R"(","readings":{"energy_mj":5000000},"xid_events":[{"xid":79}]}]})",
       kNodeOne, "application/json");
  ASSERT_TRUE(WaitHealth(own_name, "Unhealthy"));
  const json alerts = GetJson("/api/v1/alerts");
  ASSERT_EQ(alerts["items"].size(), 1u) << alerts.dump();
  EXPECT_EQ(alerts["items"][0]["gpu"], own);
  push(R"({"node":"h200-01","gpus":[{"uuid":")" + Lower(own) + R"(","readings":{"energy_mj":1}}]})", kNodeOne,
       "application/json");
  EXPECT_TRUE(WaitHealth(own_name, "Healthy"));
  const json resolved = GetJson("/api/v1/alerts");
  for (const json& a : resolved["items"]) {
    EXPECT_EQ(a["gpu"], own) << a.dump();
    EXPECT_FALSE(a["active"].get<bool>()) << a.dump();
  }
  EXPECT_EQ(GetJson("/api/v1/alerts?active=true")["items"].size(), 0u);
  EXPECT_EQ(Health(other_name), "Healthy");

  // 3. Bad input is a 4xx, never a 500: invalid UTF-8 anywhere, numbers out of range.
  ExpectRefused({
      {"invalid UTF-8 in a path", "GET", "/apis/gpuaas.io/v1/gpucapacities/%ff%fe", "", kOperator, 400, "UTF-8"},
      {"invalid UTF-8 in a namespace", "GET", "/apis/gpuaas.io/v1/namespaces/%c3%28/gpupools", "", kOperator, 400,
       "UTF-8"},
      {"invalid UTF-8 in a selector", "GET", "/apis/gpuaas.io/v1/gpucapacities?labelSelector=a%3D%ff", "", kOperator,
       400, "UTF-8"},
      {"invalid UTF-8 in a metric name", "GET", "/api/v1/metrics/query?series=gpu:" + own + ":%ff", "", kOperator, 400,
       "UTF-8"},
      {"invalid UTF-8 in a telemetry label", "POST", "/api/v1/telemetry",
       "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"" + own + "\",Hostname=\"\xff\"} 1\n", kOperator, 400, "UTF-8",
       "text/plain"},
      {"a huge step", "GET", "/api/v1/metrics/query?series=gpu:" + own + ":power_w&step=9223372036854775807", "",
       kOperator, 400, "step"},
      {"a negative step", "GET", "/api/v1/metrics/query?series=gpu:" + own + ":power_w&step=-5", "", kOperator, 400,
       "step"},
      {"a page size out of range", "GET", "/apis/gpuaas.io/v1/gpucapacities?limit=-1", "", kOperator, 400, "limit"},
      {"a forged continue token", "GET", "/apis/gpuaas.io/v1/gpucapacities?limit=2&continue=%00%01", "", kOperator,
       0, "continue"},
      {"deeply nested JSON", "POST", "/apis/gpuaas.io/v1/projects", std::string(100000, '[') + std::string(100000, ']'),
       kOperator, 400, ""},
      {"a name that is not DNS-1123", "POST", "/apis/gpuaas.io/v1/projects",
       R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"Not_A_Name"}})", kOperator, 0, "name"},
  });

  // 4. Telemetry cannot grow the server: made-up GPUs, huge labels, the future, refused bodies.
  auto made_up = Send("POST", "/api/v1/telemetry", "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-made-up-1\"} 1\n",
                      kOperator, "text/plain");
  ASSERT_TRUE(made_up && made_up->status == 200);
  EXPECT_EQ(json::parse(made_up->body)["unmatched"], 1);
  ExpectRefused({
      {"a 200 KB label value", "POST", "/api/v1/telemetry",
       "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"" + own + "\",Hostname=\"" + std::string(200000, 'h') + "\"} 1\n",
       kOperator, 400, "label", "text/plain"},
      {"a sample years ahead", "POST", "/api/v1/telemetry",
       "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"" + own + "\"} 1 " + std::to_string((now + 3 * 365 * 86400) * 1000) +
           "\n",
       kOperator, 400, "ahead", "text/plain"},
      {"a report years ahead", "POST", "/api/v1/telemetry",
       R"({"node":"h200-01","time_ms":)" + std::to_string((now + 3 * 365 * 86400) * 1000) + R"(,"gpus":[{"uuid":")" +
           own + R"(","readings":{"power_w":1}}]})",
       kNodeOne, 400, "ahead"},
      {"good lines, then a bad one", "POST", "/api/v1/telemetry",
       "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"" + own + "\"} 300\nDCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"" + own +
           "\"} 1593\nDCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"" + own + "\"} 1 2 3 4\n",
       kOperator, 400, "line 3", "text/plain"},
      {"a label twice", "POST", "/api/v1/telemetry",
       "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"" + own + "\",gpu=\"2\"} 40\n", kOperator, 400, "gpu", "text/plain"},
  });

  // 5. The assessment: windows in the past and of bounded span, thresholds finite.
  ExpectRefused({
      {"a window into the future", "GET", "/api/v1/assessment?to=" + std::to_string(now + 365 * 86400), "", kOperator,
       400, "future"},
      {"a window of centuries", "GET", "/api/v1/assessment?from=0&to=" + std::to_string(now - 60), "", kOperator, 400,
       "days"},
      {"idleBelow=nan", "GET", "/api/v1/assessment?idleBelow=nan", "", kOperator, 400, "idleBelow"},
  });

  // 6. HTTP: a stranger's body is not read; slow clients cannot stop others being served.
  auto open_connection = [&] {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(std::stoi(server_.Url().substr(server_.Url().rfind(':') + 1))));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    return fd;
  };
  {
    const std::string before = State();
    const int fd = open_connection();
    const std::string head =
        "POST /apis/gpuaas.io/v1/projects HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Content-Length: 1048576\r\n\r\n";
    ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[2048];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << "no answer before the body";
    EXPECT_TRUE(std::string(buf, static_cast<size_t>(n)).starts_with("HTTP/1.1 401"));
    close(fd);
    std::vector<int> slow;
    for (int i = 0; i < 200; ++i) {
      const int s = open_connection();
      const std::string part = "GET /readyz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
      send(s, part.data(), part.size(), MSG_NOSIGNAL);
      slow.push_back(s);
    }
    const auto start = std::chrono::steady_clock::now();
    auto r = bystander_->Get("/readyz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
    for (int s : slow) close(s);
    EXPECT_EQ(State(), before);
  }

  // 7. The store: refused writes leave it writable (a failed transaction is rolled back).
  ExpectRefused({
      {"a token user that is not UTF-8", "POST", "/api/v1/tokens", "{\"user\":\"\xc3\x28\",\"role\":\"operator\"}",
       kOperator, 400, "UTF-8"},
      {"a token user of 300 bytes", "POST", "/api/v1/tokens",
       R"({"user":")" + std::string(300, 'u') + R"(","role":"operator"})", kOperator, 400, "user"},
      {"a member token for a project that does not exist", "POST", "/api/v1/tokens",
       R"({"user":"eve","role":"member","project":"not-yet"})", kOperator, 0, "not-yet"},
      {"an agent token bound to nothing", "POST", "/api/v1/tokens", R"({"user":"a1","role":"agent"})", kOperator, 400,
       "cluster"},
  });
  auto fine = Send("POST", "/apis/gpuaas.io/v1/projects",
                   R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"after"}})");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->status, 201) << fine->body;

  // 8. The smaller ones: bounded annotations and display names, exact media types.
  ExpectRefused({
      {"300 KiB of annotations", "POST", "/apis/gpuaas.io/v1/projects",
       R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"big","annotations":{"a":")" +
           std::string(300 * 1024, 'a') + R"("}}})",
       kOperator, 400, "256 KiB"},
      {"an annotation key that is not a label key", "POST", "/apis/gpuaas.io/v1/projects",
       R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"keys","annotations":{"not a key":"v"}}})",
       kOperator, 400, "annotations"},
      {"a display name of 300 bytes", "POST", "/apis/gpuaas.io/v1/projects",
       R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"long"},"spec":{"displayName":")" +
           std::string(300, 'd') + R"("}})",
       kOperator, 400, "displayName"},
      {"application/jsonx", "POST", "/apis/gpuaas.io/v1/projects",
       R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"jsonx"}})", kOperator, 415, "Content-Type",
       "application/jsonx"},
      {"a member creates a pool elsewhere", "POST", "/apis/gpuaas.io/v1/namespaces/after/gpupools",
       R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"p"},"spec":{"items":[]}})", kMember, 404,
       R"(projects \"after\" not found)"},
      {"no token", "POST", ns + "/gpupools", "{}", kNone, 401, "bearer token"},
  });
  // A pool's power series answers (it was refused once).
  auto power = Get("/api/v1/metrics/query?series=pool:vision/train:power_w");
  ASSERT_TRUE(power);
  EXPECT_EQ(power->status, 200) << power->body;

  // The server survived all of it: it stops cleanly, and no sanitizer spoke.
  EXPECT_EQ(server_.Stop(), 0);
  const std::string log = server_.Log();
  for (const char* bad : {"AddressSanitizer", "runtime error:", "LeakSanitizer", "threw"}) {
    EXPECT_EQ(log.find(bad), std::string::npos) << bad << " in the server's log:\n" << log;
  }
}

}  // namespace
}  // namespace gpuaas::testing
