#include "cli/client.h"

#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"

namespace gpuaas::cli::internal {
namespace {

// The server's Warning headers are printed as kubectl prints them: the text inside the quotes,
// with the quotes and backslashes it escapes given back.
TEST(Client, PrintsTheServersWarningsAsKubectlDoes) {
  httplib::Server server;
  server.Post("/x", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Warning", R"(299 - "unknown field \"spec.quotta\"")");
    res.set_content("{}", "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::yield();
  std::ostringstream warnings;
  ClientOptions o;
  o.server = "http://127.0.0.1:" + std::to_string(port);
  o.warnings = &warnings;
  absl::StatusOr<std::string> r = Send(o, "POST", "/x", "{}");
  server.stop();
  t.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(warnings.str(), "Warning: unknown field \"spec.quotta\"\n");
}

}  // namespace
}  // namespace gpuaas::cli::internal
