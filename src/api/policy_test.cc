// The route/role matrix: generated from the route registry, every route is tried with every
// role's token (and none), and the answer must match the route's declared policy. The table in
// docs/security.md must match the registry too, so that what operators read is what runs.
#include <httplib.h>

#include <fstream>
#include <sstream>

#include "api/auth.h"
#include "api/server.h"
#include "cluster/simulated/fleet.h"
#include "common/clock.h"
#include "controller/control_plane.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/clusters.h"
#include "service/defrag.h"
#include "service/pools.h"
#include "store/sqlite_store.h"
#include "telemetry/hub.h"

namespace gpuaas::api {
namespace {

class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    auto drivers = cluster::simulated::MakeDrivers(cluster::simulated::DemoFleet());
    ASSERT_TRUE(controller::ObserveOnce(*store_, {drivers[0].get(), drivers[1].get()}, RealClock::Get()).ok());
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    std::vector<std::string> kinds = {std::string(kTokenKind)};
    for (const ResourceType& t : ResourceTypes()) kinds.push_back(t.kind);
    ASSERT_TRUE(cache_->Start(kinds).ok());
    pools_ = std::make_unique<service::PoolService>(*store_, RealClock::Get(), [] {
      return std::map<std::string, int64_t>{{"H200-SXM-141GB", 48}};
    });
    model::Project vision;
    vision.metadata.name = "vision";
    ASSERT_TRUE(pools_->CreateProject(vision, "ops").ok());
    auth_ = std::make_unique<Authenticator>(*store_, *cache_, RealClock::Get());
    tokens_["operator"] = auth_->Create("olive", Role::kOperator, "", "test")->first;
    tokens_["member"] = auth_->Create("mia", Role::kMember, "vision", "test")->first;
    tokens_["agent"] = auth_->Create("node-1", Role::kAgent, "", "test", "alpha", {"h200-01"})->first;
    ASSERT_TRUE(cache_->WaitFor(store_->Revision(), std::chrono::seconds(5)));
    clusters_ = std::make_unique<service::ClusterService>(
        *store_, RealClock::Get(), registry_, [](const model::ClusterRegistration&) { return absl::OkStatus(); },
        nullptr);
    ServerOptions o;
    o.port = 0;
    o.clusters = clusters_.get();
    defrag_ = std::make_unique<service::DefragService>(*store_, RealClock::Get());
    o.defrag = defrag_.get();
    server_ = std::make_unique<ApiServer>(o, *cache_, pools_.get(), auth_.get(), &hub_);
    ASSERT_TRUE(server_->Start().ok());
    server_->SetReady(true);
  }
  void TearDown() override {
    server_->Stop();
    cache_->Stop();
  }
  httplib::Result Send(const std::string& method, const std::string& path, const std::string& role) {
    httplib::Client c("127.0.0.1", server_->port());
    httplib::Headers h;
    if (role != "anonymous") h.emplace("Authorization", "Bearer " + tokens_[role]);
    if (method == "GET") return c.Get(path, h);
    if (method == "DELETE") return c.Delete(path, h);
    if (method == "PUT") return c.Put(path, h, "{}", "application/json");
    if (method == "PATCH") return c.Patch(path, h, "{}", "application/merge-patch+json");
    return c.Post(path, h, "{}", "application/json");
  }
  static std::string Fill(std::string pattern, std::string_view plural, std::string_view ns) {
    auto put = [&](std::string_view key, std::string_view value) {
      const size_t at = pattern.find(key);
      if (at != std::string::npos) pattern.replace(at, key.size(), value);
    };
    put("{plural}", plural);
    put("{namespace}", ns);
    put("{name}", "x");
    put("{id}", "x");
    return pattern;
  }

  telemetry::Hub hub_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::ObjectCache> cache_;
  std::unique_ptr<service::PoolService> pools_;
  cluster::Registry registry_;
  std::unique_ptr<service::ClusterService> clusters_;
  std::unique_ptr<service::DefragService> defrag_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<ApiServer> server_;
  std::map<std::string, std::string> tokens_;
};

Grant GrantOf(const Policy& p, const std::string& role) {
  if (role == "operator") return p.operator_;
  if (role == "member") return p.member;
  if (role == "agent") return p.agent;
  return p.anonymous;
}

