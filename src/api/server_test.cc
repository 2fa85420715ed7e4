#include "api/server.h"

#include <httplib.h>

#include <algorithm>

#include <set>
#include <tuple>

#include "api/problem.h"
#include "cluster/simulated/fleet.h"
#include "common/status.h"
#include "common/strings.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "model/codec.h"
#include "nlohmann/json.hpp"
#include "store/sqlite_store.h"

namespace gpuaas::api {
namespace {

using nlohmann::json;

class ApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    store_ = std::move(*store::OpenStore("sqlite::memory:")).release();
    auto drivers = cluster::simulated::MakeDrivers(cluster::simulated::DemoFleet());
    ASSERT_TRUE(controller::ObserveOnce(*store_, {drivers[0].get(), drivers[1].get()}, RealClock::Get()).ok());
    cache_ = new store::ObjectCache(*store_);
    std::vector<std::string> kinds;
    for (const ResourceType& t : ResourceTypes()) kinds.push_back(t.kind);
    ASSERT_TRUE(cache_->Start(kinds).ok());
    ServerOptions o;
    o.port = 0;
    o.threads = 8;
    o.max_body_bytes = 4096;
    o.version = "v-test";
    server_ = new ApiServer(o, *cache_);
    ASSERT_TRUE(server_->Start().ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete cache_;
    delete store_;
  }

  httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_keep_alive(true);
    return c;
  }
  json GetJson(const std::string& path, int want = 200) {
    httplib::Client c = Client();
    httplib::Result r = c.Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, want) << path << ": " << r->body;
    return json::parse(r->body);
  }
  void ExpectProblem(httplib::Result& r, int status, std::string_view reason) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json");
    json p = json::parse(r->body);
    EXPECT_EQ(p["status"], status);
    EXPECT_EQ(p["reason"], reason) << r->body;
    EXPECT_FALSE(p["detail"].get<std::string>().empty());
    EXPECT_FALSE(p["title"].get<std::string>().empty());
  }

  static store::Store* store_;
  static store::ObjectCache* cache_;
  static ApiServer* server_;
};

store::Store* ApiTest::store_ = nullptr;
store::ObjectCache* ApiTest::cache_ = nullptr;
ApiServer* ApiTest::server_ = nullptr;

TEST_F(ApiTest, HealthReadinessAndVersion) {
  httplib::Client c = Client();
  server_->SetReady(false);
  auto not_ready = c.Get("/readyz");
  ExpectProblem(not_ready, 503, "NotReady");
  server_->SetReady(true);
  EXPECT_EQ(c.Get("/readyz")->status, 200);
  EXPECT_EQ(c.Get("/healthz")->body, "ok");
  EXPECT_EQ(GetJson("/version")["gitVersion"], "v-test");
  json disc = GetJson("/apis/gpuaas.io/v1");
  EXPECT_EQ(disc["kind"], "APIResourceList");
  EXPECT_EQ(disc["resources"].size(), ResourceTypes().size());
}

