// `gpuaas server --kubernetes NAME=KUBECONFIG` against the fake API server: the binary reads a
// kubeconfig as kubectl would, and the GPU nodes it lists and watches appear in its API.
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process.h"
#include "test/fake_kube_apiserver.h"

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

}  // namespace
}  // namespace gpuaas::testing
