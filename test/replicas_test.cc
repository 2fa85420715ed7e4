// gpuaas replicas on one PostgreSQL, as an operator runs them: the real binary, three (or two)
// processes, a real database. Failover (the leader SIGKILLed during a burst of requests spread
// over every replica), fencing (a leader paused past its lease), and a database outage.
//
// The election runs on short timings here (lease 3 s, renew deadline 2 s, retry 0.5 s) so that
// five failovers fit in a test; a takeover is bounded by the lease plus a jittered retry, which
// with the defaults (15 s / 10 s / 2 s) is 15 to 17.4 s.
#include <signal.h>

#include <algorithm>
#include <ctime>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "postgres_server.h"
#include "process.h"
#include "store/store.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas::testing {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr double kLeaseS = 3, kRenewS = 2, kRetryS = 0.5;

// "2026-12-04T10:00:00Z" as unix seconds.
int64_t UnixSeconds(const json& rfc3339) {
  std::tm tm{};
  const std::string text = rfc3339.is_string() ? rfc3339.get<std::string>() : "";
  if (strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

class ReplicasTest : public ::testing::Test {
 protected:
  struct Replica {
    std::string name;
    std::unique_ptr<ServerProcess> process;
    int starts = 0;
  };

  void SetUp() override {
    std::string why;
    pg_ = PostgresServer::Shared(&why);
    if (pg_ == nullptr) GTEST_SKIP() << why;
    url_ = pg_->NewDatabase("replicas");
    ASSERT_FALSE(url_.empty());
    char tmpl[] = "/tmp/gpuaas-replicas-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    for (Replica& r : replicas_) {
      if (r.process) {
        r.process->Signal(SIGCONT);
        r.process->Stop(SIGKILL);
      }
    }
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Starts replica `i` (again): the demo fleet on the shared database, short election timings,
  // no request rate limit (the test measures the server, not the limiter).
  bool Start(size_t i) {
    if (replicas_.size() <= i) replicas_.resize(i + 1);
    Replica& r = replicas_[i];
    r.name = "r" + std::to_string(i);
    r.process = std::make_unique<ServerProcess>();
    const std::string log = fmt::format("{}/{}-{}.log", dir_, r.name, r.starts++);
    const std::string args = fmt::format(
        "--demo --db '{}' --replica-id {} --leader-elect-lease-duration {} --leader-elect-renew-deadline {} "
        "--leader-elect-retry-period {} --requests-per-second all=0",
        url_, r.name, kLeaseS, kRenewS, kRetryS);
    if (!r.process->Start(args, log)) {
      ADD_FAILURE() << r.name << " did not start: " << r.process->Log();
      return false;
    }
    if (token_.empty()) {
      const std::string text = r.process->Log();
      const size_t at = text.find("export GPUAAS_TOKEN=");
      if (at == std::string::npos) return false;
      token_ = text.substr(at + 20, text.find('\n', at) - at - 20);
    }
    return true;
  }

  httplib::Headers Auth() const { return {{"Authorization", "Bearer " + token_}}; }

  // 1 when replica `i` leads, 0 when it follows, -1 when it does not answer.
  int MasterStatus(size_t i) {
    if (!replicas_[i].process) return -1;
    httplib::Client c(replicas_[i].process->Url());
    c.set_connection_timeout(1);
    c.set_read_timeout(2);
    auto r = c.Get("/metrics");
    if (!r || r->status != 200) return -1;
    const std::string line = "gpuaas_leader_election_master_status{name=\"gpuaas-controller-manager\"} ";
    const size_t at = r->body.find(line);
    if (at == std::string::npos) return -1;
    return r->body[at + line.size()] == '1' ? 1 : 0;
  }
  // The one replica that leads, or -1 (none, or more than one answers 1).
  int Leader() {
    int leader = -1, leaders = 0;
    for (size_t i = 0; i < replicas_.size(); ++i) {
      if (MasterStatus(i) == 1) {
        leader = static_cast<int>(i);
        ++leaders;
      }
    }
    return leaders == 1 ? leader : -1;
  }

  // A request to replica `i`: nullopt when it cannot be reached.
  std::optional<httplib::Response> Call(size_t i, const std::string& method, const std::string& path,
                                        const std::string& body = "") {
    if (!replicas_[i].process) return std::nullopt;
    httplib::Client c(replicas_[i].process->Url());
    c.set_connection_timeout(1);
    c.set_read_timeout(15);
    httplib::Result r = method == "POST" ? c.Post(path, Auth(), body, "application/json")
                        : method == "PUT" ? c.Put(path, Auth(), body, "application/json")
                                          : c.Get(path, Auth());
    if (!r) return std::nullopt;
    return *r;
  }

  // Creates and approves pool `name` (one H100) through replica `via`; whether both answered 2xx.
  bool RequestAndApprove(size_t via, const std::string& name) {
    const std::string base = "/apis/gpuaas.io/v1/namespaces/demo/gpupools";
    std::optional<httplib::Response> made = Call(
        via, "POST", base,
        fmt::format(R"({{"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{{"name":"{}","namespace":"demo"}},)"
                    R"("spec":{{"items":[{{"model":"H100-SXM5-80GB","profile":"full","count":1}}]}}}})",
                    name));
    if (!made || made->status != 201) return false;
    std::optional<httplib::Response> ok =
        Call(via, "PUT", base + "/" + name + "/approval", R"({"approve":true,"reason":"test"})");
    return ok && ok->status == 200;
  }

  // Whether pool `name` of project demo is Ready, as replica `via` shows it.
  bool PoolReady(size_t via, const std::string& name) {
    std::optional<httplib::Response> r = Call(via, "GET", "/apis/gpuaas.io/v1/namespaces/demo/gpupools/" + name);
    return r && r->status == 200 && HasCondition(json::parse(r->body), "Ready", "True");
  }

  json Pools(size_t via) {
    std::optional<httplib::Response> r = Call(via, "GET", "/apis/gpuaas.io/v1/namespaces/demo/gpupools");
    if (!r || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }

  static bool HasCondition(const json& pool, std::string_view type, std::string_view status) {
    for (const json& c : pool["status"].value("conditions", json::array())) {
      if (c.value("type", "") == type && c.value("status", "") == status) return true;
    }
    return false;
  }

  // Devices held by two live pools: "gpu start" keys (a whole GPU conflicts with anything on it).
  static std::vector<std::string> DoubleBooked(const json& pools) {
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_gpu;  // gpu -> (pool, slot)
    for (const json& p : pools["items"]) {
      if (HasCondition(p, "Released", "True")) continue;
      for (const json& d : p["status"].value("allocation", json::array())) {
        const std::string slot = d.value("profile", "") == "full"
                                     ? "full"
                                     : std::to_string(d.value("placement", json::object()).value("start", -1));
        by_gpu[d.value("gpuUUID", "")].emplace_back(p["metadata"]["name"], slot);
      }
    }
    std::vector<std::string> out;
    for (const auto& [gpu, uses] : by_gpu) {
      for (size_t a = 0; a < uses.size(); ++a) {
        for (size_t b = a + 1; b < uses.size(); ++b) {
          if (uses[a].first != uses[b].first &&
              (uses[a].second == "full" || uses[b].second == "full" || uses[a].second == uses[b].second)) {
            out.push_back(gpu + " in " + uses[a].first + " and " + uses[b].first);
          }
        }
      }
    }
    return out;
  }

  PostgresServer* pg_ = nullptr;
  std::string url_;
  std::string dir_;
  std::string token_;
  std::vector<Replica> replicas_;
};

// Follows the demo's pools through whichever replica answers, resuming after the last
// resourceVersion it saw when its replica goes away: the revisions it saw, in order.
class PoolWatcher {
 public:
  PoolWatcher(std::function<std::string()> url, std::string token, int64_t from)
      : url_(std::move(url)), token_(std::move(token)), last_(from) {
    thread_ = std::thread([this] { Run(); });
  }
  ~PoolWatcher() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<int64_t> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  int64_t last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  void Run() {
    while (!stop_) {
      const std::string url = url_();
      if (url.empty()) {
        std::this_thread::sleep_for(milliseconds(100));
        continue;
      }
      httplib::Client c(url);
      c.set_connection_timeout(1);
      c.set_read_timeout(1);  // no event for a second: reconnect (and look at stop_)
      std::string buffer;
      const std::string path =
          fmt::format("/apis/gpuaas.io/v1/namespaces/demo/gpupools?watch=1&resourceVersion={}", last());
      c.Get(path, {{"Authorization", "Bearer " + token_}}, [&](const char* data, size_t n) {
        buffer.append(data, n);
        for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
          const json e = json::parse(buffer.substr(0, nl), nullptr, false);
          if (!e.is_object() || e.value("type", "") == "BOOKMARK" || e.value("type", "") == "ERROR") continue;
          const int64_t rv = std::stoll(e["object"]["metadata"].value("resourceVersion", "0"));
          std::lock_guard<std::mutex> lock(mu_);
          seen_.push_back(rv);
          last_ = rv;
        }
        return !stop_.load();
      });
    }
  }
  std::function<std::string()> url_;
  std::string token_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<int64_t> seen_;  // guarded by mu_
  int64_t last_;               // guarded by mu_
  std::thread thread_;
};

// Three replicas; 200 pools requested, approved and (a third of them) released through all of
// them while the leader is SIGKILLed at five random moments and restarted. Each time another
// replica leads within the lease and a retry; afterwards nothing is double-booked, every
// approval answered 2xx is there, every approved pool is Ready or waits with a reason, each has
// one meter, and a watcher that followed the pools through the failovers saw every revision once,
// in order.
TEST_F(ReplicasTest, FailoverDuringABurstLosesNothingAndDoubleBooksNothing) {
  ASSERT_TRUE(Start(0));
  ASSERT_TRUE(Start(1));
  ASSERT_TRUE(Start(2));
  ASSERT_TRUE(Eventually([&] { return Leader() >= 0; }, seconds(10)));
  const json first = Pools(0);
  ASSERT_TRUE(first.is_object());
  const int64_t from = std::stoll(first["metadata"].value("resourceVersion", "0"));

  std::mutex live_mu;  // which replicas answer now, for the watcher and the clients
  std::set<size_t> down;
  auto live = [&](size_t i) {
    std::lock_guard<std::mutex> lock(live_mu);
    return !down.contains(i);
  };
  PoolWatcher watcher(
      [&]() -> std::string {
        for (size_t i = 0; i < replicas_.size(); ++i) {
          if (live(i)) return replicas_[i].process->Url();
        }
        return "";
      },
      token_, from);

  // Sends a request to replica `first` and on to the others until one answers other than 503.
  auto send = [&](size_t via, const std::string& method, const std::string& path, const std::string& body)
      -> std::optional<httplib::Response> {
    for (int attempt = 0; attempt < 60; ++attempt) {
      const size_t i = (via + static_cast<size_t>(attempt)) % 3;
      if (!live(i)) continue;
      std::optional<httplib::Response> r = Call(i, method, path, body);
      if (r && r->status != 503) return r;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return std::nullopt;
  };

  constexpr int kPools = 200;
  const char* kItems[] = {"{\"model\":\"H200-SXM-141GB\",\"profile\":\"full\",\"count\":1}",
                          "{\"model\":\"H100-SXM5-80GB\",\"profile\":\"full\",\"count\":1}",
                          "{\"model\":\"A100-80GB\",\"profile\":\"1g.10gb\",\"count\":1}"};
  std::atomic<int> next{0};
  std::atomic<bool> killing{true};
  std::mutex result_mu;
  std::set<std::string> approved_2xx, released_2xx;
  std::vector<std::string> errors;
  auto worker = [&] {
    for (int i = next++; i < kPools; i = next++) {
      const std::string name = fmt::format("burst-{}", i);
      const std::string base = "/apis/gpuaas.io/v1/namespaces/demo/gpupools";
      const std::string body =
          fmt::format(R"({{"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{{"name":"{}","namespace":"demo"}},)"
                      R"("spec":{{"items":[{}]}}}})",
                      name, kItems[i % 3]);
      std::optional<httplib::Response> made = send(static_cast<size_t>(i) % 3, "POST", base, body);
      if (!made || (made->status != 201 && made->status != 409)) {
        std::lock_guard<std::mutex> lock(result_mu);
        errors.push_back(name + " create: " + (made ? std::to_string(made->status) + " " + made->body : "no answer"));
        continue;
      }
      std::optional<httplib::Response> ok = send(static_cast<size_t>(i + 1) % 3, "PUT", base + "/" + name + "/approval",
                                                 R"({"approve":true,"reason":"burst"})");
      if (ok && ok->status / 100 == 2) {
        std::lock_guard<std::mutex> lock(result_mu);
        approved_2xx.insert(name);
      } else if (!ok || ok->status != 409) {
        std::lock_guard<std::mutex> lock(result_mu);
        errors.push_back(name + " approve: " + (ok ? std::to_string(ok->status) + " " + ok->body : "no answer"));
      }
      if (i % 3 == 0) {
        std::optional<httplib::Response> rel = send(static_cast<size_t>(i + 2) % 3, "POST", base + "/" + name + "/release", "");
        std::lock_guard<std::mutex> lock(result_mu);
        if (rel && rel->status / 100 == 2) released_2xx.insert(name);
      }
      // Spread the burst over the failovers.
      if (killing) std::this_thread::sleep_for(milliseconds(60));
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) workers.emplace_back(worker);

  std::mt19937 rng(std::random_device{}());
  std::vector<double> takeovers_s;
  RunResult backup_run;
  for (int kill = 0; kill < 5; ++kill) {
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(300, 2500)(rng)));
    int leader = -1;
    ASSERT_TRUE(Eventually([&] { return (leader = Leader()) >= 0; }, seconds(20))) << "no leader before kill " << kill;
    {
      std::lock_guard<std::mutex> lock(live_mu);
      down.insert(static_cast<size_t>(leader));
    }
    const auto killed = Clock::now();
    replicas_[static_cast<size_t>(leader)].process->Stop(SIGKILL);
    int successor = -1;
    ASSERT_TRUE(Eventually(
        [&] {
          for (size_t i = 0; i < 3; ++i) {
            if (i != static_cast<size_t>(leader) && MasterStatus(i) == 1) successor = static_cast<int>(i);
          }
          return successor >= 0;
        },
        seconds(30), milliseconds(50)))
        << "no replica took over after kill " << kill;
    takeovers_s.push_back(std::chrono::duration<double>(Clock::now() - killed).count());
    ASSERT_TRUE(Start(static_cast<size_t>(leader)));
    {
      std::lock_guard<std::mutex> lock(live_mu);
      down.erase(static_cast<size_t>(leader));
    }
    if (kill == 2) {
      // A backup in the middle of the burst: one consistent snapshot while every replica writes.
      backup_run = RunGpuaas("backup --db '" + url_ + "' " + dir_ + "/burst.backup");
    }
  }
  killing = false;
  for (std::thread& t : workers) t.join();
  for (double t : takeovers_s) {
    // The lease, a jittered retry, and the 50 ms of this test's polling.
    EXPECT_LT(t, kLeaseS + 1.2 * kRetryS + 0.5) << "a takeover took " << t << " s";
  }
  std::string figures;
  for (double t : takeovers_s) figures += fmt::format(" {:.2f}", t);
  std::cout << "takeover after SIGKILL of the leader (s):" << figures << "\n";
  EXPECT_TRUE(errors.empty()) << errors.size() << " requests failed, the first: " << errors.front();

  // Settled: every approved pool Ready, or waiting with a reason; released ones released.
  json pools;
  auto settled = [&] {
    pools = Pools(0);
    if (!pools.is_object()) return false;
    for (const json& p : pools["items"]) {
      const std::string name = p["metadata"]["name"];
      if (!name.starts_with("burst-") || !p["status"].contains("approval")) continue;
      if (released_2xx.contains(name)) {
        if (!HasCondition(p, "Released", "True")) return false;
        continue;
      }
      if (HasCondition(p, "Ready", "True")) continue;
      bool waits_with_reason = false;
      for (const json& c : p["status"].value("conditions", json::array())) {
        waits_with_reason |= c.value("type", "") == "Allocated" && c.value("status", "") == "False" &&
                             !c.value("message", "").empty();
      }
      if (!waits_with_reason) return false;
    }
    return true;
  };
  ASSERT_TRUE(Eventually(settled, seconds(60), milliseconds(500))) << pools.dump().substr(0, 3000);
  std::map<std::string, json> by_name;
  for (const json& p : pools["items"]) by_name[p["metadata"]["name"]] = p;
  for (const std::string& name : approved_2xx) {
    ASSERT_TRUE(by_name.contains(name)) << name << " was approved (2xx) and is gone";
    EXPECT_TRUE(by_name[name]["status"]["approval"].value("approved", false)) << name;
  }
  const std::vector<std::string> twice = DoubleBooked(pools);
  EXPECT_TRUE(twice.empty()) << twice.size() << " devices in two live pools, the first: " << twice.front();

  // One meter per approved pool.
  std::optional<httplib::Response> meters = Call(0, "GET", "/apis/gpuaas.io/v1/usagerecords");
  ASSERT_TRUE(meters && meters->status == 200);
  std::map<std::string, int> meters_of;
  const json meter_list = json::parse(meters->body);  // held: the loop reads a member of it
  for (const json& m : meter_list["items"]) ++meters_of[m["spec"].value("pool", "")];
  // Billed seconds equal held seconds within 1 s for every released pool: the meter bills each
  // device from its allocation to the release, and the pool says when those were.
  int compared = 0;
  for (const json& m : meter_list["items"]) {
    const std::string name = m["spec"].value("pool", "");
    if (!released_2xx.contains(name) || !by_name.contains(name) || !m["spec"].contains("end")) continue;
    const json& pool = by_name[name];
    const int64_t end = UnixSeconds(m["spec"]["end"]), start = UnixSeconds(m["spec"]["start"]);
    int64_t billed = 0;
    for (const json& h : m["spec"].value("held", json::array())) {
      billed += h.value("count", 0) * std::max<int64_t>(0, end - std::max(start, UnixSeconds(h["since"])));
    }
    int64_t held = 0;
    std::optional<int64_t> allocated, released;
    for (const json& c : pool["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "Allocated" && c.value("status", "") == "True") allocated = UnixSeconds(c["lastTransitionTime"]);
      if (c.value("type", "") == "Released" && c.value("status", "") == "True") released = UnixSeconds(c["lastTransitionTime"]);
    }
    if (allocated && released && pool["status"].contains("approval")) {
      held = static_cast<int64_t>(pool["spec"]["items"][0].value("count", 1)) * std::max<int64_t>(0, *released - *allocated);
    }
    EXPECT_LE(std::abs(billed - held), 1) << name << ": billed " << billed << " s, held " << held << " s\n"
                                          << m.dump() << "\n" << pool.dump();
    ++compared;
  }
  EXPECT_GT(compared, 20);
  int approved = 0;
  for (const auto& [name, p] : by_name) {
    if (!name.starts_with("burst-") || !p["status"].contains("approval")) continue;
    ++approved;
    EXPECT_EQ(meters_of[name], 1) << name;
  }
  EXPECT_GE(approved, static_cast<int>(approved_2xx.size()));

  // The watcher saw every revision of the pools once, in order: exactly the database's feed.
  absl::StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(url_);
  ASSERT_TRUE(db.ok()) << db.status();
  std::vector<int64_t> feed;
  const int64_t until = (*db)->Revision();
  for (int64_t after = from; after < until;) {
    absl::StatusOr<std::vector<store::Change>> page = (*db)->Changes(after, 1000);
    ASSERT_TRUE(page.ok()) << page.status();
    if (page->empty()) break;
    for (const store::Change& c : *page) {
      if (c.record.key.kind == "GpuPool" && c.record.key.ns == "demo") feed.push_back(c.revision);
      after = c.revision;
    }
  }
  ASSERT_TRUE(Eventually([&] { return watcher.last() >= feed.back(); }, seconds(10)));
  watcher.Stop();
  const std::vector<int64_t> seen = watcher.seen();
  // (A transaction that writes two pools is one revision twice, in both.)
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen, feed) << "the watcher missed, repeated or reordered a revision";
  // The backup restores into a new database: the same objects at the same revision.
  ASSERT_EQ(backup_run.code, 0) << backup_run.out;
  const std::string restored_url = pg_->NewDatabase("restored");
  RunResult restored = RunGpuaas("restore --db '" + restored_url + "' " + dir_ + "/burst.backup");
  ASSERT_EQ(restored.code, 0) << restored.out;
  absl::StatusOr<std::unique_ptr<store::Store>> copy = store::OpenStore(restored_url);
  ASSERT_TRUE(copy.ok()) << copy.status();
  absl::StatusOr<store::Snapshot> got = (*copy)->ReadSnapshot();
  ASSERT_TRUE(got.ok()) << got.status();
  std::cout << backup_run.out;
  EXPECT_NE(backup_run.out.find(fmt::format("at revision {} ", got->revision)), std::string::npos) << backup_run.out;
  EXPECT_GT(got->revision, from) << "taken during the burst";
  EXPECT_LT(got->revision, until);
  EXPECT_NE(backup_run.out.find(fmt::format("backed up {} objects", got->records.size())), std::string::npos);
  // Each object as the original database had it at that revision: its resourceVersion is no
  // later than the backup's, and an object unchanged since is byte for byte the same now.
  absl::StatusOr<store::Snapshot> now = (*db)->ReadSnapshot();
  ASSERT_TRUE(now.ok());
  std::map<store::Key, const store::Record*> now_by_key;
  for (const store::Record& r : now->records) now_by_key[r.key] = &r;
  int same = 0;
  for (const store::Record& r : got->records) {
    EXPECT_LE(r.resource_version, got->revision);
    auto it = now_by_key.find(r.key);
    if (it != now_by_key.end() && it->second->resource_version == r.resource_version) {
      EXPECT_EQ(it->second->data, r.data) << r.key.ToString();
      EXPECT_EQ(it->second->uid, r.uid);
      ++same;
    }
  }
  EXPECT_GT(same, 0);

  std::cout << "pools approved (2xx): " << approved_2xx.size() << ", released: " << released_2xx.size()
            << ", revisions watched: " << seen.size() << "\n";
}