// What kubectl reads: discovery of the group, and Tables when its Accept header asks for them.
TEST_F(ApiTest, KubectlDiscoveryAndTables) {
  json api = GetJson("/api");
  EXPECT_EQ(api["kind"], "APIVersions");
  EXPECT_TRUE(api["versions"].empty()) << "no core group: kubectl must not look for pods here";
  json groups = GetJson("/apis");
  EXPECT_EQ(groups["kind"], "APIGroupList");
  ASSERT_EQ(groups["groups"].size(), 1u);
  EXPECT_EQ(groups["groups"][0]["preferredVersion"]["groupVersion"], "gpuaas.io/v1");
  EXPECT_EQ(GetJson("/apis/gpuaas.io")["kind"], "APIGroup");
  json disc = GetJson("/apis/gpuaas.io/v1");
  for (const json& r : disc["resources"]) {
    EXPECT_NE(std::find(r["verbs"].begin(), r["verbs"].end(), "watch"), r["verbs"].end()) << r.dump();
    EXPECT_EQ(r["categories"], json({"gpuaas"}));
    if (r["name"] == "gpupools") {
      EXPECT_EQ(r["shortNames"], json({"gp", "pool"}));
    }
  }

  const httplib::Headers kubectl = {
      {"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                 "application/json"}};
  httplib::Client c = Client();
  auto r = c.Get("/apis/gpuaas.io/v1/nodecapacities?limit=5", kubectl);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json t = json::parse(r->body);
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["apiVersion"], "meta.k8s.io/v1");
  std::vector<std::string> names;
  for (const json& d : t["columnDefinitions"]) names.push_back(d["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"NAME", "CLUSTER", "MODEL", "GPUS", "MIG", "CPU", "MEMORY", "SCHEDULABLE", "AGE"}));
  ASSERT_EQ(t["rows"].size(), 5u);
  EXPECT_EQ(t["rows"][0]["cells"].size(), names.size());
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(t["rows"][0]["cells"][0], t["rows"][0]["object"]["metadata"]["name"]);
  EXPECT_FALSE(t["metadata"]["continue"].get<std::string>().empty()) << "paging goes on as for lists";

  r = c.Get("/apis/gpuaas.io/v1/clusters/alpha?includeObject=Object", kubectl);
  ASSERT_TRUE(r);
  t = json::parse(r->body);
  ASSERT_EQ(t["rows"].size(), 1u);
  EXPECT_EQ(t["rows"][0]["cells"][0], "alpha");
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "Cluster") << "the whole object, as asked";
  // Errors reach kubectl as Kubernetes Status objects, which it prints; others get problem+json.
  r = c.Get("/apis/gpuaas.io/v1/clusters?includeObject=Everything", kubectl);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  json status = json::parse(r->body);
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["code"], 400);
  EXPECT_NE(status["message"].get<std::string>().find("includeObject"), std::string::npos) << r->body;
  r = c.Get("/apis/gpuaas.io/v1/clusters/nowhere", kubectl);
  EXPECT_EQ(json::parse(r->body)["reason"], "NotFound");
  r = c.Get("/apis/gpuaas.io/v1/clusters/nowhere");
  ExpectProblem(r, 404, "NotFound");
  // Without kubectl's Accept header, a list is a list.
  EXPECT_EQ(GetJson("/apis/gpuaas.io/v1/clusters")["kind"], "ClusterList");
  r = c.Get("/apis/gpuaas.io/v1/clusters", {{"Accept", "application/json, application/json;as=Table;v=v1;g=meta.k8s.io"}});
  EXPECT_EQ(json::parse(r->body)["kind"], "ClusterList") << "plain JSON was preferred";
}

TEST_F(ApiTest, SummaryGivesTheFleetAtAGlance) {
  json s = GetJson("/api/v1/summary");
  EXPECT_EQ(s["clusters"], 2);
  EXPECT_EQ(s["nodes"], 18);
  EXPECT_EQ(s["physical"]["gpus"], 144);
  EXPECT_EQ(s["physical"]["migEnabled"].get<int>() + s["physical"]["full"].get<int>(), 144);
  EXPECT_GT(s["physical"]["migEnabled"].get<int>(), 0);
  int by_model = 0;
  for (const json& m : s["physical"]["byModel"]) by_model += m["gpus"].get<int>();
  EXPECT_EQ(by_model, 144);
  int logical = 0;
  bool saw_3g = false;
  for (const json& d : s["logical"]["byProfile"]) {
    logical += d["count"].get<int>();
    EXPECT_EQ(d["count"].get<int>(), d["allocated"].get<int>() + d["free"].get<int>());
    saw_3g |= d["profile"] == "3g.71gb" && d["model"] == "H200-SXM-141GB";
  }
  EXPECT_TRUE(saw_3g);
  EXPECT_EQ(s["logical"]["count"], logical);
}

TEST_F(ApiTest, ListsEveryKind) {
  std::map<std::string, size_t> want = {
      {"clusters", 2}, {"nodecapacities", 18}, {"gpucapacities", 144}};
  for (const auto& [plural, n] : want) {
    json l = GetJson("/apis/gpuaas.io/v1/" + plural);
    EXPECT_EQ(l["items"].size(), n) << plural;
    EXPECT_EQ(l["apiVersion"], "gpuaas.io/v1");
    EXPECT_FALSE(l["metadata"].contains("continue"));
    EXPECT_GT(std::stoll(l["metadata"]["resourceVersion"].get<std::string>()), 0);
  }
  json specs = GetJson("/apis/gpuaas.io/v1/specandcounts");
  EXPECT_GT(specs["items"].size(), 18u);
  // Items are full objects that decode with the model codecs.
  json gpus = GetJson("/apis/gpuaas.io/v1/gpucapacities");
  EXPECT_EQ(gpus["kind"], "GpuCapacityList");
  EXPECT_TRUE(model::Decode<model::GpuCapacity>(gpus["items"][0].dump()).ok());
}

TEST_F(ApiTest, GetsSingleObjects) {
  json n = GetJson("/apis/gpuaas.io/v1/nodecapacities/alpha.h200-01");
  EXPECT_EQ(n["kind"], "NodeCapacity");
  EXPECT_EQ(n["spec"]["gpuModel"], "H200-SXM-141GB");
  json gpus = GetJson("/apis/gpuaas.io/v1/gpucapacities?limit=1");
  std::string name = gpus["items"][0]["metadata"]["name"];
  EXPECT_EQ(GetJson("/apis/gpuaas.io/v1/gpucapacities/" + name)["metadata"]["name"], name);
  EXPECT_EQ(GetJson("/apis/gpuaas.io/v1/clusters/beta")["spec"]["region"], "eu-west");
  httplib::Client c = Client();
  auto missing = c.Get("/apis/gpuaas.io/v1/gpucapacities/gpu-nope");
  ExpectProblem(missing, 404, "NotFound");
  EXPECT_NE(missing->body.find("gpu-nope"), std::string::npos);
}

TEST_F(ApiTest, LabelSelectors) {
  json beta = GetJson("/apis/gpuaas.io/v1/gpucapacities?labelSelector=gpuaas.io/cluster%3Dbeta");
  EXPECT_EQ(beta["items"].size(), 64u);
  for (const json& g : beta["items"]) EXPECT_EQ(g["spec"]["cluster"], "beta");
  json mig = GetJson(
      "/apis/gpuaas.io/v1/gpucapacities?labelSelector=gpuaas.io/mig-mode%3Denabled,"
      "gpuaas.io/gpu-model%20in%20(H200-SXM-141GB)");
  EXPECT_EQ(mig["items"].size(), 16u);
  json none = GetJson("/apis/gpuaas.io/v1/clusters?labelSelector=gpuaas.io/cluster%3Dgamma");
  EXPECT_TRUE(none["items"].empty());
  httplib::Client c = Client();
  auto bad = c.Get("/apis/gpuaas.io/v1/gpucapacities?labelSelector=a%20in%20b");
  ExpectProblem(bad, 400, "BadRequest");
  EXPECT_NE(bad->body.find("labelSelector"), std::string::npos);
}

TEST_F(ApiTest, PagingWalksEveryItemOnce) {
  for (std::string selector : {"", "&labelSelector=gpuaas.io/cluster%3Dalpha"}) {
    std::vector<std::string> names;
    std::string token;
    int pages = 0;
    do {
      std::string path = "/apis/gpuaas.io/v1/gpucapacities?limit=7" + selector;
      if (!token.empty()) path += "&continue=" + token;
      json page = GetJson(path);
      EXPECT_LE(page["items"].size(), 7u);
      for (const json& g : page["items"]) names.push_back(g["metadata"]["name"]);
      token = page["metadata"].value("continue", "");
      if (!token.empty() && selector.empty()) {
        EXPECT_EQ(page["metadata"]["remainingItemCount"].get<size_t>() + names.size(), 144u);
      }
      ++pages;
    } while (!token.empty() && pages < 100);
    const size_t want = selector.empty() ? 144 : 80;
    EXPECT_EQ(names.size(), want) << selector;
    EXPECT_EQ(pages, static_cast<int>((want + 6) / 7));
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  }
  httplib::Client c = Client();
  auto bad_token = c.Get("/apis/gpuaas.io/v1/gpucapacities?limit=5&continue=garbage!");
  ExpectProblem(bad_token, 400, "BadRequest");
  // A token of another resource type is refused too.
  json nodes = GetJson("/apis/gpuaas.io/v1/nodecapacities?limit=2");
  auto crossed = c.Get("/apis/gpuaas.io/v1/gpucapacities?limit=2&continue=" +
                       nodes["metadata"]["continue"].get<std::string>());
  ExpectProblem(crossed, 400, "BadRequest");
  auto bad_limit = c.Get("/apis/gpuaas.io/v1/gpucapacities?limit=ten");
  ExpectProblem(bad_limit, 400, "BadRequest");
  auto negative = c.Get("/apis/gpuaas.io/v1/gpucapacities?limit=-1");
  ExpectProblem(negative, 400, "BadRequest");
}

TEST_F(ApiTest, PagesReadTheFirstPagesRevision) {
  json first = GetJson("/apis/gpuaas.io/v1/gpucapacities?limit=50");
  const std::string rv = first["metadata"]["resourceVersion"];
  std::set<std::string> names;
  for (const json& g : first["items"]) names.insert(g["metadata"]["name"]);
  // Meanwhile a GPU of a later page goes away and a new one appears.
  json all = GetJson("/apis/gpuaas.io/v1/gpucapacities");
  const std::string gone = all["items"][100]["metadata"]["name"];
  std::optional<store::Record> kept = *store_->Get({"GpuCapacity", "", gone});
  ASSERT_TRUE(kept.has_value());
  const store::Key added{"GpuCapacity", "", "gpu-ffffffff-page-test"};
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    RETURN_IF_ERROR(tx.Delete(kept->key, 0));
    json extra = all["items"][0];
    extra["metadata"]["name"] = added.name;
    return tx.Put(added, "uid-page-test", extra.dump(), store::kMustNotExist);
  }).ok());
  ASSERT_TRUE(cache_->WaitFor(store_->Revision(), std::chrono::seconds(5)));
  EXPECT_EQ(GetJson("/apis/gpuaas.io/v1/gpucapacities")["items"].size(), 144u);
  std::string token = first["metadata"]["continue"];
  while (!token.empty()) {
    json page = GetJson("/apis/gpuaas.io/v1/gpucapacities?limit=50&continue=" + token);
    EXPECT_EQ(page["metadata"]["resourceVersion"], rv);
    for (const json& g : page["items"]) names.insert(g["metadata"]["name"]);
    token = page["metadata"].value("continue", "");
  }
  EXPECT_EQ(names.size(), 144u);
  EXPECT_TRUE(names.count(gone));
  EXPECT_FALSE(names.count(added.name));
  // A token whose list is no longer held (here: a revision never listed) gets 410 Expired.
  httplib::Client c = Client();
  auto expired = c.Get("/apis/gpuaas.io/v1/gpucapacities?limit=5&continue=" +
                       Base64UrlEncode("v2\x1f" "gpucapacities\x1f" "1\x1f\x1f" "gpu-0"));
  ExpectProblem(expired, 410, "Expired");
  // Put the fleet back as the other tests expect it.
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    RETURN_IF_ERROR(tx.Delete(added, 0));
    return tx.Put(kept->key, kept->uid, kept->data, store::kMustNotExist);
  }).ok());
  ASSERT_TRUE(cache_->WaitFor(store_->Revision(), std::chrono::seconds(5)));
}

