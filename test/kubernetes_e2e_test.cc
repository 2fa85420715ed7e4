// `gpuaas server --kubernetes NAME=KUBECONFIG` against the fake API server: the binary reads a
// kubeconfig as kubectl would, and the GPU nodes it lists and watches appear in its API.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process.h"
#include "test/fake_kube_apiserver.h"
#include "test/test_certs.h"

namespace gpuaas::testing {
namespace {

using nlohmann::json;

std::string Node(const std::string& name, int gpus) {
  return json{{"metadata",
               {{"name", name},
                {"labels",
                 {{"nvidia.com/gpu.product", "NVIDIA-H200"}, {"nvidia.com/gpu.count", std::to_string(gpus)},
                  {"nvidia.com/gpu.memory", "143771"}}}}},
              {"status",
               {{"capacity", {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}}
      .dump();
}

// The server's GPUs of cluster `cluster`, by name.
std::set<std::string> Gpus(httplib::Client& c, const std::string& cluster) {
  std::set<std::string> out;
  auto r = c.Get("/apis/gpuaas.io/v1/gpucapacities?labelSelector=gpuaas.io/cluster%3D" + cluster);
  if (!r || r->status != 200) return out;
  const json list = json::parse(r->body);
  for (const json& item : list["items"]) out.insert(item["metadata"]["name"].get<std::string>());
  return out;
}

TEST(KubernetesE2e, TheServerManagesAClusterNamedByAKubeconfig) {
  char tmpl[] = "/tmp/gpuaas-k8s-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  FakeKubeApiServer api("s3cret");
  api.Start();
  api.Put("/api/v1/nodes", "Node", Node("h200-a", 8));
  // A kubeconfig with two contexts; the one named after '#' is used, its token read from a file
  // relative to the kubeconfig.
  std::ofstream(dir + "/token") << "s3cret";
  std::ofstream(dir + "/kubeconfig") << "apiVersion: v1\nkind: Config\ncurrent-context: other\n"
                                     << "clusters:\n- name: lab\n  cluster:\n    server: " << api.url()
                                     << "\n- name: elsewhere\n  cluster:\n    server: http://127.0.0.1:1\n"
                                     << "users:\n- name: ops\n  user:\n    tokenFile: token\n"
                                     << "contexts:\n- name: lab-ops\n  context:\n    cluster: lab\n    user: ops\n"
                                     << "- name: other\n  context:\n    cluster: elsewhere\n    user: ops\n";
  ServerProcess server;
  ASSERT_TRUE(server.Start("--insecure-no-auth --db sqlite::memory: --kubernetes lab=" + dir + "/kubeconfig#lab-ops",
                           dir + "/server.log"))
      << server.Log();
  httplib::Client c(server.Url());
  auto wait_for = [&](size_t n) {
    for (int i = 0; i < 400 && Gpus(c, "lab").size() != n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return Gpus(c, "lab").size();
  };
  EXPECT_EQ(wait_for(8), 8u) << server.Log();
  api.Put("/api/v1/nodes", "Node", Node("h200-b", 4));
  EXPECT_EQ(wait_for(12), 12u) << server.Log();
  auto cl = c.Get("/apis/gpuaas.io/v1/clusters/lab");
  ASSERT_TRUE(cl);
  EXPECT_EQ(json::parse(cl->body)["spec"]["driver"], "kubernetes") << cl->body;
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  api.Stop();

  // A flag that names nothing usable stops the server at once, saying why.
  RunResult bad = RunGpuaas("server --insecure-no-auth --db sqlite::memory: --kubernetes lab=" + dir + "/kubeconfig#nope");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("nope"), std::string::npos) << bad.out;
  bad = RunGpuaas("server --insecure-no-auth --db sqlite::memory: --kubernetes lab");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("NAME=KUBECONFIG"), std::string::npos) << bad.out;
  std::filesystem::remove_all(dir);
}

// `gpuaas cluster add` from an operator's shell: the kubeconfig is read there (its token file and
// CA file too) and the running server follows the cluster from then on, across a restart; members
// may not register clusters; `cluster remove` ends it.
TEST(KubernetesE2e, AClusterIsOneCommandAway) {
  char tmpl[] = "/tmp/gpuaas-k8s-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  FakeKubeApiServer api("s3cret");
  api.Start();
  api.Put("/api/v1/nodes", "Node", Node("h200-a", 8));
  std::ofstream(dir + "/token") << "s3cret\n";
  std::ofstream(dir + "/kubeconfig") << "apiVersion: v1\nkind: Config\ncurrent-context: lab-ops\n"
                                     << "clusters:\n- name: lab\n  cluster:\n    server: " << api.url() << "\n"
                                     << "users:\n- name: ops\n  user:\n    tokenFile: token\n"
                                     << "contexts:\n- name: lab-ops\n  context:\n    cluster: lab\n    user: ops\n";
  std::ofstream(dir + "/tokens") << "operator-t0ken-0123456789,alice,operator\nmember-t0ken-0123456789,bob,member,demo\n";
  const std::string db = "sqlite:" + dir + "/gpuaas.db";
  ServerProcess server;
  ASSERT_TRUE(server.Start("--db " + db + " --token-auth-file " + dir + "/tokens", dir + "/server.log")) << server.Log();
  const std::string as_op = " --server " + server.Url() + " --token operator-t0ken-0123456789";
  httplib::Client c(server.Url());
  c.set_bearer_token_auth("operator-t0ken-0123456789");
  auto wait_for = [&](size_t n) {
    for (int i = 0; i < 400 && Gpus(c, "lab").size() != n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return Gpus(c, "lab").size();
  };

  RunResult r = RunGpuaas("cluster add lab --kubeconfig " + dir + "/kubeconfig --region kr-central --server " +
                          server.Url() + " --token member-t0ken-0123456789");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Forbidden"), std::string::npos) << r.out;
  r = RunGpuaas("cluster add lab --kubeconfig " + dir + "/nowhere" + as_op);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("nowhere"), std::string::npos) << r.out;
  // KUBECONFIG, as kubectl reads it.
  r = RunShell("KUBECONFIG=" + dir + "/kubeconfig " + Bin() + " cluster add lab --region kr-central" + as_op);
  ASSERT_EQ(r.code, 0) << r.out << server.Log();
  EXPECT_NE(r.out.find("registered"), std::string::npos) << r.out;
  EXPECT_EQ(wait_for(8), 8u) << server.Log();
  r = RunGpuaas("cluster list" + as_op);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("lab"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("registered"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(api.url()), std::string::npos) << r.out;
  r = RunGpuaas("cluster list -o json" + as_op);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("s3cret"), std::string::npos) << "no credential is ever shown: " << r.out;
  EXPECT_EQ(r.out.find("kubeconfig"), std::string::npos) << r.out;
  const json listed = json::parse(r.out);
  ASSERT_EQ(listed["items"].size(), 1u) << r.out;
  EXPECT_EQ(listed["items"][0]["gpus"], 8);
  EXPECT_EQ(listed["items"][0]["reachable"], true);
  EXPECT_EQ(listed["items"][0]["region"], "kr-central");
  EXPECT_EQ(listed["items"][0]["registeredBy"], "alice");
  // The generic API does not serve registrations either.
  auto hidden = c.Get("/apis/gpuaas.io/v1/clusterregistrations");
  ASSERT_TRUE(hidden);
  EXPECT_EQ(hidden->status, 404) << hidden->body;

  // A restart keeps the registration (the token was copied when it was added).
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  api.Put("/api/v1/nodes", "Node", Node("h200-b", 4));
  ASSERT_TRUE(server.Start("--db " + db + " --token-auth-file " + dir + "/tokens", dir + "/server.log")) << server.Log();
  httplib::Client c2(server.Url());
  c2.set_bearer_token_auth("operator-t0ken-0123456789");
  for (int i = 0; i < 400 && Gpus(c2, "lab").size() != 12; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(Gpus(c2, "lab").size(), 12u) << server.Log();

  const std::string as_op2 = " --server " + server.Url() + " --token operator-t0ken-0123456789";
  r = RunGpuaas("cluster add lab --kubeconfig " + dir + "/kubeconfig" + as_op2);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("already registered"), std::string::npos) << r.out;
  r = RunGpuaas("cluster remove lab" + as_op2);
  ASSERT_EQ(r.code, 0) << r.out;
  for (int i = 0; i < 400 && !Gpus(c2, "lab").empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(Gpus(c2, "lab").empty()) << server.Log();
  r = RunGpuaas("cluster remove lab" + as_op2);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("not registered"), std::string::npos) << r.out;
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  api.Stop();
  std::filesystem::remove_all(dir);
}

// `gpuaas server --webhook-listen`: the pod admission webhook over HTTPS, as an API server calls
// it, deciding from the pools the server holds (the demo's `training` pool).
TEST(KubernetesE2e, TheAdmissionWebhookSteersAProjectsGpuPodsOverTls) {
  char tmpl[] = "/tmp/gpuaas-webhook-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const TestPki pki = MakeTestPki();
  std::ofstream(dir + "/tls.crt") << pki.server.cert_pem;
  std::ofstream(dir + "/tls.key") << pki.server.key_pem;
  std::ofstream(dir + "/ca.crt") << pki.ca.cert_pem;
  ServerProcess server;
  ASSERT_TRUE(server.Start("--demo --db sqlite:" + dir + "/gpuaas.db --webhook-listen 127.0.0.1:0 --webhook-tls-cert " +
                               dir + "/tls.crt --webhook-tls-key " + dir + "/tls.key",
                           dir + "/server.log"))
      << server.Log();
  std::smatch m;
  const std::string log = server.Log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(GPUAAS_TOKEN=(\S+))"))) << log;
  const std::string token = m[1];
  std::smatch w;
  ASSERT_TRUE(std::regex_search(log, w, std::regex(R"(admission webhook on https://127\.0\.0\.1:(\d+))"))) << log;
  const int port = std::stoi(w[1]);

  // The demo's training pool: where its devices are.
  httplib::Client api(server.Url());
  api.set_bearer_token_auth(token);
  json pool;
  for (int i = 0; i < 200; ++i) {
    auto r = api.Get("/apis/gpuaas.io/v1/namespaces/demo/gpupools/training");
    if (r && r->status == 200) pool = json::parse(r->body);
    if (pool.contains("status") && pool["status"].contains("allocation") && !pool["status"]["allocation"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(pool["status"]["allocation"].empty()) << pool.dump();
  const std::string cluster = pool["status"]["allocation"][0]["cluster"];
  std::set<std::string> nodes;
  for (const json& d : pool["status"]["allocation"]) {
    const std::string node = d["node"];
    nodes.insert(node.substr(node.find('.') + 1));
  }

  auto review = [](const std::string& resource) {
    const json container = {{"name", "c"}, {"resources", {{"limits", {{resource, "1"}}}}}};
    const json pod = {{"metadata", {{"name", "train-0"}, {"namespace", "demo"}}},
                      {"spec", {{"containers", json::array({container})}}}};
    return json{{"apiVersion", "admission.k8s.io/v1"},
                {"kind", "AdmissionReview"},
                {"request", {{"uid", "u-1"}, {"namespace", "demo"}, {"operation", "CREATE"}, {"object", pod}}}}
        .dump();
  };
  httplib::SSLClient hook("127.0.0.1", port);
  hook.set_ca_cert_path((dir + "/ca.crt").c_str());
  hook.enable_server_certificate_verification(true);
  auto r = hook.Post("/admission/" + cluster + "/mutate-pods", review("nvidia.com/gpu"), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  json answer = json::parse(r->body);
  EXPECT_EQ(answer["kind"], "AdmissionReview");
  ASSERT_TRUE(answer["response"]["allowed"].get<bool>()) << r->body;
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch));
  const json values = json::parse(patch)[0]["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                                         ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"];
  for (const json& v : values) EXPECT_TRUE(nodes.contains(v.get<std::string>())) << v << " is not a node of the pool";
  EXPECT_FALSE(values.empty());

  r = hook.Post("/admission/" + cluster + "/mutate-pods", review("nvidia.com/mig-3g.71gb"), "application/json");
  ASSERT_TRUE(r);
  answer = json::parse(r->body);
  EXPECT_FALSE(answer["response"]["allowed"].get<bool>()) << r->body;
  EXPECT_NE(answer["response"]["status"]["message"].get<std::string>().find("holds no nvidia.com/mig-3g.71gb"),
            std::string::npos);
  // ResourceClaims (DRA) have their own routes: a claim tolerating every taint is refused there.
  const json claim = {{"metadata", {{"name", "c"}, {"namespace", "demo"}}},
                      {"spec",
                       {{"devices",
                         {{"requests", json::array({{{"name", "gpu"},
                                                     {"exactly",
                                                      {{"deviceClassName", "gpu.nvidia.com"},
                                                       {"tolerations", json::array({{{"operator", "Exists"}}})}}}}})}}}}}};
  const json claim_review = {{"apiVersion", "admission.k8s.io/v1"},
                             {"kind", "AdmissionReview"},
                             {"request", {{"uid", "u-2"}, {"namespace", "demo"}, {"operation", "CREATE"}, {"object", claim}}}};
  r = hook.Post("/admission/" + cluster + "/validate-claims", claim_review.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  answer = json::parse(r->body);
  EXPECT_FALSE(answer["response"]["allowed"].get<bool>()) << r->body;
  EXPECT_EQ(answer["response"]["uid"], "u-2");
  r = hook.Post("/admission/nowhere/mutate-pods", review("nvidia.com/gpu"), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = hook.Post("/admission/" + cluster + "/mutate-pods", "{\"kind\": \"Pod\"}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // Only over TLS, with the certificate given: a client trusting another authority is refused.
  const TestPki other = MakeTestPki();
  std::ofstream(dir + "/other-ca.crt") << other.ca.cert_pem;
  httplib::SSLClient stranger("127.0.0.1", port);
  stranger.set_ca_cert_path((dir + "/other-ca.crt").c_str());
  stranger.enable_server_certificate_verification(true);
  EXPECT_FALSE(stranger.Post("/admission/" + cluster + "/mutate-pods", review("nvidia.com/gpu"), "application/json"));

  EXPECT_EQ(server.Stop(), 0) << server.Log();
  // Without its certificate the webhook does not start, and says so.
  RunResult bad = RunGpuaas("server --insecure-no-auth --db sqlite::memory: --webhook-listen 127.0.0.1:0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("--webhook-tls-cert"), std::string::npos) << bad.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
