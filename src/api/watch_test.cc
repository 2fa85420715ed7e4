// Watch streams: a real server, store, cache and control plane (threads, real clock), clients
// over loopback. Waits are on conditions with deadlines.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "api/server.h"
#include "cluster/simulated/fleet.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "store/sqlite_store.h"

namespace gpuaas::api {
namespace {

using nlohmann::json;
constexpr char kPools[] = "/apis/gpuaas.io/v1/namespaces/vision/gpupools";

// Reads a watch on a thread of its own and keeps its events.
class Watcher {
 public:
  // Bookmarks are always asked for, every 200 ms, so that the reader can stop while nothing
  // happens; `with_bookmarks` says whether they are kept among the events.
  Watcher(int port, std::string path, std::string token, bool with_bookmarks = false) : bookmarks_(with_bookmarks) {
    if (path.find("allowWatchBookmarks") == std::string::npos) path += "&allowWatchBookmarks=true";
    thread_ = std::thread([this, port, path = std::move(path), token = std::move(token)] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(60);
      httplib::Headers h;
      if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
      auto res = c.Get(path, h, [this](const char* data, size_t n) {
        std::lock_guard<std::mutex> lock(mu_);
        buffer_.append(data, n);
        for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos; buffer_.erase(0, nl + 1)) {
          json e = json::parse(buffer_.substr(0, nl));
          if (bookmarks_ || e["type"] != "BOOKMARK") events_.push_back(std::move(e));
        }
        cv_.notify_all();
        return !stop_;
      });
      std::lock_guard<std::mutex> lock(mu_);
      status_ = res ? res->status : -1;
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~Watcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    thread_.join();
  }
  // Waits until `pred(events)` holds, up to 30 s.
  bool WaitFor(const std::function<bool(const std::vector<json>&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return pred(events_) || ended_; }) && pred(events_);
  }
  std::vector<json> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  bool WaitEnded() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return ended_; });
  }

 private:
  const bool bookmarks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;
  std::vector<json> events_;
  bool stop_ = false, ended_ = false;
  int status_ = 0;
  std::thread thread_;
};

std::string Cond(const json& obj, const std::string& type) {
  for (const json& c : obj["status"].value("conditions", json::array())) {
    if (c["type"] == type) return c["status"];
  }
  return "-";
}

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuaas-watch-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store::SqliteOptions so;
    so.path = dir_ + "/w.db";
    so.change_retention = 500;  // small, so that compaction can be seen
    store_ = std::move(*store::OpenSqliteStore(so));
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    std::vector<std::string> kinds = {std::string(kTokenKind)};
    for (const ResourceType& t : ResourceTypes()) kinds.push_back(t.kind);
    ASSERT_TRUE(cache_->Start(kinds).ok());
    drivers_ = cluster::simulated::MakeDrivers(cluster::simulated::DemoFleet());
    std::map<std::string, cluster::ClusterDriver*> by_name;
    for (auto& d : drivers_) by_name[std::string(d->ClusterName())] = d.get();
    cp_ = std::make_unique<controller::ControlPlane>(*store_, *cache_, RealClock::Get(), by_name, hub_);
    cp_->Start();
    ASSERT_TRUE(cp_->inventory().WaitObserved(std::chrono::seconds(60)));
    pools_ = std::make_unique<service::PoolService>(*store_, RealClock::Get(), [] {
      return std::map<std::string, int64_t>{{"H200-SXM-141GB", 48}};
    });
    auth_ = std::make_unique<Authenticator>(*store_, *cache_, RealClock::Get());
    ServerOptions o;
    o.port = 0;
    o.watch_bookmark_interval = std::chrono::milliseconds(200);
    o.max_connections_per_address = 2000;  // a thousand watchers come from one address here
    o.requests_per_second_per_token = RoleRates::All(0);
    server_ = std::make_unique<ApiServer>(o, *cache_, pools_.get(), auth_.get());
    ASSERT_TRUE(server_->Start().ok());
    for (const char* p : {"vision", "audio"}) {
      model::Project project;
      project.metadata.name = p;
      ASSERT_TRUE(pools_->CreateProject(project, "ops").ok());
    }
    op_ = auth_->Create("ops", Role::kOperator, "", "test")->first;
    member_ = auth_->Create("alice", Role::kMember, "audio", "test")->first;
    ASSERT_TRUE(cache_->WaitFor(store_->Revision(), std::chrono::seconds(10)));
  }
  void TearDown() override {
    server_->Stop();
    cp_->Stop();
    cache_->Stop();
    std::filesystem::remove_all(dir_);
  }
  void Request(const std::string& ns, const std::string& name, bool approve) {
    model::GpuPool p;
    p.metadata.ns = ns;
    p.metadata.name = name;
    p.spec.items = {{"H200-SXM-141GB", "full", 1}};
    ASSERT_TRUE(pools_->CreatePool(p, "alice").ok());
    if (approve) {
      ASSERT_TRUE(pools_->Approve(ns, name, true, "ok", "ops").ok());
    }
  }
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::ObjectCache> cache_;
  std::vector<std::unique_ptr<cluster::ClusterDriver>> drivers_;
  telemetry::Hub hub_;
  std::unique_ptr<controller::ControlPlane> cp_;
  std::unique_ptr<service::PoolService> pools_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<ApiServer> server_;
  std::string op_, member_;
};