TEST(Problem, OneMappingFromStatusToHttp) {
  EXPECT_EQ(ErrorResponse(absl::NotFoundError("x")).status, 404);
  EXPECT_EQ(ErrorResponse(absl::AbortedError("x")).status, 409);
  EXPECT_EQ(ErrorResponse(absl::OutOfRangeError("x")).status, 410);
  EXPECT_EQ(ErrorResponse(absl::InternalError("x")).status, 500);
  // Outcomes without a Status code of their own keep their HTTP status and reason.
  const absl::Status s = MethodNotAllowed("PUT /x is not allowed");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  HttpResponse r = ErrorResponse(s);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.content_type, "application/problem+json");
  json body = json::parse(r.body);
  EXPECT_EQ(body["reason"], "MethodNotAllowed");
  EXPECT_EQ(body["title"], "Method Not Allowed");
  EXPECT_EQ(body["detail"], "PUT /x is not allowed");
  EXPECT_EQ(ProblemFor(NotReady("wait")).reason, "NotReady");
}

TEST_F(ApiTest, BadUtf8IsRefusedNot500) {
  httplib::Client c = Client();
  for (const char* path : {"/apis/gpuaas.io/v1/gpucapacities?labelSelector=a%3D%FF",
                           "/apis/gpuaas.io/v1/gpucapacities?labelSelector=a%3D%FF&watch=1",
                           "/apis/gpuaas.io/v1/gpucapacities/gpu-%C0%AF",
                           "/apis/gpuaas.io/v1/namespaces/%ED%A0%80/gpupools",
                           "/api/v1/metrics/query?series=gpu:%FF:power_w"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    ExpectProblem(r, 400, "BadRequest");
    EXPECT_NE(r->body.find("UTF-8"), std::string::npos) << path << ": " << r->body;
  }
  // Text that is UTF-8 passes.
  auto ok = c.Get("/apis/gpuaas.io/v1/gpucapacities?labelSelector=a%3D%EA%B0%80");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 400);  // a label value must be alphanumeric: refused for that reason
  EXPECT_EQ(ok->body.find("UTF-8"), std::string::npos) << ok->body;
}