TEST_F(PolicyTest, EveryRouteAnswersEveryRoleAsItsPolicySays) {
  const std::vector<RouteInfo> routes = server_->Routes();
  ASSERT_GT(routes.size(), 20u);
  int tried = 0;
  for (const RouteInfo& r : routes) {
    // The namespaced routes take a project's kinds; the others a fleet kind.
    const bool namespaced = r.pattern.find("{namespace}") != std::string::npos;
    const std::string plural = namespaced ? "gpupools" : (r.method == "GET" ? "gpucapacities" : "x");
    for (const std::string role : {"operator", "member", "agent", "anonymous"}) {
      const Grant g = GrantOf(r.policy, role);
      const std::string path = Fill(r.pattern, plural, "vision");
      httplib::Result res = Send(r.method, path, role);
      ASSERT_TRUE(res) << r.method << " " << path;
      const std::string what = fmt::format("{} {} as {} (policy {}): {} {}", r.method, path, role, ToString(g),
                                           res->status, res->body);
      ++tried;
      if (g == Grant::kNo) {
        EXPECT_EQ(res->status, role == "anonymous" ? 401 : 403) << what;
        continue;
      }
      EXPECT_NE(res->status, 401) << what;
      EXPECT_NE(res->status, 403) << what;
      EXPECT_LT(res->status, 500) << what;
      if (g == Grant::kOwn && role == "member" && namespaced) {
        // Another project's objects look absent.
        httplib::Result other = Send(r.method, Fill(r.pattern, plural, "other"), role);
        ASSERT_TRUE(other);
        EXPECT_EQ(other->status, 404) << r.method << " " << r.pattern << " as member in another project";
      }
      if (g == Grant::kFleet && r.method == "GET" && r.pattern.find("{plural}") != std::string::npos) {
        // Agents read the inventory, never a project's objects.
        for (const char* tenant : {"gpupools", "workloads", "profiles", "projects"}) {
          httplib::Result t = Send("GET", Fill(r.pattern, tenant, "vision"), role);
          ASSERT_TRUE(t);
          EXPECT_EQ(t->status, 403) << "GET " << Fill(r.pattern, tenant, "vision") << " as agent: " << t->body;
        }
      }
    }
  }
  EXPECT_EQ(tried, static_cast<int>(routes.size()) * 4);
}

TEST_F(PolicyTest, TheSecurityDocsTableIsTheRegistry) {
  std::ifstream in("docs/security.md");
  ASSERT_TRUE(in) << "docs/security.md (tests run from the repository root)";
  std::stringstream doc;
  doc << in.rdbuf();
  for (const RouteInfo& r : server_->Routes()) {
    const std::string row = fmt::format("| `{}` | `{}` | {} | {} | {} | {} |", r.method, r.pattern,
                                        ToString(r.policy.operator_), ToString(r.policy.member),
                                        ToString(r.policy.agent), ToString(r.policy.anonymous));
    EXPECT_NE(doc.str().find(row), std::string::npos) << "docs/security.md lacks the row\n" << row;
  }
}