TEST_F(WatchTest, APoolIsSeenAddedApprovedAndReadyInRevisionOrder) {
  Watcher w(server_->port(), std::string(kPools) + "?watch=1&allowWatchBookmarks=true", op_, /*with_bookmarks=*/true);
  ASSERT_TRUE(w.WaitFor([](const auto& ev) { return !ev.empty() && ev.back()["type"] == "BOOKMARK"; }));
  Request("vision", "train", true);
  ASSERT_TRUE(w.WaitFor([](const auto& ev) {
    for (const json& e : ev) {
      if (e["type"] == "MODIFIED" && Cond(e["object"], "Ready") == "True") return true;
    }
    return false;
  })) << json(w.events()).dump();
  std::vector<json> ev = w.events();
  ASSERT_EQ(ev[0]["type"], "BOOKMARK");  // the start: nothing existed yet
  int64_t last = 0;
  bool added = false, approved = false;
  for (size_t i = 1; i < ev.size(); ++i) {
    if (ev[i]["type"] == "BOOKMARK") continue;
    const int64_t rv = std::stoll(ev[i]["object"]["metadata"]["resourceVersion"].get<std::string>());
    EXPECT_GT(rv, last) << "events out of revision order";
    last = rv;
    added |= ev[i]["type"] == "ADDED";
    approved |= ev[i]["type"] == "MODIFIED" && Cond(ev[i]["object"], "Approved") == "True";
  }
  // The first event after the opening bookmark (more bookmarks may come first on a slow machine).
  auto first = std::find_if(ev.begin() + 1, ev.end(), [](const json& e) { return e["type"] != "BOOKMARK"; });
  ASSERT_NE(first, ev.end());
  EXPECT_EQ((*first)["type"], "ADDED");
  EXPECT_TRUE(added && approved);
  // Bookmarks keep coming while nothing happens.
  const size_t n = ev.size();
  ASSERT_TRUE(w.WaitFor([n](const auto& e) { return e.size() > n && e.back()["type"] == "BOOKMARK"; }));
}

TEST_F(WatchTest, AResumedWatchReplaysWhatItMissedAndAMemberSeesOnlyItsProject) {
  Request("vision", "one", false);
  ASSERT_TRUE(cache_->WaitFor(store_->Revision(), std::chrono::seconds(10)));
  const int64_t rv = store_->Revision();
  Request("vision", "two", false);
  Request("audio", "mine", false);
  // From rv on: "two" and "mine", not "one".
  Watcher all(server_->port(), "/apis/gpuaas.io/v1/gpupools?watch=1&resourceVersion=" + std::to_string(rv), op_);
  ASSERT_TRUE(all.WaitFor([](const auto& ev) { return ev.size() >= 2; }));
  EXPECT_EQ(all.events()[0]["object"]["metadata"]["name"], "two");
  EXPECT_EQ(all.events()[1]["object"]["metadata"]["name"], "mine");
  // A member watching every project's pools gets its own project's only, now and later.
  Watcher member(server_->port(), "/apis/gpuaas.io/v1/gpupools?watch=1", member_);
  ASSERT_TRUE(member.WaitFor([](const auto& ev) { return !ev.empty(); }));
  Request("vision", "three", false);
  Request("audio", "later", false);
  ASSERT_TRUE(member.WaitFor([](const auto& ev) { return ev.size() >= 2; }));
  ASSERT_TRUE(all.WaitFor([](const auto& ev) { return ev.size() >= 4; }));  // both reached the end
  for (const json& e : member.events()) EXPECT_EQ(e["object"]["metadata"]["namespace"], "audio") << e.dump();
  // Another project's namespace looks absent, as for a list.
  httplib::Client c("127.0.0.1", server_->port());
  auto r = c.Get(std::string(kPools) + "?watch=1", {{"Authorization", "Bearer " + member_}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

TEST_F(WatchTest, ACompactedResourceVersionGets410Expired) {
  const int64_t old = store_->Revision();
  // Each request is a revision; the feed keeps 500 and is trimmed at every 1,000th.
  for (int i = 0; store_->Revision() < 1000; ++i) Request("vision", "p" + std::to_string(i), false);
  ASSERT_LT(old, 500);
  httplib::Client c("127.0.0.1", server_->port());
  auto r = c.Get("/apis/gpuaas.io/v1/gpupools?watch=1&resourceVersion=" + std::to_string(old),
                 {{"Authorization", "Bearer " + op_}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 410) << r->body;
  json s = json::parse(r->body);
  EXPECT_EQ(s["kind"], "Status");
  EXPECT_EQ(s["reason"], "Expired");
  EXPECT_EQ(s["code"], 410);
  r = c.Get("/apis/gpuaas.io/v1/gpupools?watch=yes", {{"Authorization", "Bearer " + op_}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

int Threads() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST_F(WatchTest, AThousandIdleWatchersAddNoThreadAndEndWhenTheServerStops) {
  constexpr int kWatchers = 1000;
  const int before = Threads();
  std::vector<int> fds;
  const std::string req = "GET /apis/gpuaas.io/v1/gpupools?watch=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + op_ +
                          "\r\n\r\n";
  for (int i = 0; i < kWatchers; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server_->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    fds.push_back(fd);
  }
  // Every watch is open (its head was sent) before the threads are counted.
  for (int fd : fds) {
    char buf[256];
    ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);
  }
  EXPECT_EQ(Threads(), before);
  Request("vision", "seen-by-all", false);
  // The server stops: every watch ends (the connection closes) rather than hanging.
  server_->Stop();
  int ended = 0;
  for (int fd : fds) {
    timeval tv{30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t got;
    while ((got = recv(fd, buf, sizeof buf, 0)) > 0) {
    }
    ended += got == 0 ? 1 : 0;
    close(fd);
  }
  EXPECT_EQ(ended, kWatchers);
}

}  // namespace
}  // namespace gpuaas::api