TEST_F(ApiTest, ErrorClasses) {
  httplib::Client c = Client();
  auto unknown_route = c.Get("/no/such/thing");
  ExpectProblem(unknown_route, 404, "NotFound");
  auto unknown_kind = c.Get("/apis/gpuaas.io/v1/widgets");
  ExpectProblem(unknown_kind, 404, "NotFound");
  auto wrong_method = c.Post("/apis/gpuaas.io/v1/gpucapacities", "{}", "application/json");
  ExpectProblem(wrong_method, 405, "MethodNotAllowed");
  EXPECT_EQ(wrong_method->get_header_value("Allow"), "GET");
  // A type that does not exist is absent whatever the method, as a GET says, in a project or not.
  for (const std::string path : {"/apis/gpuaas.io/v1/widgets", "/apis/gpuaas.io/v1/widgets/w",
                                 "/apis/gpuaas.io/v1/namespaces/vision/widgets/w"}) {
    auto post = c.Post(path, "{}", "application/json");
    ExpectProblem(post, 404, "NotFound");
    EXPECT_NE(post->body.find("no resource type \\\"widgets\\\""), std::string::npos) << path << ": " << post->body;
    auto del = c.Delete(path);
    ExpectProblem(del, 404, "NotFound");
  }
  auto wrong_method2 = c.Delete("/healthz");
  ExpectProblem(wrong_method2, 405, "MethodNotAllowed");
  auto too_big = c.Post("/apis/gpuaas.io/v1/gpucapacities", std::string(8192, 'x'), "application/json");
  ExpectProblem(too_big, 413, "RequestEntityTooLarge");
  // The server is still fine after errors.
  EXPECT_EQ(c.Get("/healthz")->status, 200);
}

TEST_F(ApiTest, MetricsCountRequestsByRoute) {
  httplib::Client c = Client();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Get("/apis/gpuaas.io/v1/clusters/alpha")->status, 200);
  (void)c.Get("/apis/gpuaas.io/v1/clusters/zeta");
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const std::string& t = m->body;
  EXPECT_NE(t.find("# TYPE gpuaas_http_requests_total counter"), std::string::npos);
  EXPECT_NE(t.find("gpuaas_http_requests_total{method=\"GET\",route=\"/apis/gpuaas.io/v1/{plural}/{name}\",code=\"404\"}"),
            std::string::npos);
  EXPECT_NE(t.find("gpuaas_http_request_duration_seconds_bucket{method=\"GET\",route=\"/apis/gpuaas.io/v1/{plural}/{name}\",le=\"+Inf\"}"),
            std::string::npos);
  EXPECT_NE(t.find("gpuaas_fleet_gpus{model=\"H200-SXM-141GB\",mig=\"enabled\"} 16"), std::string::npos);
  // The route label is the pattern, never the raw path.
  EXPECT_EQ(t.find("clusters/alpha"), std::string::npos);
}

TEST_F(ApiTest, ServesManyKeepAliveRequestsInParallel) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      httplib::Client c = Client();
      for (int i = 0; i < 50; ++i) {
        auto r = c.Get("/apis/gpuaas.io/v1/nodecapacities/beta.a100-02");
        if (r && r->status == 200) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 400);
}