// /api/v1/clusters as an attacker tries it: malformed bodies are refused with the reason and
// store nothing; a registration is listed without its kubeconfig; a fixed cluster cannot go.
TEST_F(PolicyTest, ClusterRegistrationRefusesBadBodiesAndNeverShowsTheKubeconfig) {
  httplib::Client c("127.0.0.1", server_->port());
  c.set_bearer_token_auth(tokens_["operator"]);
  const int64_t before = store_->Revision();
  for (const char* body : {"not json", "[]", R"({"name": "lab"})", R"({"name": "lab", "kubeconfig": 7})",
                           R"({"name": 7, "kubeconfig": "x"})", R"({"name": "Lab!", "kubeconfig": "x"})",
                           R"({"name": "lab", "kubeconfig": ""})", R"({"name": "lab", "kubeconfig": "x", "region": []})"}) {
    httplib::Result r = c.Post("/api/v1/clusters", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json") << body;
  }
  EXPECT_EQ(store_->Revision(), before) << "a refused registration stores nothing";

  const std::string secret = "apiVersion: v1\nkind: Config\n# token: do-not-show-me\n";
  httplib::Result r = c.Post("/api/v1/clusters", nlohmann::json{{"name", "lab"}, {"kubeconfig", secret}}.dump(),
                             "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(r->body.find("do-not-show-me"), std::string::npos) << r->body;
  r = c.Post("/api/v1/clusters", nlohmann::json{{"name", "lab"}, {"kubeconfig", secret}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  r = c.Get("/api/v1/clusters");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body.find("do-not-show-me"), std::string::npos) << r->body;
  const nlohmann::json list = nlohmann::json::parse(r->body);
  std::map<std::string, std::string> sources;
  for (const auto& e : list["items"]) sources[e["name"]] = e["source"];
  EXPECT_EQ(sources["lab"], "registered");
  EXPECT_EQ(sources["alpha"], "none") << "objects a former run left, with no driver now";
  r = c.Get("/api/v1/audit");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("RegisterCluster"), std::string::npos);
  EXPECT_EQ(r->body.find("do-not-show-me"), std::string::npos) << r->body;
  r = c.Delete("/api/v1/clusters/lab");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = c.Delete("/api/v1/clusters/lab");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
}

// /api/v1/defrag as an attacker tries it: bodies that are not a list of GPU UUIDs, names that are
// not GPUs and GPUs with no move are refused with the reason and change nothing.
TEST_F(PolicyTest, DefragmentationRefusesBadBodiesAndChangesNothing) {
  httplib::Client c("127.0.0.1", server_->port());
  c.set_bearer_token_auth(tokens_["operator"]);
  const int64_t before = store_->Revision();
  for (const auto& [body, status] : std::vector<std::pair<std::string, int>>{
           {"not json", 400}, {"[]", 400}, {R"({"gpus": 3})", 400}, {R"({"gpus": [3]})", 400},
           {R"({"gpus": ["../../etc/passwd"]})", 400}, {R"({"gpus": ["GPU-00000000-0000-0000-0000-000000000000"]})", 409}}) {
    httplib::Result r = c.Post("/api/v1/defrag", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body << ": " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/problem+json") << body;
  }
  EXPECT_EQ(store_->Revision(), before) << "a refused request writes nothing";
  httplib::Result r = c.Get("/api/v1/defrag");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(nlohmann::json::parse(r->body)["moves"].is_array());
}

// Field validation as kube-apiserver answers it, on every write that takes a body: a typo is
// named in a Warning header by default, refused with 400 under fieldValidation=Strict (and
// nothing stored), and passed over under Ignore; a field given twice likewise.
TEST_F(PolicyTest, EveryWriteWithABodyValidatesItsFields) {
  struct Write {
    std::string method, path, body, unknown;
    bool succeeds;  // with the typo ignored; the others fail later for reasons of their own
  };
  const std::string api = "/apis/gpuaas.io/v1";
  const std::vector<Write> writes = {
      {"POST", api + "/projects", R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"p-TAG","lables":{}}})",
       "metadata.lables", true},
      {"POST", api + "/ratecards",
       R"({"apiVersion":"gpuaas.io/v1","kind":"RateCard","metadata":{"name":"r-TAG"},"spec":{"currency":"USD",)"
       R"("effectiveFrom":"2027-01-DAYT00:00:00Z","migPricing":"compute","prices":[{"model":"H200-SXM-141GB",)"
       R"("profile":"full","pricePerHourMicros":4500000,"pricePerHour":4.5}]}})",
       "spec.prices[0].pricePerHour", true},
      {"POST", api + "/namespaces/vision/gpupools",
       R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"g-TAG"},)"
       R"("spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":1,"cnt":2}]}})",
       "spec.items[0].cnt", true},
      {"POST", api + "/namespaces/vision/workloads",
       R"({"apiVersion":"gpuaas.io/v1","kind":"Workload","metadata":{"name":"w-TAG"},)"
       R"("spec":{"pool":"nowhere","resources":{"nvidia.com/gpu":1},"priorityClassName":"batch","prio":1}})",
       "spec.prio", false},
      {"PUT", api + "/projects/vision/budget", R"({"amountMicros":1000000,"gpuHour":5})", "gpuHour", true},
      {"PUT", api + "/namespaces/vision/gpupools/nowhere/approval", R"({"approve":true,"reasn":"typo"})", "reasn", false},
      {"POST", "/api/v1/projects/vision/creditnotes", R"({"period":"2026-01","amountMicros":1,"reason":"x","amout":2})",
       "amout", false},
      {"POST", "/api/v1/tokens", R"({"user":"u-TAG","role":"member","project":"vision","projet":"other"})", "projet",
       true},
      {"POST", "/api/v1/defrag", R"({"gpus":[],"gpu":"GPU-1"})", "gpu", false},
      {"POST", "/api/v1/clusters", R"({"name":"c-TAG","kubeconfig":"x","contxt":"y"})", "contxt", false},
  };
  httplib::Client c("127.0.0.1", server_->port());
  c.set_bearer_token_auth(tokens_["operator"]);
  // Each mode's objects are named apart (TAG) and its rate card starts another day (DAY).
  auto send = [&](const Write& w, const std::string& mode, const std::string& day) {
    std::string body = w.body;
    const std::string tag = "mode" + day;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"TAG", tag}, {"DAY", day}}) {
      for (size_t at; (at = body.find(from)) != std::string::npos;) body.replace(at, from.size(), to);
    }
    const std::string path = w.path + (mode.empty() ? "" : "?fieldValidation=" + mode);
    return w.method == "PUT" ? c.Put(path, body, "application/json") : c.Post(path, body, "application/json");
  };
  auto warned = [](const httplib::Result& r, const std::string& what) {
    for (size_t i = 0, n = r->get_header_value_count("Warning"); i < n; ++i) {
      if (r->get_header_value("Warning", i).find(what) != std::string::npos) return true;
    }
    return false;
  };
  const int64_t before = store_->Revision();
  for (const Write& w : writes) {
    httplib::Result r = send(w, "Strict", "01");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << w.path << ": " << r->body;
    EXPECT_NE(nlohmann::json::parse(r->body).value("detail", "").find("unknown field \"" + w.unknown + "\""),
              std::string::npos)
        << w.path << ": " << r->body;
  }
  EXPECT_EQ(store_->Revision(), before) << "a strict refusal writes nothing";
  for (const Write& w : writes) {
    if (!w.succeeds) continue;
    // Warn, also when not asked for: the write is made and the typo named, as kubectl prints it.
    for (const auto& [mode, day] : {std::pair<std::string, std::string>{"", "02"}, {"Warn", "03"}}) {
      httplib::Result r = send(w, mode, day);
      ASSERT_TRUE(r);
      EXPECT_GE(r->status, 200) << w.path << " " << mode << ": " << r->body;
      EXPECT_LT(r->status, 300) << w.path << " " << mode << ": " << r->body;
      EXPECT_TRUE(warned(r, "299 - \"unknown field \\\"" + w.unknown + "\\\"\"")) << w.path << " " << mode;
    }
    httplib::Result r = send(w, "Ignore", "04");
    ASSERT_TRUE(r);
    EXPECT_LT(r->status, 300) << w.path << ": " << r->body;
    EXPECT_FALSE(warned(r, "unknown field")) << w.path;
  }
  // A field given twice: JSON keeps the last, so it is named too.
  const std::string twice =
      R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"first","name":"second"}})";
  httplib::Result strict = c.Post(api + "/projects?fieldValidation=Strict", twice, "application/json");
  ASSERT_TRUE(strict);
  EXPECT_EQ(strict->status, 400);
  EXPECT_NE(strict->body.find("duplicate field \\\"metadata.name\\\""), std::string::npos) << strict->body;
  httplib::Result warn = c.Post(api + "/projects", twice, "application/json");
  ASSERT_TRUE(warn);
  EXPECT_EQ(warn->status, 201) << warn->body;
  EXPECT_TRUE(warned(warn, "duplicate field \\\"metadata.name\\\""));
  EXPECT_EQ(nlohmann::json::parse(warn->body)["metadata"]["name"], "second");
  // A mode that is not one of the three is refused before anything is read.
  httplib::Result bad = c.Post(api + "/projects?fieldValidation=strict", twice, "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("Ignore, Warn, Strict"), std::string::npos) << bad->body;
}

