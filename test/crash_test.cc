// The server is killed (SIGKILL) at random moments while clients request, approve and release
// pools and submit workloads, and started again on the same database after each kill. Then:
// no device is in two live pools, no acknowledged approval or release is lost, and every pool
// converges (Ready, waiting with a reason, rejected or released).
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "common/clock.h"
#include "process.h"

namespace gpuaas::testing {
namespace {

using nlohmann::json;
constexpr char kPools[] = "/apis/gpuaas.io/v1/namespaces/crash/gpupools";

std::string Cond(const json& obj, const std::string& type) {
  for (const json& c : obj["status"].value("conditions", json::array())) {
    if (c["type"] == type) return c["status"];
  }
  return "-";
}

TEST(Crash, KilledAtRandomMomentsTheServerLosesNothingAndConverges) {
  char tmpl[] = "/tmp/gpuaas-crash-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/fleet.yaml") << R"(clusters:
  - name: lab
    nodePools:
      - {name: h200, count: 2, model: H200-SXM-141GB, migNodes: 1, migLayouts: ["3g.71gb@0 3g.71gb@4"]}
      - {name: h100, count: 2, model: H100-SXM5-80GB}
)";
  const std::string args = "--insecure-no-auth --fleet " + dir + "/fleet.yaml --db sqlite:" + dir + "/g.db";
  std::mt19937 rng(20261203);
  std::set<std::string> approved, released;  // acknowledged by the server before a kill
  int created = 0;
  for (int round = 0; round < 20; ++round) {
    ServerProcess server;
    ASSERT_TRUE(server.Start(args, dir + "/server.log")) << server.Log();
    httplib::Client c(server.Url());
    c.set_read_timeout(10);
    if (round == 0) {
      auto r = c.Post("/apis/gpuaas.io/v1/projects",
                      R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"crash"}})", "application/json");
      ASSERT_TRUE(r && r->status == 201);
    }
    // A burst of requests on a thread of its own; the kill comes at a random moment within it.
    std::atomic<bool> stop{false};
    std::thread burst([&] {
      httplib::Client b(server.Url());
      b.set_read_timeout(10);
      std::mt19937 brng(static_cast<unsigned>(round));
      while (!stop) {
        const std::string name = "p" + std::to_string(created);
        const char* item = brng() % 2 ? R"({"model":"H100-SXM5-80GB","profile":"full","count":1})"
                                      : R"({"model":"H200-SXM-141GB","profile":"3g.71gb","count":1})";
        auto r = b.Post(kPools,
                        std::string(R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":")") + name +
                            R"("},"spec":{"items":[)" + item + "]}}",
                        "application/json");
        if (r && r->status == 409) {  // created before the last kill, its answer lost
          ++created;
          continue;
        }
        if (!r || r->status != 201) break;
        ++created;
        r = b.Put(std::string(kPools) + "/" + name + "/approval", R"({"approve":true,"reason":"crash test"})",
                  "application/json");
        if (!r) break;
        if (r->status == 200) approved.insert(name);
        r = b.Post("/apis/gpuaas.io/v1/namespaces/crash/workloads",
                   R"({"apiVersion":"gpuaas.io/v1","kind":"Workload","metadata":{"name":"w-)" + name +
                       R"("},"spec":{"pool":")" + name + R"(","resources":{")" +
                       (std::string(item).find("full") != std::string::npos ? "nvidia.com/gpu"
                                                                             : "nvidia.com/mig-3g.71gb") +
                       R"(":1}}})",
                   "application/json");
        if (!r) break;
        if (created > 3 && brng() % 3 == 0) {
          const std::string old = "p" + std::to_string(brng() % (created - 1));
          r = b.Post(std::string(kPools) + "/" + old + "/release", "", "application/json");
          if (!r) break;
          if (r->status == 200) released.insert(old);
        }
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 400));  // the random moment
    EXPECT_EQ(server.Stop(SIGKILL), -SIGKILL);
    stop = true;
    burst.join();
  }
  ASSERT_GT(approved.size(), 20u) << "the bursts did too little to test anything";

  // A last start; everything settles.
  ServerProcess server;
  ASSERT_TRUE(server.Start(args, dir + "/server.log")) << server.Log();
  httplib::Client c(server.Url());
  json pools;
  auto settled = [&] {
    auto r = c.Get(kPools);
    if (!r || r->status != 200) return false;
    pools = json::parse(r->body);
    for (const json& p : pools["items"]) {
      const bool approved_true = Cond(p, "Approved") == "True";
      const std::string release = Cond(p, "Released");
      if (release == "False") return false;  // a release under way
      if (p["spec"].contains("releaseRequested") && release != "True") return false;  // not yet seen
      const bool done = !approved_true || release == "True" || Cond(p, "Ready") == "True" ||
                        Cond(p, "Allocated") == "False";
      if (!done) return false;
    }
    return true;
  };
  bool ok = false;
  for (int i = 0; i < 600 && !(ok = settled()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(ok) << pools.dump(1);

  std::map<std::string, json> by_name;
  for (const json& p : pools["items"]) by_name[p["metadata"]["name"]] = p;
  for (const std::string& name : approved) {
    ASSERT_TRUE(by_name.count(name)) << name << " was approved, and is gone";
    EXPECT_EQ(Cond(by_name[name], "Approved"), "True") << name;
  }
  for (const std::string& name : released) {
    EXPECT_EQ(Cond(by_name[name], "Released"), "True") << name << " was released: " << by_name[name].dump();
  }
  std::set<std::string> devices;
  for (const json& p : pools["items"]) {
    if (Cond(p, "Released") == "True") continue;
    for (const json& d : p["status"].value("allocation", json::array())) {
      const std::string key = d["gpuUUID"].get<std::string>() + "@" +
                              (d.contains("placement") ? std::to_string(d["placement"]["start"].get<int>()) : "full");
      EXPECT_TRUE(devices.insert(key).second) << "device in two live pools: " << key;
    }
  }

  // The billing ledger: one meter per approved pool (its own, by uid), opened from the approval and
  // closed at the release request (spec.releaseRequested), none for any other pool; the invoice bills each closed meter's
  // devices exactly, each from its allocation (spec.held) to the release request.
  auto meters_r = c.Get("/apis/gpuaas.io/v1/namespaces/crash/usagerecords");
  ASSERT_TRUE(meters_r && meters_r->status == 200);
  const json meters = json::parse(meters_r->body);
  std::map<std::string, json> meter_of;
  for (const json& m : meters["items"]) {
    EXPECT_TRUE(meter_of.emplace(m["spec"]["pool"].get<std::string>(), m).second) << "two meters: " << m.dump();
  }
  size_t approved_pools = 0;
  for (const json& p : pools["items"]) {
    const std::string name = p["metadata"]["name"];
    if (Cond(p, "Approved") != "True") {
      EXPECT_FALSE(meter_of.count(name)) << name << " is not approved, and is billed";
      continue;
    }
    ++approved_pools;
    ASSERT_TRUE(meter_of.count(name)) << name << " is approved, and not billed (a gap)";
    const json& m = meter_of[name];
    EXPECT_EQ(m["spec"]["poolUID"], p["metadata"]["uid"]) << name;
    EXPECT_EQ(m["spec"]["start"], p["status"]["approval"]["time"]) << name;
    const bool release_asked = p["spec"].contains("releaseRequested");
    EXPECT_EQ(m["spec"].contains("end"), release_asked) << name << ": " << m.dump();
  }
  EXPECT_EQ(meter_of.size(), approved_pools);
  auto inv_r = c.Get("/api/v1/projects/crash/invoices");
  ASSERT_TRUE(inv_r && inv_r->status == 200) << (inv_r ? inv_r->body : "");
  std::map<std::string, int64_t> billed;  // pool -> device-seconds billed
  const json invoices = json::parse(inv_r->body);  // held: a temporary's member would dangle in the loop
  for (const json& inv : invoices["items"]) {
    for (const json& l : inv["lines"]) billed[l["pool"]] += l["seconds"].get<int64_t>() * l["quantity"].get<int64_t>();
  }
  for (const auto& [name, m] : meter_of) {
    if (!m["spec"].contains("end")) continue;
    const auto start = ParseTime(m["spec"]["start"].get<std::string>()), end = ParseTime(m["spec"]["end"].get<std::string>());
    ASSERT_TRUE(start && end);
    ASSERT_TRUE(m["spec"].contains("held")) << m.dump();
    int64_t expected = 0;
    for (const json& h : m["spec"]["held"]) {
      const auto since = ParseTime(h["since"].get<std::string>());
      ASSERT_TRUE(since);
      expected += h["count"].get<int64_t>() *
                  std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(*end - std::max(*start, *since)).count());
    }
    EXPECT_EQ(billed[name], expected) << name << ": " << m.dump();
  }
  EXPECT_EQ(server.Stop(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