TEST(ApiServerStart, AddressInUseIsAnError) {
  auto s = std::move(*store::OpenStore("sqlite::memory:"));
  store::ObjectCache cache(*s);
  ServerOptions o;
  o.port = 0;
  ApiServer a(o, cache);
  ASSERT_TRUE(a.Start().ok());
  o.port = a.port();
  ApiServer b(o, cache);
  absl::Status st = b.Start();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpuaas::api

namespace gpuaas::api {
namespace {

class PoolApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    auto drivers = cluster::simulated::MakeDrivers(cluster::simulated::DemoFleet());
    ASSERT_TRUE(controller::ObserveOnce(*store_, {drivers[0].get(), drivers[1].get()}, RealClock::Get()).ok());
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    std::vector<std::string> kinds;
    for (const ResourceType& t : ResourceTypes()) kinds.push_back(t.kind);
    ASSERT_TRUE(cache_->Start(kinds).ok());
    pools_ = std::make_unique<service::PoolService>(*store_, clock_, [] {
      return std::map<std::string, int64_t>{{"H200-SXM-141GB", 48}};
    });
    ServerOptions o;
    o.port = 0;
    o.clock = &clock_;
    server_ = std::make_unique<ApiServer>(o, *cache_, pools_.get());
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    server_->Stop();
    cache_->Stop();
  }
  httplib::Result Send(const std::string& method, const std::string& path, const std::string& body,
                       const std::string& type = "application/json") {
    httplib::Client c("127.0.0.1", server_->port());
    if (method == "POST") return c.Post(path, body, type);
    if (method == "PUT") return c.Put(path, body, type);
    return c.Get(path);
  }
  // The service and the API read one clock, years ahead of the system's.
  FakeClock clock_{*ParseTime("2030-01-01T00:00:00Z")};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::ObjectCache> cache_;
  std::unique_ptr<service::PoolService> pools_;
  std::unique_ptr<ApiServer> server_;
};


constexpr char kV1[] = "/apis/gpuaas.io/v1";

// The API tells time by the clock it is given: a pool created on the service's clock is three
// hours old in kubectl's table once that clock has moved three hours (on the system's clock it
// would not have been created yet).
TEST_F(PoolApiTest, TablesTellAgeByTheServersClock) {
  ASSERT_EQ(Send("POST", std::string(kV1) + "/projects",
                 R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"vision"}})")->status,
            201);
  auto pool = Send("POST", std::string(kV1) + "/namespaces/vision/gpupools",
                   R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"train"},)"
                   R"("spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":1}]}})");
  ASSERT_EQ(pool->status, 201) << pool->body;
  EXPECT_EQ(json::parse(pool->body)["metadata"]["creationTimestamp"], "2030-01-01T00:00:00Z");
  clock_.Advance(std::chrono::hours(3));
  httplib::Client c("127.0.0.1", server_->port());
  auto table = c.Get(std::string(kV1) + "/namespaces/vision/gpupools/train",
                     {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}});
  ASSERT_TRUE(table);
  ASSERT_EQ(table->status, 200) << table->body;
  const json t = json::parse(table->body);
  ASSERT_EQ(t["rows"].size(), 1u);
  EXPECT_EQ(t["rows"][0]["cells"].back(), "3h") << t.dump();
}