// PATCH and PUT as kubectl and GitOps tools send them, and as an attacker would: the update
// rules (status is the controllers', a decided pool's spec stays, resourceVersion is a
// precondition), field validation on the object a patch makes, tenancy, and nothing stored by
// any refusal.
TEST_F(PolicyTest, PatchesFollowTheUpdateRulesAndChangeNothingWhenRefused) {
  httplib::Client ops("127.0.0.1", server_->port());
  ops.set_bearer_token_auth(tokens_["operator"]);
  httplib::Client mia("127.0.0.1", server_->port());
  mia.set_bearer_token_auth(tokens_["member"]);
  const std::string pools = "/apis/gpuaas.io/v1/namespaces/vision/gpupools";
  const std::string p = pools + "/p";
  ASSERT_EQ(mia.Post(pools,
                     R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"p"},
                         "spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":1}]}})",
                     "application/json")
                ->status,
            201);
  constexpr const char* kMerge = "application/merge-patch+json";
  auto get = [&] { return nlohmann::json::parse(ops.Get(p)->body); };
  auto detail = [](const httplib::Result& r) {
    const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    return j.is_object() ? j.value("detail", j.value("message", r->body)) : r->body;
  };

  // The member labels its pool: a merge patch.
  httplib::Result r = mia.Patch(p + "?fieldManager=team", R"({"metadata":{"labels":{"team":"vision"}}})", kMerge);
  ASSERT_EQ(r->status, 200) << r->body;
  nlohmann::json cur = get();
  EXPECT_EQ(cur["metadata"]["labels"]["team"], "vision");
  EXPECT_EQ(cur["metadata"]["managedFields"].back()["manager"], "team");
  const std::string rv = cur["metadata"]["resourceVersion"];

  // A patch that changes nothing writes nothing.
  r = mia.Patch(p + "?fieldManager=team", R"({"metadata":{"labels":{"team":"vision"}}})", kMerge);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(get()["metadata"]["resourceVersion"], rv);

  // Refusals, each leaving the pool as it was.
  const int64_t before = store_->Revision();
  struct Refusal {
    std::string path, type, body;
    int status;
    std::string says;
  };
  const std::vector<Refusal> refused = {
      {p, kMerge, R"({"metadata":{"resourceVersion":"1"},"spec":{"workloadType":"inference"}})", 409,
       "the object has been modified"},
      {p, kMerge, R"({"spec":{"releaseRequested":{"time":"2026-01-01T00:00:00Z"}}})", 400, "set by a release"},
      {p, kMerge, R"({"spec":{"workloadType":5}})", 400, "spec.workloadType: expected a string"},
      {p, kMerge, R"({"spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":1000}]}})", 403,
       "more than the whole fleet"},
      {p, kMerge, R"({"metadata":{"name":"q"}})", 400, "does not match"},
      {p, kMerge, R"({"metadata":{"namespace":"other"}})", 400, "does not match the project in the path"},
      {p, kMerge, R"({"metadata":{"labels":{"bad key!":"x"}}})", 400, "bad key!"},
      {p + "?fieldValidation=Strict", kMerge, R"({"spec":{"quotta":1}})", 400,
       "strict decoding error: unknown field \"spec.quotta\""},
      {p + "?fieldValidation=Strict", kMerge, R"({"metadata":{},"metadata":{}})", 400, "duplicate field \"metadata\""},
      {p, "application/json-patch+json", R"([{"op":"test","path":"/spec/workloadType","value":"inference"}])", 400,
       "does not apply"},
      {p, "application/json-patch+json", R"({"op":"add"})", 400, "array of operations"},
      {p, "application/strategic-merge-patch+json", R"({"spec":{}})", 415, "strategic merge patch"},
      {p, "text/plain", "x", 415, "a PATCH takes"},
      {p, "application/apply-patch+yaml", R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"p"}})",
       400, "fieldManager: required for apply"},
      {p + "?force=true", kMerge, "{}", 400, "only an apply takes it"},
      {pools + "/missing", kMerge, "{}", 404, "not found"},
      {p, kMerge, "{\"spec\":" + std::string(5000, '[') + std::string(5000, ']') + "}", 400, "nests deeper than 64"},
      {p + "?fieldManager=t", "application/apply-patch+yaml", std::string(5000, '[') + std::string(5000, ']'), 400, "nests deeper than 64"},
      {"/apis/gpuaas.io/v1/namespaces/vision/profiles/x", kMerge, "{}", 405, "profiles cannot be patched"},
      {"/apis/gpuaas.io/v1/namespaces/vision/nosuchthings/x", kMerge, "{}", 404, "nosuchthings"},
  };
  for (const Refusal& f : refused) {
    httplib::Result res = mia.Patch(f.path, f.body, f.type);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, f.status) << f.path << " " << f.body << ": " << res->body;
    EXPECT_NE(detail(res).find(f.says), std::string::npos) << f.path << " " << f.body << ": " << res->body;
  }
  // Tenancy: another project's pool is absent to a member; projects and rate cards are operators'.
  EXPECT_EQ(mia.Patch("/apis/gpuaas.io/v1/namespaces/other/gpupools/p", "{}", kMerge)->status, 404);
  EXPECT_EQ(mia.Patch("/apis/gpuaas.io/v1/projects/vision", R"({"spec":{"displayName":"mine"}})", kMerge)->status, 403);
  EXPECT_EQ(store_->Revision(), before) << "no refusal wrote anything";
  EXPECT_EQ(get()["metadata"]["resourceVersion"], rv);

  // status is the controllers': a patch of it is accepted and changes nothing of it.
  r = mia.Patch(p, R"({"status":{"approval":{"approved":true,"time":"2026-01-01T00:00:00Z"}},"spec":{"workloadType":"inference"}})",
                kMerge);
  ASSERT_EQ(r->status, 200) << r->body;
  cur = get();
  EXPECT_FALSE(cur["status"].contains("approval")) << cur.dump();
  EXPECT_EQ(cur["spec"]["workloadType"], "inference");
  // A JSON patch, with a test that holds; the current resourceVersion as a precondition.
  r = mia.Patch(p, R"([{"op":"test","path":"/spec/workloadType","value":"inference"},
                        {"op":"replace","path":"/spec/items/0/count","value":2}])",
                "application/json-patch+json");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(get()["spec"]["items"][0]["count"], 2);
  // Warn (the default) names an unknown field in a header and goes on.
  r = mia.Patch(p, R"({"spec":{"quotta":1}})", kMerge);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Warning"), "299 - \"unknown field \\\"spec.quotta\\\"\"");

  // Decided: the spec stays; labels still change.
  ASSERT_EQ(ops.Put(p + "/approval", R"({"approve":true})", "application/json")->status, 200);
  r = mia.Patch(p, R"({"spec":{"workloadType":"training"}})", kMerge);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(detail(r).find("a decided pool's spec cannot change"), std::string::npos) << r->body;
  EXPECT_EQ(mia.Patch(p, R"({"metadata":{"labels":{"tier":"gold"}}})", kMerge)->status, 200);

  // Operators patch projects (spec included, checked as on creation) and replace them.
  r = ops.Patch("/apis/gpuaas.io/v1/projects/vision", R"({"spec":{"quota":{"fullGpus":{"H200-SXM-141GB":4}}}})", kMerge);
  ASSERT_EQ(r->status, 200) << r->body;
  nlohmann::json project = nlohmann::json::parse(ops.Get("/apis/gpuaas.io/v1/projects/vision")->body);
  EXPECT_EQ(project["spec"]["quota"]["fullGpus"]["H200-SXM-141GB"], 4);
  project["spec"]["displayName"] = "Vision";
  r = ops.Put("/apis/gpuaas.io/v1/projects/vision", project.dump(), "application/json");
  ASSERT_EQ(r->status, 200) << r->body;
  project["metadata"]["resourceVersion"] = "1";
  r = ops.Put("/apis/gpuaas.io/v1/projects/vision", project.dump(), "application/json");
  EXPECT_EQ(r->status, 409) << "a stale replacement: " << r->body;
}