// A leader paused (SIGSTOP) past its lease: the other replica takes over and serves a new pool.
// Continued, the old leader finds the lease taken and stops leading; whatever its controllers
// tried to write meanwhile was refused by the fence (counted in its log), and nothing is
// double-booked.
TEST_F(ReplicasTest, ALeaderPausedPastItsLeaseIsFencedAndStepsDown) {
  ASSERT_TRUE(Start(0));
  ASSERT_TRUE(Start(1));
  int leader = -1;
  ASSERT_TRUE(Eventually([&] { return (leader = Leader()) >= 0; }, seconds(10)));
  const size_t old = static_cast<size_t>(leader), other = 1 - old;
  ASSERT_TRUE(RequestAndApprove(other, "before"));
  ASSERT_TRUE(Eventually([&] { return PoolReady(other, "before"); }, seconds(20)))
      << Pools(other).dump().substr(0, 2000);

  replicas_[old].process->Signal(SIGSTOP);
  const auto paused = Clock::now();
  ASSERT_TRUE(Eventually([&] { return MasterStatus(other) == 1; }, seconds(20)));
  const double takeover_s = std::chrono::duration<double>(Clock::now() - paused).count();
  // Work for the new leader while the old one sleeps: its informers will see it when it wakes.
  ASSERT_TRUE(RequestAndApprove(other, "during"));
  ASSERT_TRUE(Eventually([&] { return PoolReady(other, "during"); }, seconds(20)));

  replicas_[old].process->Signal(SIGCONT);
  ASSERT_TRUE(Eventually([&] { return MasterStatus(old) == 0; }, seconds(10))) << replicas_[old].process->Log();
  ASSERT_TRUE(Eventually(
      [&] { return replicas_[old].process->Log().find("stopped leading") != std::string::npos; }, seconds(10)));
  std::this_thread::sleep_for(seconds(2));  // what the old leader's controllers still try
  EXPECT_TRUE(replicas_[old].process->Alive()) << "a deposed leader stays up as a follower";
  EXPECT_EQ(MasterStatus(other), 1);
  const std::string log = replicas_[old].process->Log();
  int refused = 0;
  for (size_t at = log.find("fenced write refused"); at != std::string::npos; at = log.find("fenced write refused", at + 1)) {
    ++refused;
  }
  std::cout << "takeover after SIGSTOP of the leader: " << fmt::format("{:.2f}", takeover_s)
            << " s; writes of the deposed leader refused by the fence: " << refused << "\n";
  // The deposed replica still serves, from its cache, what the new leader did.
  std::optional<httplib::Response> got = Call(old, "GET", "/apis/gpuaas.io/v1/namespaces/demo/gpupools/during");
  ASSERT_TRUE(got && got->status == 200);
  EXPECT_TRUE(HasCondition(json::parse(got->body), "Ready", "True"));
  const std::vector<std::string> twice = DoubleBooked(Pools(other));
  EXPECT_TRUE(twice.empty()) << twice.front();
  // Work goes on under the new leader, and the old one can lead again (a graceful stop of the
  // new leader hands over within a retry or two).
  ASSERT_TRUE(RequestAndApprove(old, "after"));
  EXPECT_EQ(replicas_[other].process->Stop(SIGTERM), 0);
  const auto stopped = Clock::now();
  ASSERT_TRUE(Eventually([&] { return MasterStatus(old) == 1; }, seconds(10)));
  const double handover_s = std::chrono::duration<double>(Clock::now() - stopped).count();
  EXPECT_LT(handover_s, 2 * 1.2 * kRetryS + 0.5) << "a released lease is taken at the next retry";
  replicas_[other].process.reset();
  EXPECT_TRUE(Eventually([&] { return PoolReady(old, "after"); }, seconds(20)));
}

// PostgreSQL stopped for 20 s under two replicas: neither crashes; writes answer 503 with
// Retry-After; reads from the cache keep answering; afterwards a leader is elected again, writes
// work, and no acknowledged write is lost.
TEST_F(ReplicasTest, ADatabaseOutageIsRiddenOut) {
  ASSERT_TRUE(Start(0));
  ASSERT_TRUE(Start(1));
  ASSERT_TRUE(Eventually([&] { return Leader() >= 0; }, seconds(10)));
  std::set<std::string> acknowledged;
  for (int i = 0; i < 4; ++i) {
    const std::string name = "pre-" + std::to_string(i);
    ASSERT_TRUE(RequestAndApprove(static_cast<size_t>(i % 2), name));
    acknowledged.insert(name);
  }
  ASSERT_TRUE(pg_->StopServer());
  const auto down = Clock::now();
  int refused_503 = 0, reads_ok = 0;
  bool retry_after = true;
  while (Clock::now() - down < seconds(20)) {
    for (size_t i = 0; i < 2; ++i) {
      std::optional<httplib::Response> w = Call(
          i, "POST", "/apis/gpuaas.io/v1/namespaces/demo/gpupools",
          R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"outage","namespace":"demo"},)"
          R"("spec":{"items":[{"model":"H100-SXM5-80GB","profile":"full","count":1}]}})");
      ASSERT_TRUE(w) << "replica " << i << " stopped answering during the outage";
      EXPECT_EQ(w->status, 503) << w->body;
      refused_503 += w->status == 503 ? 1 : 0;
      retry_after &= w->get_header_value("Retry-After") == "1";
      std::optional<httplib::Response> r = Call(i, "GET", "/apis/gpuaas.io/v1/namespaces/demo/gpupools/pre-0");
      ASSERT_TRUE(r);
      reads_ok += r->status == 200 ? 1 : 0;
    }
    std::this_thread::sleep_for(milliseconds(500));
  }
  EXPECT_GT(refused_503, 10);
  EXPECT_TRUE(retry_after) << "a 503 says when to retry";
  EXPECT_EQ(reads_ok, refused_503) << "every read during the outage was served from the cache";
  ASSERT_TRUE(pg_->StartServer());
  const auto up = Clock::now();
  EXPECT_TRUE(replicas_[0].process->Alive() && replicas_[1].process->Alive());
  ASSERT_TRUE(Eventually([&] { return Leader() >= 0; }, seconds(30))) << replicas_[0].process->Log();
  std::cout << "leader again " << fmt::format("{:.1f}", std::chrono::duration<double>(Clock::now() - up).count())
            << " s after the database came back\n";
  bool wrote = false;
  ASSERT_TRUE(Eventually([&] { return wrote = wrote || RequestAndApprove(1, "post"); }, seconds(20)));
  acknowledged.insert("post");
  auto all_ready = [&] {
    const json pools = Pools(0);
    std::set<std::string> ready;
    for (const json& p : pools["items"]) {
      if (HasCondition(p, "Ready", "True")) ready.insert(p["metadata"]["name"]);
    }
    return std::includes(ready.begin(), ready.end(), acknowledged.begin(), acknowledged.end());
  };
  EXPECT_TRUE(Eventually(all_ready, seconds(30))) << Pools(0).dump().substr(0, 2000);
  EXPECT_TRUE(DoubleBooked(Pools(0)).empty());
}

