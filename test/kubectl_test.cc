// kubectl (Debian's kubernetes-client, installed by scripts/install-deps.sh; $KUBECTL names
// another) lists, gets and watches gpuaas objects from a running server: discovery, Tables with
// the columns of `gpuaas get`, short names, the "gpuaas" category, -A and -w.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;

std::string FindKubectl() {
  if (const char* k = std::getenv("KUBECTL"); k != nullptr && *k != '\0') return k;
  for (const char* p : {"/usr/bin/kubectl", "/usr/local/bin/kubectl"}) {
    if (fs::exists(p)) return p;
  }
  return "";
}

int CountLines(const std::string& out, const std::string& prefix) {
  int n = 0;
  for (const std::string& l : Lines(out)) n += l.starts_with(prefix) ? 1 : 0;
  return n;
}

TEST(Kubectl, ListsGetsAndWatchesGpuaasObjects) {
  const std::string kubectl = FindKubectl();
  if (kubectl.empty()) GTEST_SKIP() << "kubectl is not installed (scripts/install-deps.sh installs kubernetes-client)";
  char tmpl[] = "/tmp/gpuaas-kubectl-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  // kubectl sends a bearer token over TLS only; the server has no TLS yet, so it runs open on
  // loopback here.
  ServerProcess server;
  ASSERT_TRUE(server.Start("--demo --insecure-no-auth --db sqlite::memory:", dir + "/server.log")) << server.Log();
  const std::string k = kubectl + " --server " + server.Url() + " --cache-dir " + dir + "/cache";

  RunResult r = RunShell(k + " api-resources --api-group=gpuaas.io");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(gpupools\s+gp,pool\s+(gpuaas\.io/v1\s+)?true\s+GpuPool)"))) << r.out;

  r = RunShell(k + " get gpucapacities,nodecapacities,gpupools -A");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(CountLines(r.out, "gpucapacity.gpuaas.io/gpu-"), 144) << r.out.substr(0, 2000);
  EXPECT_EQ(CountLines(r.out, "nodecapacity.gpuaas.io/"), 18);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(NAME\s+NODE\s+INDEX\s+MODEL\s+MIG\s+INSTANCES\s+HEALTH)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(1g\.10gb@0 1g\.10gb@1)"))) << "MIG instances as gpuaas get shows them";

  r = RunShell(k + " get clusters alpha");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(alpha\s+simulated\s+us-east\s+10\s+80\s+True)"))) << r.out;
  r = RunShell(k + " get gc -o name");
  EXPECT_EQ(CountLines(r.out, "gpucapacity.gpuaas.io/"), 144);
  r = RunShell(k + " get clusters missing");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("not found"), std::string::npos) << r.out;

  // A project and a pool request through the API, seen by kubectl: in its namespace with -A, and
  // arriving on a watch.
  httplib::Client api(server.Url());
  ASSERT_EQ(api.Post("/apis/gpuaas.io/v1/projects",
                     R"({"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"vision"}})",
                     "application/json")
                ->status,
            201);
  Background watch;
  ASSERT_TRUE(watch.Start(k + " get gpupools -A -w", dir + "/watch.log", R"(.*)", 30));
  // Created before the watch lists or after: either way the row shows.
  ASSERT_EQ(api.Post("/apis/gpuaas.io/v1/namespaces/vision/gpupools",
                     R"({"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"train"},
                         "spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":2}]}})",
                     "application/json")
                ->status,
            201);
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {
    seen = std::regex_search(watch.Log(), std::regex(R"(vision\s+train\s+vision\s+2xH200-SXM-141GB/full)"));
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(seen) << watch.Log();
  EXPECT_EQ(CountLines(watch.Log(), "NAMESPACE"), 1) << "headers once: " << watch.Log();
  watch.Stop();

  r = RunShell(k + " get gpuaas");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cluster.gpuaas.io/alpha"), std::string::npos) << "the category lists every kind";
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
