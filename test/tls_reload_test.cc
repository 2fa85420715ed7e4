// The API's TLS certificate is reloaded while the server runs: when its files change (as a
// Kubernetes Secret volume or cert-manager replaces them) and on SIGHUP. A pair that does not
// load leaves the last good one serving, and the log says so.
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "process.h"
#include "test_certs.h"

namespace gpuaas::testing {
namespace {

TEST(TlsReload, ANewCertificateIsServedWithoutARestartAndABadOneIsRefused) {
  char tmpl[] = "/tmp/gpuaas-tls-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const TestPki first = MakeTestPki(), second = MakeTestPki(), third = MakeTestPki();
  auto write = [&](const std::string& name, const std::string& text) {
    // Written aside and renamed, as a Secret volume swaps its files.
    std::ofstream(dir + "/" + name + ".tmp") << text;
    std::filesystem::rename(dir + "/" + name + ".tmp", dir + "/" + name);
  };
  write("tls.crt", first.server.cert_pem);
  write("tls.key", first.server.key_pem);
  for (const auto& [name, pki] : {std::pair{"ca1.crt", &first}, {"ca2.crt", &second}, {"ca3.crt", &third}}) {
    std::ofstream(dir + "/" + name) << pki->ca.cert_pem;
  }
  Background server;
  ASSERT_TRUE(server.Start(Bin() + " server --listen 127.0.0.1:0 --db sqlite:" + dir + "/gpuaas.db --tls-cert " + dir +
                               "/tls.crt --tls-key " + dir + "/tls.key",
                           dir + "/log", R"(serving https://127\.0\.0\.1:(\d+))"))
      << server.Log();
  const int port = std::stoi(server.match());
  // Whether a client that trusts only `ca` completes a request (a new connection each time).
  auto trusted_by = [&](const std::string& ca) {
    httplib::SSLClient c("127.0.0.1", port);
    c.enable_server_certificate_verification(true);
    c.set_ca_cert_path((dir + "/" + ca).c_str());
    c.set_connection_timeout(2);
    auto r = c.Get("/healthz");
    return r && r->status == 200;
  };
  ASSERT_TRUE(trusted_by("ca1.crt"));
  EXPECT_FALSE(trusted_by("ca2.crt"));

  // The files change: new connections get the new certificate within a couple of seconds.
  write("tls.key", second.server.key_pem);
  write("tls.crt", second.server.cert_pem);
  ASSERT_TRUE(Eventually([&] { return trusted_by("ca2.crt"); }, std::chrono::seconds(5))) << server.Log();
  EXPECT_FALSE(trusted_by("ca1.crt"));
  EXPECT_NE(server.Log().find("reloaded"), std::string::npos);

  // A broken certificate is refused; the last good one keeps serving.
  write("tls.crt", "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n");
  ASSERT_TRUE(Eventually([&] { return server.Log().find("does not load") != std::string::npos; }, std::chrono::seconds(5)))
      << server.Log();
  EXPECT_TRUE(trusted_by("ca2.crt"));
  // A certificate with another certificate's key: refused too, on SIGHUP as well.
  write("tls.crt", third.server.cert_pem);
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(Eventually([&] { return server.Log().find("SIGHUP: the TLS certificate does not load") != std::string::npos; },
                         std::chrono::seconds(5)))
      << server.Log();
  EXPECT_NE(server.Log().find("TLS key " + dir + "/tls.key"), std::string::npos) << server.Log();
  EXPECT_TRUE(trusted_by("ca2.crt"));
  // Its key arrives: served, and SIGHUP says it reloaded.
  write("tls.key", third.server.key_pem);
  kill(server.pid(), SIGHUP);
  ASSERT_TRUE(Eventually([&] { return trusted_by("ca3.crt"); }, std::chrono::seconds(5))) << server.Log();
  EXPECT_TRUE(Eventually([&] { return server.Log().find("SIGHUP: TLS certificate") != std::string::npos; },
                         std::chrono::seconds(5)));
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