// Server-side apply through the API: an apply creates what is absent (201), a second manager's
// change of an owned field is a 409 Conflict in kube-apiserver's words, and force takes it over;
// a dry run of each stores nothing.
TEST_F(PolicyTest, ServerSideApplyCreatesReportsConflictsAndForces) {
  httplib::Client mia("127.0.0.1", server_->port());
  mia.set_bearer_token_auth(tokens_["member"]);
  const std::string p = "/apis/gpuaas.io/v1/namespaces/vision/gpupools/ssa";
  auto config = [](int count) {
    return fmt::format(R"(apiVersion: gpuaas.io/v1
kind: GpuPool
metadata:
  name: ssa
spec:
  items:
  - model: H200-SXM-141GB
    profile: full
    count: {}
)", count);
  };
  constexpr const char* kApply = "application/apply-patch+yaml";
  const int64_t start = store_->Revision();
  httplib::Result r = mia.Patch(p + "?fieldManager=team&dryRun=All", config(1), kApply);
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(store_->Revision(), start) << "a dry run stores nothing";
  r = mia.Patch(p + "?fieldManager=team", config(1), kApply);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string created = nlohmann::json::parse(r->body)["metadata"]["resourceVersion"];
  r = mia.Patch(p + "?fieldManager=team", config(1), kApply);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["metadata"]["resourceVersion"], created) << "the same apply writes nothing";
  r = mia.Patch(p + "?fieldManager=argocd&force=false", config(2), kApply);
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_NE(r->body.find(R"(Apply failed with 1 conflict: conflict with \"team\": .spec.items)"), std::string::npos)
      << r->body;
  r = mia.Patch(p + "?fieldManager=argocd&force=true", config(2), kApply);
  ASSERT_EQ(r->status, 200) << r->body;
  const nlohmann::json pool = nlohmann::json::parse(r->body);
  EXPECT_EQ(pool["spec"]["items"][0]["count"], 2);
  ASSERT_EQ(pool["metadata"]["managedFields"].size(), 1u) << pool.dump();
  EXPECT_EQ(pool["metadata"]["managedFields"][0]["manager"], "argocd");
  EXPECT_EQ(pool["metadata"]["managedFields"][0]["operation"], "Apply");
}

