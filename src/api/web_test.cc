// The dashboard's files as the server serves them, and the fleet routes it reads.
#include <httplib.h>

#include <filesystem>
#include <fstream>

#include "api/internal/web.h"
#include "api/server.h"
#include "cluster/simulated/fleet.h"
#include "common/clock.h"
#include "fmt/format.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "store/sqlite_store.h"

namespace gpuaas::api {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class WebTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("gpuaas-web-test-" + std::to_string(::getpid())));
    fs::create_directories(*dir_ / "assets");
    std::ofstream(*dir_ / "index.html") << "<!doctype html><title>t</title>";
    std::ofstream(*dir_ / "assets" / "app-ABC123.js") << "console.log(1)";
    std::ofstream(*dir_ / "assets" / "app-ABC123.css") << "body{}";
    std::ofstream big(*dir_ / "assets" / "app-BIG.js");
    for (int i = 0; i < 2000; ++i) big << "export const value" << i << " = " << i << ";\n";
    store_ = std::move(*store::OpenStore("sqlite::memory:")).release();
    auto drivers = cluster::simulated::MakeDrivers(cluster::simulated::DemoFleet());
    ASSERT_TRUE(controller::ObserveOnce(*store_, {drivers[0].get(), drivers[1].get()}, RealClock::Get()).ok());
    cache_ = new store::ObjectCache(*store_);
    std::vector<std::string> kinds;
    for (const ResourceType& t : ResourceTypes()) kinds.push_back(t.kind);
    ASSERT_TRUE(cache_->Start(kinds).ok());
    ServerOptions o;
    o.port = 0;
    o.web_root = dir_->string();
    server_ = new ApiServer(o, *cache_);
    ASSERT_TRUE(server_->Start().ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete cache_;
    delete store_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  httplib::Result Get(const std::string& path) {
    httplib::Client c("127.0.0.1", server_->port());
    return c.Get(path);
  }
  json GetJson(const std::string& path, int want = 200) {
    httplib::Result r = Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, want) << path << ": " << r->body;
    return json::parse(r->body);
  }

  static fs::path* dir_;
  static store::Store* store_;
  static store::ObjectCache* cache_;
  static ApiServer* server_;
};

fs::path* WebTest::dir_ = nullptr;
store::Store* WebTest::store_ = nullptr;
store::ObjectCache* WebTest::cache_ = nullptr;
ApiServer* WebTest::server_ = nullptr;

TEST_F(WebTest, EveryPageAnswersTheAppWithItsSecurityHeaders) {
  for (const char* path : {"/", "/fleet", "/fleet/gpus/GPU-0000", "/pools", "/monitoring", "/billing"}) {
    httplib::Result r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->body, "<!doctype html><title>t</title>");
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
    EXPECT_EQ(r->get_header_value("Content-Security-Policy"), internal::kDashboardCsp);
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
  }
  httplib::Result js = Get("/assets/app-ABC123.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js->get_header_value("Cache-Control"), "public, max-age=31536000, immutable");
  EXPECT_EQ(Get("/assets/app-ABC123.css")->get_header_value("Content-Type"), "text/css; charset=utf-8");
  EXPECT_EQ(Get("/assets/nope.js")->status, 404);
  EXPECT_EQ(Get("/assets/..%2findex.html")->status, 404);
  EXPECT_EQ(Get("/fleet/nothing")->status, 404);
}

