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
#include "test/test_certs.h"

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
  // Open on loopback here; the test below signs in over TLS with a token.
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

// A folder with a server certificate (tls.crt, tls.key) and its authority (ca.crt), and a demo
// server started over TLS with `tokens` (lines of --token-auth-file); returns the folder.
std::string StartTlsDemo(Background& server, const std::string& name, const std::string& tokens) {
  std::string tmpl = "/tmp/gpuaas-" + name + "-XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  const TestPki pki = MakeTestPki();
  std::ofstream(dir + "/tls.crt") << pki.server.cert_pem;
  std::ofstream(dir + "/tls.key") << pki.server.key_pem;
  std::ofstream(dir + "/ca.crt") << pki.ca.cert_pem;
  std::ofstream(dir + "/tokens") << tokens;
  EXPECT_TRUE(server.Start(Bin() + " server --listen 127.0.0.1:0 --demo --db sqlite::memory: --token-auth-file " + dir +
                               "/tokens --tls-cert " + dir + "/tls.crt --tls-key " + dir + "/tls.key",
                           dir + "/server.log", R"(serving https://127\.0\.0\.1:(\d+))"))
      << server.Log();
  return dir;
}

// kubectl as an operator runs it: the server's certificate checked against the authority given,
// a bearer token (which kubectl sends over TLS only); a wrong token and an untrusted server are
// refused.
TEST(Kubectl, SignsInWithATokenOverTls) {
  const std::string kubectl = FindKubectl();
  if (kubectl.empty()) GTEST_SKIP() << "kubectl is not installed (scripts/install-deps.sh installs kubernetes-client)";
  Background server;
  const std::string dir = StartTlsDemo(server, "kubectl-tls", "operator-t0ken-0123456789,olive,operator\n");
  ASSERT_FALSE(server.match().empty());
  std::ofstream(dir + "/other-ca.crt") << MakeTestPki().ca.cert_pem;
  const std::string url = "https://127.0.0.1:" + server.match();
  const std::string k = kubectl + " --server " + url + " --cache-dir " + dir + "/cache";

  RunResult r = RunShell(k + " --certificate-authority " + dir + "/ca.crt --token operator-t0ken-0123456789 get gc");
  ASSERT_EQ(r.code, 0) << r.out << server.Log();
  EXPECT_EQ(CountLines(r.out, "gpu-"), 144) << r.out.substr(0, 2000);
  r = RunShell(k + " --certificate-authority " + dir + "/ca.crt --token not-the-token-0123456789 get gc");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("must be logged in"), std::string::npos) << r.out;  // kubectl's words for a 401
  r = RunShell(k + " --certificate-authority " + dir + "/other-ca.crt --token operator-t0ken-0123456789 get gc");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("certificate"), std::string::npos) << r.out;
  // Plain HTTP to the TLS port gets nothing.
  httplib::Client plain("127.0.0.1", std::stoi(server.match()));
  plain.set_connection_timeout(2);
  plain.set_read_timeout(2);
  auto res = plain.Get("/healthz");
  EXPECT_TRUE(!res || res->status != 200);
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  fs::remove_all(dir);
}

// Declarative management as a platform team runs it: kubectl over TLS with bearer tokens,
// validation on (no --validate=false), against files as they would sit in Git. explain, create,
// apply twice (the second writes nothing), server-side apply by two field managers with the
// conflict reported and a forced takeover, label, annotate, patch (merge and JSON), a server dry
// run that stores nothing, strict field validation, and the delete of an approved pool, which
// releases it (its meter ends) before it goes; a member of another project reads and writes none
// of it.
TEST(Kubectl, ManagesProjectsAndPoolsDeclarativelyOverTls) {
  const std::string kubectl = FindKubectl();
  if (kubectl.empty()) GTEST_SKIP() << "kubectl is not installed (scripts/install-deps.sh installs kubernetes-client)";
  Background server;
  const std::string dir = StartTlsDemo(server, "kubectl-apply",
                                       "operator-t0ken-0123456789,olive,operator\n"
                                       "gitops-t0ken-0123456789,gina,member,gitops\n"
                                       "other-t0ken-0123456789,otto,member,other\n");
  ASSERT_FALSE(server.match().empty());
  const std::string url = "https://127.0.0.1:" + server.match();
  auto as = [&](const std::string& token) {
    return kubectl + " --server " + url + " --cache-dir " + dir + "/cache-" + token.substr(0, 5) +
           " --certificate-authority " + dir + "/ca.crt --token " + token;
  };
  const std::string ops = as("operator-t0ken-0123456789");
  const std::string gina = as("gitops-t0ken-0123456789");
  const std::string otto = as("other-t0ken-0123456789");
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  auto rv = [&](const std::string& who, const std::string& what) {
    return RunShell(who + " get " + what + " -o jsonpath='{.metadata.resourceVersion}'").out;
  };

  // explain: the schema, with its descriptions, from the decoder's own definition.
  RunResult r = RunShell(ops + " explain gpupools.spec.items");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(count\s+<integer>\s+-required-)"))) << r.out;
  EXPECT_NE(r.out.find("MIG profile"), std::string::npos) << r.out;

  r = RunShell(ops + " create -f " + file("projects.yaml", R"(apiVersion: gpuaas.io/v1
kind: Project
metadata:
  name: gitops
spec:
  displayName: GitOps team
---
apiVersion: gpuaas.io/v1
kind: Project
metadata:
  name: other
)"));
  ASSERT_EQ(r.code, 0) << r.out << server.Log();
  EXPECT_NE(r.out.find("project.gpuaas.io/gitops created"), std::string::npos) << r.out;

  // The example repository of deploy/gitops, as Argo CD applies it (server-side, its own field
  // manager): projects, then their pools; again, and nothing is written.
  const std::string repo = fs::current_path().string() + "/deploy/gitops";
  const std::string sync = ops + " apply --server-side --field-manager=argocd-controller -R -f " + repo +
                           "/projects -f " + repo + "/pools";
  r = RunShell(sync);
  ASSERT_EQ(r.code, 0) << r.out << server.Log();
  EXPECT_EQ(CountLines(r.out, "project.gpuaas.io/"), 2) << r.out;
  EXPECT_EQ(CountLines(r.out, "gpupool.gpuaas.io/"), 2) << r.out;
  const std::string synced = rv(ops, "gpupool -n vision train") + rv(ops, "project nlp");
  r = RunShell(sync);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(rv(ops, "gpupool -n vision train") + rv(ops, "project nlp"), synced) << "a second sync writes nothing";

  // Client-side apply, twice: the second finds nothing to change and writes nothing.
  const std::string pool = file("pool.yaml", R"(apiVersion: gpuaas.io/v1
kind: GpuPool
metadata:
  name: train
  namespace: gitops
  labels:
    team: vision
spec:
  items:
  - model: H200-SXM-141GB
    profile: full
    count: 1
)");
  r = RunShell(gina + " apply -f " + pool);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gpupool.gpuaas.io/train created"), std::string::npos) << r.out;
  const std::string first = rv(gina, "gpupool -n gitops train");
  r = RunShell(gina + " apply -f " + pool);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gpupool.gpuaas.io/train unchanged"), std::string::npos) << r.out;
  EXPECT_EQ(rv(gina, "gpupool -n gitops train"), first);

  // label, annotate, and patches of both kinds on the request (not decided yet, so it may change).
  EXPECT_EQ(RunShell(gina + " label gpupool -n gitops train tier=gold").code, 0);
  EXPECT_EQ(RunShell(gina + " annotate gpupool -n gitops train note=for-the-demo").code, 0);
  r = RunShell(gina + " patch gpupool -n gitops train --type merge -p '{\"spec\":{\"workloadType\":\"inference\"}}'");
  EXPECT_EQ(r.code, 0) << r.out;
  r = RunShell(gina + " patch gpupool -n gitops train --type json -p "
                      "'[{\"op\":\"replace\",\"path\":\"/spec/items/0/count\",\"value\":2}]'");
  EXPECT_EQ(r.code, 0) << r.out;
  r = RunShell(gina + " get gpupool -n gitops train -o jsonpath='{.metadata.labels.tier} {.metadata.annotations.note} "
                      "{.spec.workloadType} {.spec.items[0].count}'");
  EXPECT_EQ(r.out, "gold for-the-demo inference 2");

  // Server-side apply by two managers: the second's change of a field the first owns is a
  // conflict, until it forces the takeover.
  const std::string serve = R"(apiVersion: gpuaas.io/v1
kind: GpuPool
metadata:
  name: serve
  namespace: gitops
spec:
  items:
  - model: H200-SXM-141GB
    profile: full
    count: COUNT
)";
  r = RunShell(gina + " apply --server-side --field-manager=team -f " +
               file("serve.yaml", std::regex_replace(serve, std::regex("COUNT"), "1")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("serverside-applied"), std::string::npos) << r.out;
  const std::string argo = file("serve-argo.yaml", std::regex_replace(serve, std::regex("COUNT"), "2"));
  r = RunShell(gina + " apply --server-side --field-manager=argocd -f " + argo);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Apply failed with 1 conflict: conflict with \"team\": .spec.items"), std::string::npos) << r.out;
  r = RunShell(gina + " apply --server-side --field-manager=argocd --force-conflicts -f " + argo);
  ASSERT_EQ(r.code, 0) << r.out;
  r = RunShell(gina + " get gpupool -n gitops serve --show-managed-fields -o json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"re("count": 2)re"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"re("f:items": \{\}[\s\S]*"manager": "argocd")re"))) << r.out;

  // Field validation: kubectl asks for Strict, so a typo is refused and names the field.
  r = RunShell(gina + " apply -f " + file("typo.yaml", R"(apiVersion: gpuaas.io/v1
kind: GpuPool
metadata:
  name: typo
  namespace: gitops
spec:
  quotta: 3
  items:
  - model: H200-SXM-141GB
    profile: full
    count: 1
)"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("strict decoding error: unknown field \"spec.quotta\""), std::string::npos) << r.out;
  r = RunShell(gina + " apply --validate=warn -f " + dir + "/typo.yaml --dry-run=server");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Warning: unknown field \"spec.quotta\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(server dry run)"), std::string::npos) << r.out;
  EXPECT_NE(RunShell(gina + " get gpupool -n gitops typo").code, 0) << "a dry run stores nothing";

  // Another project's member sees none of it and changes none of it.
  const std::string untouched = rv(gina, "gpupool -n gitops serve") + rv(gina, "gpupool -n gitops train");
  r = RunShell(otto + " get gpupools -A");
  EXPECT_EQ(r.out.find("train"), std::string::npos) << r.out;
  EXPECT_NE(RunShell(otto + " get gpupool -n gitops train").code, 0);
  EXPECT_NE(RunShell(otto + " label gpupool -n gitops train owner=otto").code, 0);
  EXPECT_NE(RunShell(otto + " apply --server-side --field-manager=otto -f " + argo + " --force-conflicts").code, 0);
  EXPECT_NE(RunShell(otto + " delete gpupool -n gitops train --wait=false").code, 0);
  EXPECT_EQ(rv(gina, "gpupool -n gitops serve") + rv(gina, "gpupool -n gitops train"), untouched);
  r = RunShell(gina + " get gpupool -n gitops train -o jsonpath='{.metadata.labels}'");
  EXPECT_EQ(r.out.find("otto"), std::string::npos) << r.out;

  // The delete of an approved pool is its release: metered to then, kept until its devices are
  // free, then gone (kubectl waits for that).
  httplib::SSLClient api("127.0.0.1", std::stoi(server.match()));
  api.set_ca_cert_path(dir + "/ca.crt");
  api.set_bearer_token_auth("operator-t0ken-0123456789");
  auto approved = api.Put("/apis/gpuaas.io/v1/namespaces/gitops/gpupools/train/approval", R"({"approve":true})",
                          "application/json");
  ASSERT_TRUE(approved);
  ASSERT_EQ(approved->status, 200) << approved->body;
  r = RunShell(gina + " wait --for=condition=Ready gpupool/train -n gitops --timeout=60s");
  ASSERT_EQ(r.code, 0) << r.out;
  r = RunShell(gina + " patch gpupool -n gitops train --type merge -p '{\"spec\":{\"items\":[]}}'");
  EXPECT_NE(r.code, 0) << "a decided pool's spec stays";
  EXPECT_NE(r.out.find("cannot change"), std::string::npos) << r.out;
  r = RunShell(gina + " delete gpupool -n gitops train --timeout=60s");
  ASSERT_EQ(r.code, 0) << r.out << server.Log();
  EXPECT_NE(r.out.find("gpupool.gpuaas.io \"train\" deleted"), std::string::npos) << r.out;
  EXPECT_NE(RunShell(gina + " get gpupool -n gitops train").code, 0) << "gone once released";
  r = RunShell(ops + " get usagerecords -n gitops -o jsonpath='{range .items[*]}{.spec.pool} {.spec.end}{\"\\n\"}{end}'");
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(train \d{4}-\d\d-\d\dT)"))) << "its meter ended: " << r.out;
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  fs::remove_all(dir);
}

// Registered as an aggregated APIService, the server is called by kube-apiserver's front proxy:
// a client certificate from the requestheader CA and the user in X-Remote-User/X-Remote-Group.
// The aggregator's availability check (GET /apis/gpuaas.io/v1 as system:kube-aggregator) gets
// 200; groups give roles; the same headers without the proxy's certificate are worth nothing,
// and a certificate from another authority is refused at the handshake.
TEST(AggregationLayer, FrontProxyCallersAreTheUsersItVouchesFor) {
  char tmpl[] = "/tmp/gpuaas-aggregated-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const TestPki pki = MakeTestPki();
  const TestPki front = MakeTestPki("front-proxy-client");
  const TestPki stranger = MakeTestPki("front-proxy-client");  // the same name, another authority
  std::ofstream(dir + "/tls.crt") << pki.server.cert_pem;
  std::ofstream(dir + "/tls.key") << pki.server.key_pem;
  std::ofstream(dir + "/ca.crt") << pki.ca.cert_pem;
  std::ofstream(dir + "/front-ca.crt") << front.ca.cert_pem;
  std::ofstream(dir + "/front.crt") << front.client.cert_pem;
  std::ofstream(dir + "/front.key") << front.client.key_pem;
  std::ofstream(dir + "/stranger.crt") << stranger.client.cert_pem;
  std::ofstream(dir + "/stranger.key") << stranger.client.key_pem;
  std::ofstream(dir + "/tokens") << "operator-t0ken-0123456789,olive,operator\n";
  const std::string base = Bin() + " server --listen 127.0.0.1:0 --demo --db sqlite::memory: --token-auth-file " + dir +
                           "/tokens --requestheader-client-ca-file " + dir + "/front-ca.crt";
  // Without HTTPS the flag is refused: the certificate is checked in the handshake.
  RunResult refused = RunShell(base);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("needs HTTPS"), std::string::npos) << refused.out;

  Background server;
  ASSERT_TRUE(server.Start(base + " --requestheader-allowed-names front-proxy-client,aggregator --tls-cert " + dir +
                               "/tls.crt --tls-key " + dir + "/tls.key",
                           dir + "/server.log", R"(serving https://127\.0\.0\.1:(\d+))"))
      << server.Log();
  const int port = std::stoi(server.match());
  auto call = [&](const std::string& cert, const std::string& path, const httplib::Headers& headers) {
    std::unique_ptr<httplib::SSLClient> c =
        cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                     : std::make_unique<httplib::SSLClient>("127.0.0.1", port, dir + "/" + cert + ".crt",
                                                            dir + "/" + cert + ".key");
    c->set_ca_cert_path(dir + "/ca.crt");
    c->set_connection_timeout(5);
    c->set_read_timeout(5);
    return c->Get(path, headers);
  };
  const auto started = std::chrono::steady_clock::now();
  auto res = call("front", "/apis/gpuaas.io/v1", {{"X-Remote-User", "system:kube-aggregator"}});
  ASSERT_TRUE(res) << httplib::to_string(res.error()) << server.Log();
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5)) << "the aggregator waits 5 s";
  EXPECT_NE(res->body.find("APIResourceList"), std::string::npos);
  // OpenAPI, which the aggregator also asks for: answered, never a server error.
  for (const char* path : {"/openapi/v2", "/openapi/v3"}) {
    res = call("front", path, {{"X-Remote-User", "system:kube-aggregator"}});
    ASSERT_TRUE(res);
    EXPECT_TRUE(res->status == 200 || res->status == 404) << path << " " << res->status;
  }

  // Groups give roles: operators may list registered clusters, a project's member may not, and
  // sees its own project's pools only.
  res = call("front", "/api/v1/clusters", {{"X-Remote-User", "olga"}, {"X-Remote-Group", "system:authenticated"},
                                           {"X-Remote-Group", "gpuaas:operators"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  res = call("front", "/api/v1/clusters", {{"X-Remote-User", "mia"}, {"X-Remote-Group", "gpuaas:project:demo"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403) << res->body;
  EXPECT_NE(res->body.find("mia"), std::string::npos) << res->body;
  res = call("front", "/apis/gpuaas.io/v1/namespaces/demo/gpupools", {{"X-Remote-User", "mia"}, {"X-Remote-Group", "gpuaas:project:demo"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  res = call("front", "/apis/gpuaas.io/v1/namespaces/demo/gpupools", {{"X-Remote-User", "nobody"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404) << "a user of no project sees no project's objects: " << res->body;

  // The headers alone are nothing: no certificate, no user.
  res = call("", "/apis/gpuaas.io/v1", {{"X-Remote-User", "admin"}, {"X-Remote-Group", "system:masters"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401) << res->body;
  // The proxy's certificate without a user falls back to tokens: none given, 401.
  res = call("front", "/apis/gpuaas.io/v1", {});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401) << res->body;
  // A token still works beside the front proxy.
  res = call("", "/api/v1/clusters", {{"Authorization", "Bearer operator-t0ken-0123456789"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  // Another authority's certificate, even with the right name, does not get through.
  res = call("stranger", "/apis/gpuaas.io/v1", {{"X-Remote-User", "admin"}, {"X-Remote-Group", "system:masters"}});
  EXPECT_TRUE(!res || res->status == 401);
  EXPECT_EQ(server.Stop(), 0) << server.Log();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
