// The limits that hold under abuse: requests per token, connections per client, slow clients,
// and the Host check of a server without authentication.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <thread>

#include "api/auth.h"
#include "fmt/format.h"
#include "api/internal/rate_limit.h"
#include "api/problem.h"
#include "api/server.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "store/sqlite_store.h"
#include "telemetry/hub.h"

namespace gpuaas::api {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RateLimiter, BurstsThenTheRatePerKey) {
  internal::RateLimiter limiter(10);  // 10 a second, bursts of 20
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  int allowed = 0;
  for (int i = 0; i < 50; ++i) allowed += limiter.Take("alice", t0).ok() ? 1 : 0;
  EXPECT_EQ(allowed, 20);
  absl::Status refused = limiter.Take("alice", t0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ProblemFor(refused).status, 429);
  EXPECT_TRUE(limiter.Take("bob", t0).ok());  // per key
  EXPECT_TRUE(limiter.Take("alice", t0 + milliseconds(100)).ok());  // one more after 0.1 s
  EXPECT_FALSE(limiter.Take("alice", t0 + milliseconds(100)).ok());
  internal::RateLimiter off(0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(off.Take("x", t0).ok());
}

// A TCP connection to 127.0.0.1:port from `source` (any address of 127/8).
int Connect(const char* source, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True when the server closed `fd` within `wait` (a read returns 0 or an error).
bool ClosedByServer(int fd, milliseconds wait) {
  timeval tv{static_cast<time_t>(wait.count() / 1000), static_cast<suseconds_t>((wait.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  const ssize_t n = recv(fd, &c, 1, 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    std::vector<std::string> kinds = {std::string(kTokenKind)};
    for (const ResourceType& t : ResourceTypes()) kinds.push_back(t.kind);
    ASSERT_TRUE(cache_->Start(kinds).ok());
  }
  void TearDown() override { cache_->Stop(); }
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::ObjectCache> cache_;
};

TEST_F(LimitsTest, ASlowClientWithManyConnectionsDoesNotStopOthers) {
  ServerOptions o;
  o.port = 0;
  o.max_connections_per_address = 20;
  o.head_timeout_s = 1;
  ApiServer server(o, *cache_);
  ASSERT_TRUE(server.Start().ok());
  server.SetReady(true);
  // 100 connections from one address, each sending half a request head and then nothing.
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) {
    const int fd = Connect("127.0.0.2", server.port());
    ASSERT_GE(fd, 0) << "cannot connect from 127.0.0.2";
    const std::string part = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    ASSERT_EQ(send(fd, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
    slow.push_back(fd);
  }
  // Another client is answered at once.
  httplib::Client c("127.0.0.1", server.port());
  c.set_connection_timeout(2);
  c.set_read_timeout(2);
  const auto start = std::chrono::steady_clock::now();
  auto r = c.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(1));
  // Past its 20, the slow address's connections were closed at once; the 20 it kept are cut
  // off when their head does not arrive in time (1 s here).
  int closed_at_once = 0;
  for (size_t i = 20; i < slow.size(); ++i) closed_at_once += ClosedByServer(slow[i], milliseconds(200)) ? 1 : 0;
  EXPECT_EQ(closed_at_once, 80);
  int cut_off = 0;
  for (size_t i = 0; i < 20; ++i) cut_off += ClosedByServer(slow[i], milliseconds(3000)) ? 1 : 0;
  EXPECT_EQ(cut_off, 20);
  for (int fd : slow) close(fd);
  server.Stop();
}

TEST_F(LimitsTest, TooManyRequestsPerTokenGet429WithRetryAfter) {
  Authenticator auth(*store_, *cache_, RealClock::Get());
  ASSERT_TRUE(auth.AddStaticToken("fast-token-0123456789", Principal{"fast", Role::kOperator, "", "", {}}).ok());
  ASSERT_TRUE(auth.AddStaticToken("calm-token-0123456789", Principal{"calm", Role::kOperator, "", "", {}}).ok());
  ServerOptions o;
  o.port = 0;
  o.requests_per_second_per_token = RoleRates::All(5);  // bursts of 10
  ApiServer server(o, *cache_, nullptr, &auth);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  int ok = 0, limited = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 30; ++i) {
    auto r = c.Get("/api/v1/whoami", {{"Authorization", "Bearer fast-token-0123456789"}});
    ASSERT_TRUE(r);
    if (r->status == 200) ++ok;
    if (r->status == 429) {
      ++limited;
      EXPECT_EQ(r->get_header_value("Retry-After"), "1");
      EXPECT_NE(r->body.find("TooManyRequests"), std::string::npos);
    }
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(ok, 10);
  EXPECT_LE(ok, 10 + static_cast<int>(5 * took) + 1);  // the burst, and what refilled meanwhile
  EXPECT_EQ(ok + limited, 30);
  auto other = c.Get("/api/v1/whoami", {{"Authorization", "Bearer calm-token-0123456789"}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);  // another token is not slowed down
  server.Stop();
}

// Each role has its own rate: members held to 2 a second (bursts of 4) while operators are not
// limited; a bad ROLE=RATE is refused saying why.
TEST_F(LimitsTest, RatesArePerRole) {
  Authenticator auth(*store_, *cache_, RealClock::Get());
  ASSERT_TRUE(auth.AddStaticToken("member-token-0123456789", Principal{"m", Role::kMember, "p", "", {}}).ok());
  ASSERT_TRUE(auth.AddStaticToken("operator-token-0123456789", Principal{"o", Role::kOperator, "", "", {}}).ok());
  ServerOptions o;
  o.port = 0;
  ASSERT_TRUE(o.requests_per_second_per_token.Set("member=2").ok());
  ASSERT_TRUE(o.requests_per_second_per_token.Set("operator=0").ok());
  EXPECT_EQ(o.requests_per_second_per_token.agent, 100) << "the others keep their default";
  ApiServer server(o, *cache_, nullptr, &auth);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  int member_ok = 0, operator_ok = 0;
  for (int i = 0; i < 20; ++i) {
    auto m = c.Get("/api/v1/whoami", {{"Authorization", "Bearer member-token-0123456789"}});
    auto op = c.Get("/api/v1/whoami", {{"Authorization", "Bearer operator-token-0123456789"}});
    ASSERT_TRUE(m && op);
    member_ok += m->status == 200 ? 1 : 0;
    operator_ok += op->status == 200 ? 1 : 0;
  }
  EXPECT_LE(member_ok, 6);
  EXPECT_GE(member_ok, 4);
  EXPECT_EQ(operator_ok, 20);
  server.Stop();

  RoleRates r = RoleRates::All(7);
  EXPECT_TRUE(r.Set("agent=1.5").ok());
  EXPECT_EQ(r.agent, 1.5);
  EXPECT_EQ(r.member, 7);
  for (const char* bad : {"member", "member=", "member=-1", "member=fast", "root=5", "=5", "member=inf"}) {
    absl::Status s = r.Set(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_NE(std::string(s.message()).find(bad), std::string::npos) << s;
  }
  EXPECT_TRUE(r.Set("all=3").ok());
  EXPECT_EQ(r.operator_, 3);
  EXPECT_EQ(r.agent, 3);
}

// What arrives on `fd` within `wait`, until the server closes it.
std::string ReadAll(int fd, milliseconds wait) {
  timeval tv{static_cast<time_t>(wait.count() / 1000), static_cast<suseconds_t>((wait.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST_F(LimitsTest, ABodyIsReadOnlyFromACallerWhoMaySendIt) {
  Authenticator auth(*store_, *cache_, RealClock::Get());
  ASSERT_TRUE(auth.AddStaticToken("agent-token-0123456789", Principal{"agent-1", Role::kAgent, "", "c1", {"n1"}}).ok());
  ASSERT_TRUE(auth.AddStaticToken("admin-token-0123456789", Principal{"admin", Role::kOperator, "", "", {}}).ok());
  ServerOptions o;
  o.port = 0;
  ApiServer server(o, *cache_, nullptr, &auth);
  ASSERT_TRUE(server.Start().ok());
  server.SetReady(true);
  struct Case {
    std::string auth_header, path;
    int want;
  };
  for (const Case& c : std::vector<Case>{
           {"", "/apis/gpuaas.io/v1/projects", 401},                                    // no token
           {"Authorization: Bearer wrong-token-0123456789\r\n", "/apis/gpuaas.io/v1/projects", 401},
           {"Authorization: Bearer agent-token-0123456789\r\n", "/apis/gpuaas.io/v1/projects", 403},  // a role the route refuses
           {"", "/no/such/route", 404},
       }) {
    // The head announces 1 MiB and the body never comes: the answer must not wait for it.
    const int fd = Connect("127.0.0.1", server.port());
    ASSERT_GE(fd, 0);
    const std::string head = "POST " + c.path + " HTTP/1.1\r\nHost: localhost\r\n" + c.auth_header +
                             "Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{\"a\":";
    ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    const auto start = std::chrono::steady_clock::now();
    const std::string answer = ReadAll(fd, milliseconds(3000));
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(2)) << c.path;
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 " + std::to_string(c.want))) << answer;
    EXPECT_NE(answer.find("application/problem+json"), std::string::npos) << answer;
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
    close(fd);
  }
  // A caller who may send a body has it read and judged whole.
  httplib::Client client("127.0.0.1", server.port());
  auto r = client.Post("/api/v1/tokens", {{"Authorization", "Bearer admin-token-0123456789"}},
                       std::string(2000, ' ') + "[", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("body is not valid JSON"), std::string::npos) << r->body;
  server.Stop();
}

TEST_F(LimitsTest, TelemetryIsLimitedInBytesPerToken) {
  Authenticator auth(*store_, *cache_, RealClock::Get());
  ASSERT_TRUE(auth.AddStaticToken("push1-token-0123456789", Principal{"push1", Role::kOperator, "", "", {}}).ok());
  ASSERT_TRUE(auth.AddStaticToken("push2-token-0123456789", Principal{"push2", Role::kOperator, "", "", {}}).ok());
  telemetry::Hub hub;
  ServerOptions o;
  o.port = 0;
  // 100 bytes a second: the burst is the largest body, 20,000 bytes, and refills in 200 s, so
  // however slow the machine, what passes is decided by the burst alone.
  o.telemetry_bytes_per_second_per_token = RoleRates::All(100);
  o.max_body_bytes = 20000;
  ApiServer server(o, *cache_, nullptr, &auth, &hub);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  std::string body;  // about 8,000 bytes of valid exposition text
  for (int i = 0; body.size() < 8000; ++i) body += fmt::format("DCGM_FI_DEV_POWER_USAGE{{gpu=\"{}\",UUID=\"GPU-{}\"}} 1\n", i, i);
  auto push = [&](const std::string& token) {
    return c.Post("/api/v1/telemetry", {{"Authorization", "Bearer " + token}}, body, "text/plain; version=0.0.4");
  };
  std::vector<int> got;
  for (int i = 0; i < 3; ++i) {
    auto r = push("push1-token-0123456789");
    ASSERT_TRUE(r);
    got.push_back(r->status);
    if (r->status == 429) {
      EXPECT_EQ(r->get_header_value("Retry-After"), "1");
      EXPECT_NE(r->body.find("bytes of telemetry a second from push1"), std::string::npos) << r->body;
    }
  }
  EXPECT_EQ(got, (std::vector<int>{200, 200, 429}));  // two bodies fit in 20,000 bytes, the third does not
  auto other = push("push2-token-0123456789");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);  // another token is not slowed down
  server.Stop();
}

TEST_F(LimitsTest, WithoutAuthenticationOnlyLocalHostNamesAreAnswered) {
  ServerOptions o;
  o.port = 0;
  ApiServer server(o, *cache_);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  for (const std::string host : {"localhost", "127.0.0.1", "[::1]", "LOCALHOST:8080"}) {
    auto r = c.Get("/api/v1/whoami", {{"Host", host}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << host;
  }
  for (const std::string host : {"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "10.0.0.1"}) {
    auto r = c.Get("/api/v1/whoami", {{"Host", host}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << host;
    EXPECT_NE(r->body.find("DNS rebinding"), std::string::npos) << r->body;
  }
  server.Stop();
}

}  // namespace
}  // namespace gpuaas::api