// An XID 79 pushed to a follower reaches the leader (telemetry is forwarded there) and marks the
// GPU Unhealthy, read back through the follower, within 2 s; the verdict and its alert survive the
// leader's death.
TEST_F(ReplicasTest, TelemetryPushedToAFollowerReachesTheLeaderAndItsVerdictSurvivesAFailover) {
  ASSERT_TRUE(Start(0));
  ASSERT_TRUE(Start(1));
  int leader = -1;
  ASSERT_TRUE(Eventually([&] { return (leader = Leader()) >= 0; }, seconds(10)));
  const size_t old = static_cast<size_t>(leader), follower = 1 - old;
  std::optional<httplib::Response> list = Call(follower, "GET", "/apis/gpuaas.io/v1/gpucapacities?limit=1");
  ASSERT_TRUE(list && list->status == 200);
  const json gpu = json::parse(list->body)["items"][0];
  const std::string uuid = gpu["spec"]["uuid"], name = gpu["metadata"]["name"];
  auto health = [&](size_t via) {
    std::optional<httplib::Response> r = Call(via, "GET", "/apis/gpuaas.io/v1/gpucapacities/" + name);
    return r && r->status == 200 ? json::parse(r->body)["status"].value("health", "") : std::string();
  };
  ASSERT_EQ(health(follower), "Healthy");

  httplib::Client c(replicas_[follower].process->Url());
  const std::string text = "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" + uuid +
                           "\",err_code=\"79\"} 79\n";
  const auto pushed = Clock::now();
  auto r = c.Post("/api/v1/telemetry", Auth(), text, "text/plain; version=0.0.4");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("X-Gpuaas-Served-By"), replicas_[old].process->Url()) << "forwarded to the leader";
  ASSERT_TRUE(Eventually([&] { return health(follower) == "Unhealthy"; }, seconds(5), milliseconds(20)));
  const double took_s = std::chrono::duration<double>(Clock::now() - pushed).count();
  std::cout << "XID 79 pushed to a follower: the GPU reads Unhealthy through it after " << fmt::format("{:.3f}", took_s)
            << " s\n";
  EXPECT_LT(took_s, 2.0);
  auto alerted = [&](size_t via) {
    std::optional<httplib::Response> a = Call(via, "GET", "/api/v1/alerts");
    if (!a || a->status != 200) return false;
    const json body = json::parse(a->body);  // held: the loop reads a member of it
    for (const json& item : body["items"]) {
      if (item.value("gpu", "") == uuid) return true;
    }
    return false;
  };
  EXPECT_TRUE(alerted(follower)) << "alerts read through a follower are the leader's";

  replicas_[old].process->Stop(SIGKILL);
  replicas_[old].process.reset();
  ASSERT_TRUE(Eventually([&] { return MasterStatus(follower) == 1; }, seconds(20)));
  EXPECT_EQ(health(follower), "Unhealthy") << "the verdict is in the store";
  EXPECT_TRUE(Eventually([&] { return alerted(follower); }, seconds(5))) << "restored into the new leader's hub";
}

// The manifests in deploy/ start the server with flags it has: every --flag of every container
// that runs `gpuaas server` is one `gpuaas server --help` lists.
TEST(Deploy, TheManifestsUseOnlyFlagsTheServerHas) {
  const RunResult help = RunGpuaas("server --help");
  ASSERT_EQ(help.code, 0) << help.out;
  int checked = 0;
  for (const char* file : {"deploy/server.yaml", "deploy/replicas.yaml"}) {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(file)) {
      if (!doc["kind"] || doc["kind"].as<std::string>() != "Deployment") continue;
      for (const YAML::Node& c : doc["spec"]["template"]["spec"]["containers"]) {
        const YAML::Node args = c["args"];
        if (!args || args.size() == 0 || args[0].as<std::string>() != "server") continue;
        for (size_t i = 1; i < args.size(); ++i) {
          const std::string arg = args[i].as<std::string>();
          ASSERT_TRUE(arg.starts_with("--")) << file << ": " << arg;
          const std::string flag = arg.substr(0, arg.find('='));
          EXPECT_NE(help.out.find(flag + " "), std::string::npos) << file << " gives " << flag << ", which the server does not have";
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 15);
}

}  // namespace
}  // namespace gpuaas::testing