TEST_F(WebTest, TextIsGzippedForClientsThatAcceptIt) {
  httplib::Client c("127.0.0.1", server_->port());
  c.set_decompress(false);
  httplib::Result plain = c.Get("/assets/app-BIG.js", {{"Accept-Encoding", "identity"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->get_header_value("Content-Encoding"), "");
  EXPECT_EQ(plain->get_header_value("Vary"), "Accept-Encoding");
  httplib::Result zipped = c.Get("/assets/app-BIG.js", {{"Accept-Encoding", "br, gzip;q=0.8"}});
  ASSERT_TRUE(zipped);
  EXPECT_EQ(zipped->get_header_value("Content-Encoding"), "gzip");
  ASSERT_GT(zipped->body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(zipped->body[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(zipped->body[1]), 0x8b);
  EXPECT_LT(zipped->body.size() * 4, plain->body.size());
  // A file that gzip would not make smaller goes out as it is.
  EXPECT_EQ(c.Get("/assets/app-ABC123.js", {{"Accept-Encoding", "gzip"}})->get_header_value("Content-Encoding"), "");
  EXPECT_EQ(c.Get("/assets/app-BIG.js", {{"Accept-Encoding", "gzip;q=0"}})->get_header_value("Content-Encoding"), "");
  // What a browser gets after decompressing is the file.
  httplib::Client inflating("127.0.0.1", server_->port());
  httplib::Result back = inflating.Get("/assets/app-BIG.js", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(back);
  EXPECT_EQ(back->body, plain->body);
}

TEST(AcceptEncoding, GzipIsAcceptedUnlessRefused) {
  EXPECT_TRUE(internal::AcceptsGzip("gzip"));
  EXPECT_TRUE(internal::AcceptsGzip("gzip, deflate, br, zstd"));
  EXPECT_TRUE(internal::AcceptsGzip("br;q=1.0, gzip;q=0.5"));
  EXPECT_TRUE(internal::AcceptsGzip("*"));
  EXPECT_FALSE(internal::AcceptsGzip(""));
  EXPECT_FALSE(internal::AcceptsGzip("identity"));
  EXPECT_FALSE(internal::AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(internal::AcceptsGzip("gzip;q=0.000, br"));
  EXPECT_FALSE(internal::AcceptsGzip("x-gzip"));
}

TEST_F(WebTest, AServerWithoutTheDashboardSaysHowToGetIt) {
  ServerOptions o;
  o.port = 0;
  ApiServer bare(o, *cache_);
  ASSERT_TRUE(bare.Start().ok());
  httplib::Client c("127.0.0.1", bare.port());
  httplib::Result r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("--web"), std::string::npos) << r->body;
  ServerOptions missing;
  missing.port = 0;
  missing.web_root = (*dir_ / "nowhere").string();
  ApiServer broken(missing, *cache_);
  absl::Status s = broken.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("index.html"), std::string_view::npos) << s;
}

TEST_F(WebTest, AssetNamesOutsideThePlainSetAreRefused) {
  const fs::path odd = *dir_ / "odd";
  fs::create_directories(odd / "assets");
  std::ofstream(odd / "index.html") << "x";
  std::ofstream(odd / "assets" / "a b.js") << "x";
  EXPECT_FALSE(internal::WebAssets::Load(odd.string()).ok());
  EXPECT_EQ(internal::ContentTypeOf("x.woff2"), "font/woff2");
  EXPECT_EQ(internal::ContentTypeOf("x.bin"), "application/octet-stream");
}

TEST_F(WebTest, FleetRowsAreFilteredSortedAndPagedOnTheServer) {
  json all = GetJson("/api/v1/fleet/gpus?limit=1000");
  ASSERT_EQ(all["total"], 144);
  ASSERT_EQ(all["items"].size(), 144u);
  // Default order: cluster, node, index.
  for (size_t i = 1; i < all["items"].size(); ++i) {
    const json& a = all["items"][i - 1];
    const json& b = all["items"][i];
    EXPECT_LE(std::tie(a["cluster"].get_ref<const std::string&>(), a["node"].get_ref<const std::string&>()),
              std::tie(b["cluster"].get_ref<const std::string&>(), b["node"].get_ref<const std::string&>()));
  }
  json page = GetJson("/api/v1/fleet/gpus?offset=140&limit=10");
  EXPECT_EQ(page["total"], 144);
  ASSERT_EQ(page["items"].size(), 4u);
  EXPECT_EQ(page["items"][0]["uuid"], all["items"][140]["uuid"]);

  json h200 = GetJson("/api/v1/fleet/gpus?model=H200-SXM-141GB&mig=enabled&limit=100");
  ASSERT_GT(h200["total"].get<int>(), 0);
  for (const json& g : h200["items"]) {
    EXPECT_EQ(g["model"], "H200-SXM-141GB");
    EXPECT_EQ(g["migMode"], "Enabled");
    int slices = 0;
    for (const json& m : g["migInstances"]) slices += m["size"].get<int>();
    EXPECT_LE(slices, 8);
    EXPECT_EQ(g["devices"].get<size_t>(), g["migInstances"].size());
    // Every layout of the demo's H200s is maximal ("4g.71gb@0 2g.35gb@4 1g.18gb@6" leaves slice 7
    // free but stranded): the catalogue finds nothing open and nothing that fits.
    const json& room = g["migRoom"];
    ASSERT_TRUE(room.is_object()) << g["uuid"];
    EXPECT_EQ(room["memorySlices"], 8);
    EXPECT_EQ(room["openSlots"], json::array()) << g["uuid"];
    EXPECT_EQ(room["fits"], json::array()) << g["uuid"];
  }
  json whole = GetJson("/api/v1/fleet/gpus?mig=disabled&limit=1");
  ASSERT_EQ(whole["items"].size(), 1u);
  EXPECT_TRUE(whole["items"][0]["migRoom"].is_null());
  const std::string uuid = all["items"][7]["uuid"];
  json one = GetJson("/api/v1/fleet/gpus?q=" + uuid.substr(4, 13));
  ASSERT_EQ(one["total"], 1);
  EXPECT_EQ(one["items"][0]["uuid"], uuid);

  json by_model = GetJson("/api/v1/fleet/gpus?sort=model&order=desc&limit=1000");
  EXPECT_EQ(by_model["items"][0]["model"], "H200-SXM-141GB");
  EXPECT_EQ(by_model["items"][143]["model"], "A100-80GB");

  // A page is the same rows as the whole list has there, for every key and both orders (a page
  // is sorted only as far as it reaches), and every key orders the fleet totally (ties by place).
  for (const char* key : {"cluster", "node", "uuid", "model", "health", "mig", "allocated", "power", "sm", "temp",
                          "memory"}) {
    for (const char* order : {"asc", "desc"}) {
      const std::string q = fmt::format("/api/v1/fleet/gpus?sort={}&order={}", key, order);
      json full = GetJson(q + "&limit=1000");
      ASSERT_EQ(full["items"].size(), 144u) << q;
      for (size_t offset : {0u, 7u, 139u}) {
        json part = GetJson(fmt::format("{}&offset={}&limit=5", q, offset));
        ASSERT_EQ(part["items"].size(), std::min<size_t>(5, 144 - offset)) << q;
        for (size_t i = 0; i < part["items"].size(); ++i) {
          EXPECT_EQ(part["items"][i]["uuid"], full["items"][offset + i]["uuid"]) << q << " offset " << offset;
        }
      }
    }
  }
  json by_node = GetJson("/api/v1/fleet/gpus?sort=node&limit=1000");
  for (size_t i = 1; i < by_node["items"].size(); ++i) {
    const json& a = by_node["items"][i - 1];
    const json& b = by_node["items"][i];
    EXPECT_LE(std::make_pair(a["node"].get<std::string>(), a["index"].get<int64_t>()),
              std::make_pair(b["node"].get<std::string>(), b["index"].get<int64_t>()));
  }

  json cells = GetJson("/api/v1/fleet/gpus?view=cells&cluster=beta");
  const int beta = cells["total"];
  EXPECT_GT(beta, 0);
  EXPECT_LT(beta, 144);
  EXPECT_EQ(cells["uuid"].size(), static_cast<size_t>(beta));
  EXPECT_EQ(cells["health"].size(), static_cast<size_t>(beta));
  EXPECT_EQ(cells["allocated"].size(), static_cast<size_t>(beta));

  for (const char* bad : {"sort=bogus", "order=up", "limit=0", "limit=20001", "offset=-1", "health=Sick", "mig=yes",
                          "view=grid"}) {
    httplib::Result r = Get(std::string("/api/v1/fleet/gpus?") + bad);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json") << bad;
  }
}

TEST_F(WebTest, TheCatalogueGivesEachProfilesPlacements) {
  json cat = GetJson("/api/v1/catalog");
  bool found = false;
  for (const json& m : cat["models"]) {
    if (m["name"] != "H200-SXM-141GB") continue;
    EXPECT_EQ(m["memorySlices"], 8);
    EXPECT_EQ(m["computeSlices"], 7);
    for (const json& p : m["profiles"]) {
      if (p["name"] != "3g.71gb") continue;
      found = true;
      EXPECT_EQ(p["starts"], json::array({0, 4}));
      EXPECT_EQ(p["memorySlices"], 4);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(WebTest, SummaryCountsAvailableDevicesAndClusters) {
  json s = GetJson("/api/v1/summary");
  int by_cluster = 0;
  for (const json& c : s["physical"]["byCluster"]) by_cluster += c["gpus"].get<int>();
  EXPECT_EQ(by_cluster, 144);
  for (const json& d : s["logical"]["byProfile"]) EXPECT_LE(d["available"].get<int>(), d["free"].get<int>());
  EXPECT_EQ(s["logical"]["available"], s["logical"]["free"]);  // no GPU is unhealthy here
}

}  // namespace
}  // namespace gpuaas::api