TEST_F(PoolApiTest, RequestApproveRelease) {
  auto project = Send("POST", std::string(kV1) + "/projects",
                      R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"vision"},)"
                      R"("spec":{"quota":{"fullGpus":{"H200-SXM-141GB":4}}}})");
  ASSERT_TRUE(project);
  EXPECT_EQ(project->status, 201) << project->body;
  const std::string pools = std::string(kV1) + "/namespaces/vision/gpupools";
  auto pool = Send("POST", pools,
                   R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"train"},)"
                   R"("spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":2}]}})");
  ASSERT_EQ(pool->status, 201) << pool->body;
  EXPECT_EQ(json::parse(pool->body)["metadata"]["namespace"], "vision");
  // Read-your-writes: the object is visible at once, in the project and across projects.
  EXPECT_EQ(Send("GET", pools + "/train", "")->status, 200);
  EXPECT_EQ(json::parse(Send("GET", pools, "")->body)["items"].size(), 1u);
  EXPECT_EQ(json::parse(Send("GET", std::string(kV1) + "/gpupools", "")->body)["items"].size(), 1u);
  auto hint = Send("GET", std::string(kV1) + "/gpupools/train", "");
  EXPECT_EQ(hint->status, 404);
  EXPECT_NE(hint->body.find("namespaces/PROJECT"), std::string::npos);

  auto approve = Send("PUT", pools + "/train/approval", R"({"approve":true,"reason":"ok"})");
  ASSERT_EQ(approve->status, 200) << approve->body;
  EXPECT_EQ(json::parse(approve->body)["status"]["approval"]["approved"], true);
  auto again = Send("PUT", pools + "/train/approval", R"({"approve":false,"reason":"no"})");
  EXPECT_EQ(again->status, 409);
  EXPECT_EQ(json::parse(again->body)["reason"], "FailedPrecondition");
  EXPECT_EQ(Send("POST", pools + "/train/release", "")->status, 200);

  json audit = json::parse(Send("GET", "/api/v1/audit", "")->body);
  ASSERT_EQ(audit["items"].size(), 4u);
  EXPECT_EQ(audit["items"][3]["action"], "Release");
  // A page after a revision holds what came later only.
  const int64_t second = audit["items"][1]["revision"];
  json later = json::parse(Send("GET", "/api/v1/audit?after=" + std::to_string(second), "")->body);
  ASSERT_EQ(later["items"].size(), 2u);
  EXPECT_EQ(later["items"][0]["revision"], audit["items"][2]["revision"]);
  EXPECT_EQ(Send("GET", "/api/v1/audit?after=-1", "")->status, 400);
}

