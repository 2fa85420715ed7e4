// 50 clients request and approve pools at once against one server while the controllers run:
// no device is allocated twice, and every approved pool ends Ready or says why not.
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "api/server.h"
#include "cluster/simulated/fleet.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/pools.h"
#include "store/sqlite_store.h"

namespace gpuaas {
namespace {

using nlohmann::json;

TEST(PoolConcurrency, FiftyClientsNeverShareADevice) {
  char tmpl[] = "/tmp/gpuaas-conc-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto db = std::move(*store::OpenStore("sqlite:" + dir + "/c.db"));
  std::vector<std::unique_ptr<cluster::ClusterDriver>> drivers =
      cluster::simulated::MakeDrivers(cluster::simulated::DemoFleet());
  std::map<std::string, cluster::ClusterDriver*> by_cluster;
  for (auto& d : drivers) by_cluster[std::string(d->ClusterName())] = d.get();
  store::ObjectCache cache(*db);
  std::vector<std::string> kinds;
  for (const api::ResourceType& t : api::ResourceTypes()) kinds.push_back(t.kind);
  ASSERT_TRUE(cache.Start(kinds).ok());
  telemetry::Hub hub;
  controller::ControlPlane cp(*db, cache, RealClock::Get(), by_cluster, hub);
  cp.Start();  // the controllers run on their own threads while the clients work
  ASSERT_TRUE(cp.inventory().WaitObserved(std::chrono::seconds(60)));
  ASSERT_TRUE(cache.WaitFor(db->Revision(), std::chrono::seconds(30)));
  service::PoolService pools(*db, RealClock::Get(), [] {
    return std::map<std::string, int64_t>{{"H200-SXM-141GB", 48}, {"H100-SXM5-80GB", 64}, {"A100-80GB", 32}};
  });
  api::ServerOptions o;
  o.port = 0;
  api::ApiServer server(o, cache, &pools);
  ASSERT_TRUE(server.Start().ok());

  constexpr int kClients = 50;
  const char* profiles[][2] = {{"H200-SXM-141GB", "1g.18gb"}, {"H200-SXM-141GB", "3g.71gb"},
                               {"H200-SXM-141GB", "full"},    {"H100-SXM5-80GB", "full"},
                               {"H100-SXM5-80GB", "2g.20gb"}, {"A100-80GB", "3g.40gb"},
                               {"A100-80GB", "1g.10gb"}};
  std::atomic<int> created{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      std::mt19937 rng(i);
      httplib::Client c("127.0.0.1", server.port());
      c.set_read_timeout(60);  // the machine may be slow (sanitizers, a loaded CI host)
      const std::string project = "team-" + std::to_string(i);
      auto r = c.Post("/apis/gpuaas.io/v1/projects",
                      json{{"apiVersion", "gpuaas.io/v1"}, {"kind", "Project"}, {"metadata", {{"name", project}}}}.dump(),
                      "application/json");
      ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
      json items = json::array();
      const auto& p = profiles[rng() % 7];
      items.push_back({{"model", p[0]}, {"profile", p[1]}, {"count", 1 + rng() % 4}});
      const std::string base = "/apis/gpuaas.io/v1/namespaces/" + project + "/gpupools";
      r = c.Post(base, json{{"apiVersion", "gpuaas.io/v1"}, {"kind", "GpuPool"},
                            {"metadata", {{"name", "pool"}}}, {"spec", {{"items", items}}}}.dump(),
                 "application/json");
      ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
      r = c.Put(base + "/pool/approval", R"({"approve":true,"reason":"load test"})", "application/json");
      ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
      ++created;
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_EQ(created.load(), kClients);

  // Wait until every pool is Ready or says why it is not.
  json list;
  for (int i = 0; i < 900; ++i) {  // up to 90 s on a slow machine; usually a few seconds
    httplib::Client c("127.0.0.1", server.port());
    list = json::parse(c.Get("/apis/gpuaas.io/v1/gpupools")->body);
    int settled = 0;
    for (const json& p : list["items"]) {
      for (const json& cond : p["status"].value("conditions", json::array())) {
        if ((cond["type"] == "Ready" && cond["status"] == "True") ||
            (cond["type"] == "Allocated" && cond["status"] == "False" && !cond.value("message", "").empty())) {
          ++settled;
          break;
        }
      }
    }
    if (settled == kClients) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  cp.Stop();
  server.Stop();
  cache.Stop();

  ASSERT_EQ(list["items"].size(), static_cast<size_t>(kClients));
  std::set<std::string> devices;
  int ready = 0, waiting = 0;
  for (const json& p : list["items"]) {
    bool is_ready = false, explained = false;
    for (const json& cond : p["status"].value("conditions", json::array())) {
      is_ready |= cond["type"] == "Ready" && cond["status"] == "True";
      explained |= cond["type"] == "Allocated" && cond["status"] == "False" && !cond.value("message", "").empty();
    }
    EXPECT_TRUE(is_ready || explained) << p.dump();
    ready += is_ready;
    waiting += explained && !is_ready;
    for (const json& d : p["status"].value("allocation", json::array())) {
      const std::string key = d["gpuUUID"].get<std::string>() + "@" +
                              (d.contains("placement") ? std::to_string(d["placement"]["start"].get<int>()) : "full");
      EXPECT_TRUE(devices.insert(key).second) << "device allocated twice: " << key;
    }
  }
  EXPECT_GT(ready, kClients / 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas
