// What a new user meets first, through the CLI against a demo server: withdrawing and deleting,
// names used again, identifiers that round-trip between commands, errors that name the mistake,
// the demo's tokens across a restart, and warnings the server gives.
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;

class NewUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuaas-newuser-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/tokens") << kOperatorToken << ",ops,operator\n" << kMemberToken << ",alice,member,vision\n";
    setenv("GPUAAS_TOKEN", kOperatorToken, 1);
    unsetenv("GPUAAS_SERVER");
  }
  void TearDown() override { fs::remove_all(dir_); }
  bool Start(ServerProcess& server, const std::string& more = "") {
    return server.Start("--token-auth-file " + dir_ + "/tokens --demo --db sqlite:" + dir_ + "/g.db " + more,
                        dir_ + "/log");
  }
  // Runs a read until `pred` holds of its output (the controllers work asynchronously), or 30 s.
  template <typename P>
  RunResult Until(const std::string& args, P pred) {
    RunResult r;
    for (int i = 0; i < 300; ++i) {
      r = RunGpuaas(args);
      if (pred(r)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return r;
  }
  static constexpr const char* kOperatorToken = "operator-token-0123456789";
  static constexpr const char* kMemberToken = "member-token-0123456789ab";
  std::string dir_;
};

bool Has(const RunResult& r, const std::string& text) { return r.out.find(text) != std::string::npos; }

TEST_F(NewUserTest, RequestsAreWithdrawnAndNamesUsedAgain) {
  ServerProcess server;
  ASSERT_TRUE(Start(server)) << server.Log();
  const std::string s = " --server " + server.Url();
  const std::string member = std::string(" --token ") + kMemberToken + s;
  ASSERT_EQ(RunGpuaas("project create vision" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool request train -p vision --item H200-SXM-141GB/full=1" + member).code, 0);
  // A member cannot release or reject a request not yet decided; each refusal says what it can do.
  RunResult release = RunGpuaas("pool release train -p vision" + member);
  EXPECT_EQ(release.code, 1);
  EXPECT_TRUE(Has(release, "gpuaas pool delete train -p vision")) << release.out;
  RunResult reject = RunGpuaas("pool reject train -p vision --reason no" + member);
  EXPECT_EQ(reject.code, 1);
  EXPECT_TRUE(Has(reject, "Forbidden")) << reject.out;
  EXPECT_TRUE(Has(reject, "may withdraw its own request")) << reject.out;
  // It withdraws it, and asks again under the same name.
  RunResult withdrawn = RunGpuaas("pool delete train -p vision" + member);
  EXPECT_EQ(withdrawn.code, 0) << withdrawn.out;
  EXPECT_TRUE(Has(RunGpuaas("pool get train -p vision" + member), "NotFound"));
  ASSERT_EQ(RunGpuaas("pool request train -p vision --item H200-SXM-141GB/full=1" + member).code, 0);
  ASSERT_EQ(RunGpuaas("pool approve train -p vision" + s).code, 0);
  Until("pool get train -p vision -o json" + s, [](const RunResult& r) { return r.out.find("\"Ready\"") != std::string::npos; });
  // A workload that could never fit is refused at once.
  RunResult bad = RunGpuaas("workload run bad -p vision --pool train --resource nvidia.com/gpu=2" + member);
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(Has(bad, "can never run on pool train")) << bad.out;
  // A deleted workload's name is free again.
  ASSERT_EQ(RunGpuaas("workload run serve -p vision --pool train --resource nvidia.com/gpu=1" + member).code, 0);
  ASSERT_EQ(RunGpuaas("workload delete serve -p vision" + member).code, 0);
  RunResult again = RunGpuaas("workload run serve -p vision --pool train --resource nvidia.com/gpu=1" + member);
  EXPECT_EQ(again.code, 0) << again.out;
  // A pool in force is released by its delete (billing ends then), and goes once its devices
  // are free.
  ASSERT_EQ(RunGpuaas("pool request spare -p vision --item H200-SXM-141GB/full=1" + member).code, 0);
  ASSERT_EQ(RunGpuaas("pool approve spare -p vision" + s).code, 0);
  Until("pool get spare -p vision -o json" + s, [](const RunResult& r) { return r.out.find("\"Ready\"") != std::string::npos; });
  RunResult in_force = RunGpuaas("pool delete spare -p vision" + member);
  EXPECT_EQ(in_force.code, 0) << in_force.out;
  EXPECT_TRUE(Has(in_force, "gpupools/spare releasing (billing ended now); deleted once its devices are free"))
      << in_force.out;
  RunResult gone = Until("pool get spare -p vision" + s, [](const RunResult& r) { return Has(r, "NotFound"); });
  EXPECT_TRUE(Has(gone, "NotFound")) << gone.out;
  // Released by a release, a pool stays until it is deleted, and its name is taken until then.
  ASSERT_EQ(RunGpuaas("workload delete serve -p vision" + member).code, 0);
  ASSERT_EQ(RunGpuaas("pool release train -p vision" + member).code, 0);
  RunResult released = Until("pool get train -p vision" + s, [](const RunResult& r) {
    return std::regex_search(r.out, std::regex("Released +True"));
  });
  EXPECT_TRUE(std::regex_search(released.out, std::regex("Provisioned +False +Released"))) << released.out;
  RunResult approve_again = RunGpuaas("pool approve train -p vision" + s);
  EXPECT_TRUE(Has(approve_again, "it has been released")) << approve_again.out;
  EXPECT_FALSE(Has(approve_again, "release it to end it")) << approve_again.out;
  RunResult taken = RunGpuaas("pool request train -p vision --item H200-SXM-141GB/full=1" + member);
  EXPECT_TRUE(Has(taken, "AlreadyExists")) << taken.out;
  EXPECT_TRUE(Has(taken, "it is released: delete it to use its name again")) << taken.out;
  ASSERT_EQ(RunGpuaas("pool delete train -p vision" + member).code, 0);
  EXPECT_EQ(RunGpuaas("pool request train -p vision --item H200-SXM-141GB/full=1" + member).code, 0);
  // The API answers a DELETE of a type that takes none as kube-apiserver does: 405, not 404.
  RunResult raw = RunShell("curl -s -X DELETE -H 'Authorization: Bearer " + std::string(kOperatorToken) + "' " +
                           server.Url() + "/apis/gpuaas.io/v1/namespaces/vision/profiles/x");
  EXPECT_TRUE(Has(raw, "\"status\":405")) << raw.out;
  EXPECT_TRUE(Has(raw, "profiles cannot be deleted")) << raw.out;
  EXPECT_EQ(server.Stop(), 0);
}

// Every GPU UUID a command prints is taken by every command that takes one, in either letter
// case; a node as the NODE column prints it is taken by selectors and agent tokens.
TEST_F(NewUserTest, IdentifiersRoundTripBetweenCommands) {
  ServerProcess server;
  ASSERT_TRUE(Start(server)) << server.Log();
  const std::string s = " --server " + server.Url();
  ASSERT_EQ(RunGpuaas("project create vision" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool request p -p vision --cluster alpha --item H200-SXM-141GB/full=1" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool approve p -p vision" + s).code, 0);
  RunResult got = Until("pool get p -p vision" + s, [](const RunResult& r) { return r.out.find("GPU-") != std::string::npos; });
  std::smatch m;
  ASSERT_TRUE(std::regex_search(got.out, m, std::regex("GPU-[0-9a-f-]{36}"))) << got.out;
  const std::string printed = m.str();  // as NVIDIA spells it
  std::string lower = printed;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string upper = printed;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // (The demo's simulated readings come every few seconds: wait for the first.)
  Until("metrics gpu:" + printed + ":power_w --since 30m" + s, [](const RunResult& r) { return r.code == 0; });
  for (const std::string& id : {printed, lower, upper}) {
    RunResult g = RunGpuaas("get gpus " + id + s);
    EXPECT_EQ(g.code, 0) << id << ": " << g.out;
    EXPECT_TRUE(Has(g, lower)) << g.out;
    RunResult metrics = RunGpuaas("metrics gpu:" + id + ":power_w --since 30m" + s);
    EXPECT_EQ(metrics.code, 0) << id << ": " << metrics.out;
  }
  // defrag apply takes it in any case (this GPU has no move: the refusal is about the GPU, not
  // its spelling).
  RunResult defrag = RunGpuaas("defrag apply --gpu " + lower + s);
  EXPECT_FALSE(Has(defrag, "not a GPU UUID")) << defrag.out;
  EXPECT_TRUE(Has(defrag, "has no defragmentation move")) << defrag.out;
  // The NODE column's form is the selector's and the agent token's.
  RunResult nodes = RunGpuaas("get gpus -l gpuaas.io/node=alpha.h200-01" + s);
  EXPECT_EQ(nodes.code, 0) << nodes.out;
  EXPECT_EQ(Lines(nodes.out).size(), 9u) << "a header and the node's 8 GPUs: " << nodes.out;
  RunResult token = RunGpuaas("token create --user agent-1 --role agent --node alpha.h200-01" + s);
  EXPECT_EQ(token.code, 0) << token.out;
  RunResult token2 = RunGpuaas("token create --user agent-2 --role agent --cluster alpha --node h200-01" + s);
  EXPECT_EQ(token2.code, 0) << token2.out;
  RunResult nowhere = RunGpuaas("token create --user agent-3 --role agent --node alpha.h200-99" + s);
  EXPECT_EQ(nowhere.code, 1);
  EXPECT_TRUE(Has(nowhere, "CLUSTER.NODE")) << nowhere.out;
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(NewUserTest, MistakesAreNamed) {
  ServerProcess server;
  ASSERT_TRUE(Start(server)) << server.Log();
  const std::string s = " --server " + server.Url();
  // Typos name the word and the closest command.
  RunResult typo = RunGpuaas("pool aprove x -p y" + s);
  EXPECT_EQ(typo.code, 2);
  EXPECT_TRUE(Has(typo, "unknown command \"aprove\"")) << typo.out;
  EXPECT_TRUE(Has(typo, "did you mean \"gpuaas pool approve\"")) << typo.out;
  EXPECT_FALSE(Has(typo, "A subcommand is required")) << typo.out;
  RunResult audt = RunGpuaas("audt");
  EXPECT_TRUE(Has(audt, "did you mean \"gpuaas audit\"")) << audt.out;
  // The audit log from the CLI.
  RunResult audit = RunGpuaas("audit" + s);
  EXPECT_EQ(audit.code, 0) << audit.out;
  EXPECT_TRUE(Has(audit, "CreateProject")) << audit.out;
  // A trailing slash on the server's address is fine; an unreachable server fails `version`.
  EXPECT_EQ(RunGpuaas("version --server " + server.Url() + "/").code, 0);
  EXPECT_EQ(RunGpuaas("get clusters --server " + server.Url() + "//").code, 0);
  RunResult bad_url = RunGpuaas("get clusters --server " + server.Url() + "/apis");
  EXPECT_EQ(bad_url.code, 1);
  EXPECT_TRUE(Has(bad_url, "http://HOST:PORT")) << bad_url.out;
  RunResult down = RunGpuaas("version --server http://127.0.0.1:1");
  EXPECT_EQ(down.code, 1) << down.out;
  EXPECT_TRUE(Has(down, "Client Version:")) << down.out;
  // One list of types: the server's discovery, with short names and the fleet's names.
  RunResult types = RunGpuaas("api-resources" + s);
  EXPECT_EQ(types.code, 0);
  EXPECT_TRUE(std::regex_search(types.out, std::regex("ratecards +rc .*create"))) << types.out;
  for (const char* what : {"gp", "pools", "GpuPool", "wl", "nodes", "ratecards", "creditnotes", "invoices"}) {
    EXPECT_EQ(RunGpuaas(std::string("get ") + what + s).code, 0) << what;
  }
  RunResult widgets = RunGpuaas("get gpupoool" + s);
  EXPECT_TRUE(Has(widgets, "did you mean \"gpupools\"")) << widgets.out;
  EXPECT_TRUE(Has(widgets, "creditnotes")) << "every type the server serves: " << widgets.out;
  // alerts shows each alert's message: an XID 79 pushed as dcgm-exporter text.
  const std::string uuid =
      nlohmann::json::parse(RunGpuaas("get gpus -o json -l gpuaas.io/node=alpha.h200-01" + s).out)["items"][0]["spec"]["uuid"];
  RunResult pushed = RunShell("printf 'DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" + uuid +
                              "\"} 79\\n' | curl -s -X POST -H 'Content-Type: text/plain' -H 'Authorization: Bearer " +
                              kOperatorToken + "' --data-binary @- " + server.Url() + "/api/v1/telemetry");
  RunResult alerts = Until("alerts" + s, [&](const RunResult& r) { return r.out.find(uuid) != std::string::npos; });
  EXPECT_TRUE(Has(alerts, "MESSAGE")) << pushed.out << alerts.out;
  EXPECT_TRUE(Has(alerts, "XID 79 (")) << "the message, beside the action: " << alerts.out;
  // bill export PROJECT --focus is that project's FOCUS rows.
  ASSERT_EQ(RunGpuaas("project create vision" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool request v -p vision --item H200-SXM-141GB/full=1" + s).code, 0);
  ASSERT_EQ(RunGpuaas("pool approve v -p vision" + s).code, 0);
  Until("pool get v -p vision -o json" + s, [](const RunResult& r) { return r.out.find("\"Ready\"") != std::string::npos; });
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a second of use to bill
  RunResult all = RunGpuaas("bill export --focus" + s);
  RunResult demo = RunGpuaas("bill export demo --focus" + s);
  ASSERT_EQ(demo.code, 0) << demo.out;
  EXPECT_TRUE(Has(all, "vision/v")) << all.out;
  EXPECT_FALSE(Has(demo, "vision/")) << demo.out;
  EXPECT_TRUE(Has(demo, "demo/training")) << demo.out;
  EXPECT_EQ(RunGpuaas("bill export nobody --focus" + s).code, 1);
  // A budget below what is already committed is taken, with a warning.
  RunResult budget = RunGpuaas("bill budget demo --amount 1.00" + s);
  EXPECT_EQ(budget.code, 0) << budget.out;
  EXPECT_TRUE(Has(budget, "Warning: project demo's pools already cost more")) << budget.out;
  EXPECT_FALSE(Has(RunGpuaas("bill budget demo --amount 100000.00" + s), "Warning")) << "a budget with room says nothing";
  EXPECT_EQ(server.Stop(), 0);
}

// "Allocated" and "used" GPU-hours mean one thing on the invoice and in the assessment: the
// demo's pool, with simulated readings, shows the same figures in both.
TEST_F(NewUserTest, TheInvoiceAndTheAssessmentCountGpuHoursAlike) {
  ServerProcess server;
  ASSERT_TRUE(Start(server, "--telemetry-interval 1")) << server.Log();
  const std::string s = " --server " + server.Url();
  const std::string curl = "curl -s -H 'Authorization: Bearer " + std::string(kOperatorToken) + "' " + server.Url();
  // Readings of the demo pool's devices for a few seconds.
  RunResult line;
  nlohmann::json invoice, assessment;
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    invoice = nlohmann::json::parse(RunShell(curl + "/api/v1/projects/demo/invoices/$(date -u +%Y-%m)").out, nullptr, false);
    if (invoice.is_object() && !invoice["lines"].empty() && invoice["lines"][0].contains("usedGpuHours") &&
        invoice["lines"][0]["allocatedGpuHours"].get<double>() > 0.002) {
      break;
    }
  }
  assessment = nlohmann::json::parse(RunShell(curl + "/api/v1/assessment").out, nullptr, false);
  ASSERT_TRUE(invoice.is_object() && assessment.is_object()) << invoice.dump() << assessment.dump();
  const nlohmann::json* l = nullptr;
  for (const nlohmann::json& x : invoice["lines"]) {
    if (x.value("pool", "") == "training") l = &x;
  }
  const nlohmann::json* a = nullptr;
  for (const nlohmann::json& x : assessment["pools"]) {
    if (x.value("pool", "") == "training") a = &x;
  }
  ASSERT_TRUE(l != nullptr && a != nullptr) << invoice.dump() << "\n" << assessment.dump();
  ASSERT_TRUE(l->contains("usedGpuHours")) << "the invoice has readings where the assessment does: " << l->dump();
  // Read a moment apart: within two seconds of two GPUs.
  const double tolerance = 2.0 * 2 / 3600;
  EXPECT_NEAR((*l)["allocatedGpuHours"].get<double>(), (*a)["allocatedGpuHours"].get<double>(), tolerance);
  EXPECT_NEAR((*l)["usedGpuHours"].get<double>(), (*a)["usedGpuHours"].get<double>(), tolerance);
  EXPECT_EQ(server.Stop(), 0);
}

// The README's way to read the demo with kubectl: a self-signed certificate for 127.0.0.1, the
// demo over TLS, its operator token; and the CLI trusting the certificate through SSL_CERT_FILE.
TEST_F(NewUserTest, KubectlReadsTheDemoOverTlsAsTheReadmeShows) {
  if (RunShell("command -v kubectl && command -v openssl").code != 0) GTEST_SKIP() << "kubectl or openssl missing";
  ASSERT_EQ(RunShell("cd " + dir_ + " && openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=gpuaas-demo "
                     "-addext subjectAltName=IP:127.0.0.1 -keyout demo.key -out demo.crt")
                .code,
            0);
  Background server;
  ASSERT_TRUE(server.Start(Bin() + " server --demo --listen 127.0.0.1:0 --db sqlite:" + dir_ + "/tls.db --tls-cert " + dir_ +
                               "/demo.crt --tls-key " + dir_ + "/demo.key",
                           dir_ + "/tls.log", R"(serving https://127\.0\.0\.1:(\d+))"))
      << server.Log();
  std::smatch m;
  const std::string log = server.Log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("export GPUAAS_TOKEN=(\\S+)"))) << log;
  const std::string url = "https://127.0.0.1:" + server.match();
  const std::string k = "kubectl --server " + url + " --certificate-authority " + dir_ + "/demo.crt --token " + m[1].str();
  RunResult pools = RunShell(k + " get gpucapacities,nodecapacities,gpupools -A");
  EXPECT_EQ(pools.code, 0) << pools.out;
  EXPECT_TRUE(Has(pools, "training")) << "the demo's objects: " << pools.out;
  EXPECT_EQ(RunShell(k + " get gpuaas").code, 0);
  RunResult cli = RunShell("SSL_CERT_FILE=" + dir_ + "/demo.crt " + Bin() + " get pools --server " + url + " --token " + m[1].str());
  EXPECT_EQ(cli.code, 0) << cli.out;
  RunResult untrusted = RunShell(Bin() + " get pools --server " + url + " --token " + m[1].str());
  EXPECT_EQ(untrusted.code, 1);
  EXPECT_TRUE(Has(untrusted, "SSL_CERT_FILE")) << untrusted.out;
  server.Stop(SIGTERM);
}

// The demo's tokens are kept with its state: a restart on the same store keeps them working,
// and the banner says where the server is when the CLI would not find it by default.
TEST_F(NewUserTest, TheDemosTokensSurviveARestart) {
  std::string token;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start("--demo --db sqlite:" + dir_ + "/g.db", dir_ + "/log1")) << server.Log();
    std::smatch m;
    const std::string log = server.Log();
    ASSERT_TRUE(std::regex_search(log, m, std::regex("export GPUAAS_TOKEN=(\\S+)"))) << log;
    token = m[1];
    EXPECT_TRUE(Has({0, log}, "export GPUAAS_SERVER=" + server.Url())) << log;
    EXPECT_EQ(RunGpuaas("get pools --token " + token + " --server " + server.Url()).code, 0);
    EXPECT_EQ(server.Stop(), 0);
  }
  ServerProcess again;
  ASSERT_TRUE(again.Start("--demo --db sqlite:" + dir_ + "/g.db", dir_ + "/log2")) << again.Log();
  EXPECT_TRUE(Has({0, again.Log()}, "the same as at the last start")) << again.Log();
  RunResult still = RunGpuaas("get pools --token " + token + " --server " + again.Url());
  EXPECT_EQ(still.code, 0) << still.out;
  EXPECT_EQ(again.Stop(), 0);
}

}  // namespace
}  // namespace gpuaas::testing