TEST_F(PoolApiTest, AWriteTheReadCacheDoesNotShowInTimeSaysSo) {
  // A server whose cache does not follow the store (no thread): every write stays unseen.
  store::ObjectCache frozen(*store_);
  std::vector<std::string> kinds;
  for (const ResourceType& t : ResourceTypes()) kinds.push_back(t.kind);
  ASSERT_TRUE(frozen.Load(kinds).ok());
  ServerOptions o;
  o.port = 0;
  o.read_your_write_timeout = std::chrono::milliseconds(50);
  ApiServer lagging(o, frozen, pools_.get());
  ASSERT_TRUE(lagging.Start().ok());
  httplib::Client c("127.0.0.1", lagging.port());
  auto created = c.Post(std::string(kV1) + "/projects",
                        R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"slow"}})",
                        "application/json; charset=utf-8");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 201) << created->body;  // committed all the same
  const std::string warning = created->get_header_value("Warning");
  EXPECT_EQ(warning.rfind("299 - \"", 0), 0u) << warning;
  EXPECT_NE(warning.find("read cache does not show it yet"), std::string::npos) << warning;
  // The server whose cache follows answers without a warning.
  auto seen = Send("POST", std::string(kV1) + "/projects",
                   R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"quick"}})");
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->status, 201);
  EXPECT_FALSE(seen->has_header("Warning"));
  lagging.Stop();
}

TEST_F(PoolApiTest, BadWritesAreRefusedAndChangeNothing) {
  ASSERT_EQ(Send("POST", std::string(kV1) + "/projects",
                 R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"vision"},)"
                 R"("spec":{"quota":{"fullGpus":{"H200-SXM-141GB":1}}}})")->status, 201);
  const int64_t rev = store_->Revision();
  const std::string pools = std::string(kV1) + "/namespaces/vision/gpupools";
  auto expect = [&](httplib::Result r, int status, std::string_view reason) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json");
    EXPECT_EQ(json::parse(r->body)["reason"], reason) << r->body;
  };
  const std::string pool2 =
      R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"p"},)"
      R"("spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":2}]}})";
  expect(Send("POST", pools, pool2), 403, "QuotaExceeded");
  expect(Send("POST", pools, pool2, "text/plain"), 415, "UnsupportedMediaType");
  expect(Send("POST", pools, pool2, "application/jsonx"), 415, "UnsupportedMediaType");
  expect(Send("POST", pools, "{not json"), 400, "BadRequest");
  expect(Send("POST", pools,
              R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"p"},)"
              R"("spec":{"items":[{"model":"H200-SXM-141GB","profile":"9g.1gb","count":1}]}})"),
         400, "BadRequest");
  expect(Send("POST", std::string(kV1) + "/namespaces/nobody/gpupools",
              R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"p"},)"
              R"("spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":1}]}})"),
         404, "NotFound");
  expect(Send("PUT", pools + "/missing/approval", R"({"approve":true})"), 404, "NotFound");
  expect(Send("PUT", pools + "/missing/approval", R"({"approve":"yes"})"), 400, "BadRequest");
  expect(Send("POST", std::string(kV1) + "/projects",
              R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"vision"}})"),
         409, "AlreadyExists");
  expect(Send("PUT", std::string(kV1) + "/namespaces/vision/gpupools", "{}"), 405, "MethodNotAllowed");
  // A refused body names the field that is wrong.
  for (const auto& [method, path, body, detail] : std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"PUT", pools + "/missing/approval", R"({"approve":false})",
            "reason: required when approve is false (a rejection needs a reason)"},
           {"PUT", pools + "/missing/approval", R"({"approve":true,"reason":null})", "reason: expected a string"},
           {"PUT", std::string(kV1) + "/projects/vision/budget", R"({"amountMicros":1,"gpuHours":-1})",
            "gpuHours: must be at least 0"},
           {"POST", "/api/v1/projects/vision/creditnotes", R"({"period":"2026-01","reason":"x"})",
            "amountMicros: required"},
       }) {
    httplib::Result r = Send(method, path, body);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 400) << body << ": " << r->body;
    EXPECT_EQ(json::parse(r->body)["detail"], detail) << body;
  }
  EXPECT_EQ(store_->Revision(), rev);
}

}  // namespace
}  // namespace gpuaas::api