// fieldSelector, as kubectl's `delete --wait` and `wait` send it: by name and by namespace; a
// selector that contradicts the path, or a member's own project, selects nothing.
TEST_F(PolicyTest, FieldSelectorsPickByNameAndNamespace) {
  httplib::Client ops("127.0.0.1", server_->port());
  ops.set_bearer_token_auth(tokens_["operator"]);
  httplib::Client mia("127.0.0.1", server_->port());
  mia.set_bearer_token_auth(tokens_["member"]);
  const std::string api = "/apis/gpuaas.io/v1";
  for (const char* name : {"a", "b"}) {
    ASSERT_EQ(ops.Post(api + "/namespaces/vision/gpupools",
                       fmt::format(R"({{"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{{"name":"{}"}},
                                      "spec":{{"items":[{{"model":"H200-SXM-141GB","profile":"full","count":1}}]}}}})",
                                   name),
                       "application/json")
                  ->status,
              201);
  }
  auto names = [](httplib::Client& c, const std::string& path) {
    httplib::Result r = c.Get(path);
    std::vector<std::string> out;
    if (!r || r->status != 200) return std::vector<std::string>{r ? "status " + std::to_string(r->status) : "none"};
    const nlohmann::json list = nlohmann::json::parse(r->body);
    for (const auto& item : list["items"]) out.push_back(item["metadata"]["name"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(ops, api + "/gpupools?fieldSelector=metadata.name%3Da"), V{"a"});
  EXPECT_EQ(names(ops, api + "/gpupools?fieldSelector=metadata.namespace%3Dvision,metadata.name%3D%3Db"), V{"b"});
  EXPECT_EQ(names(ops, api + "/gpupools?fieldSelector=metadata.namespace%3Dother"), V{});
  EXPECT_EQ(names(ops, api + "/namespaces/vision/gpupools?fieldSelector=metadata.namespace%3Dother"), V{})
      << "the path says vision, the selector other";
  EXPECT_EQ(names(ops, api + "/gpupools?fieldSelector=spec.cluster%3Dx"), V{"status 400"});
  EXPECT_EQ(names(ops, api + "/gpupools?fieldSelector=metadata.name!%3Da"), V{"status 400"});
  EXPECT_EQ(names(mia, api + "/projects?fieldSelector=metadata.name%3Dvision"), V{"vision"});
  EXPECT_EQ(names(mia, api + "/projects?fieldSelector=metadata.name%3Dother"), V{}) << "only its own project";
  EXPECT_EQ(names(mia, api + "/gpupools?fieldSelector=metadata.namespace%3Dother"), V{});
}

// ?dryRun=All as kube-apiserver answers it: each write of the pool service runs whole, checks,
// quota and audit included, and is answered as it would be; nothing is stored. A write that
// takes no dry run refuses it rather than doing the write.
TEST_F(PolicyTest, ADryRunAnswersAsTheWriteWouldAndStoresNothing) {
  httplib::Client c("127.0.0.1", server_->port());
  c.set_bearer_token_auth(tokens_["operator"]);
  const std::string api = "/apis/gpuaas.io/v1";
  const std::string pools = api + "/namespaces/vision/gpupools";
  const std::string pool = R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"NAME"},)"
                           R"("spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":COUNT}]}})";
  auto pool_body = [&](const std::string& name, int count) {
    std::string b = pool;
    b.replace(b.find("NAME"), 4, name);
    b.replace(b.find("COUNT"), 5, std::to_string(count));
    return b;
  };
  ASSERT_EQ(c.Post(pools, pool_body("real", 1), "application/json")->status, 201);
  const int64_t before = store_->Revision();

  httplib::Result created = c.Post(pools + "?dryRun=All", pool_body("dry", 2), "application/json");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 201) << created->body;
  const nlohmann::json dry = nlohmann::json::parse(created->body);
  EXPECT_EQ(dry["metadata"]["name"], "dry");
  EXPECT_FALSE(dry["metadata"].contains("resourceVersion")) << "nothing was stored";
  EXPECT_EQ(c.Get(pools + "/dry")->status, 404);
  // Checks answer as they would: more than the fleet could ever hold, a name taken.
  httplib::Result huge = c.Post(pools + "?dryRun=All", pool_body("huge", 1000), "application/json");
  httplib::Result huge_real = c.Post(pools, pool_body("huge", 1000), "application/json");
  ASSERT_TRUE(huge && huge_real);
  EXPECT_EQ(huge->status, huge_real->status);
  EXPECT_GE(huge->status, 400);
  EXPECT_EQ(c.Post(pools + "?dryRun=All", pool_body("real", 1), "application/json")->status, 409);
  // An approval, a release and a deletion are answered, and the pool is as it was.
  httplib::Result approved =
      c.Put(pools + "/real/approval?dryRun=All", R"({"approve":true,"reason":"ok"})", "application/json");
  ASSERT_TRUE(approved);
  EXPECT_EQ(approved->status, 200) << approved->body;
  EXPECT_EQ(nlohmann::json::parse(approved->body)["status"]["approval"]["approved"], true);
  httplib::Result deleted = c.Delete(pools + "/real?dryRun=All");
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200) << deleted->body;
  httplib::Result project = c.Post(api + "/projects?dryRun=All",
                                   R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"dry"}})",
                                   "application/json");
  ASSERT_TRUE(project);
  EXPECT_EQ(project->status, 201) << project->body;
  EXPECT_EQ(store_->Revision(), before) << "no dry run stores anything, not even its audit event";
  const nlohmann::json real = nlohmann::json::parse(c.Get(pools + "/real")->body);
  EXPECT_FALSE(real["status"].contains("approval")) << real.dump();

  // A write that takes no dry run refuses one, and does nothing; a dryRun that is not All is refused.
  httplib::Result token = c.Post("/api/v1/tokens?dryRun=All", R"({"user":"dry","role":"operator"})", "application/json");
  ASSERT_TRUE(token);
  EXPECT_EQ(token->status, 400) << token->body;
  EXPECT_NE(token->body.find("takes no dry run"), std::string::npos) << token->body;
  httplib::Result bad = c.Post(pools + "?dryRun=Yes", pool_body("bad", 1), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(store_->Revision(), before);
}

}  // namespace
}  // namespace gpuaas::api
