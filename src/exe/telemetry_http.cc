#include "exe/telemetry_http.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "common/files.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "httplib.h"

namespace gpuaas::exe {
namespace {

struct Target {
  std::string origin;  // scheme://host[:port]
  std::string path;
};

Target Split(const std::string& url) {
  const size_t host_at = url.find("://") == std::string::npos ? 0 : url.find("://") + 3;
  const size_t path_at = url.find('/', host_at);
  if (path_at == std::string::npos) return {url, "/"};
  return {url.substr(0, path_at), url.substr(path_at)};
}

absl::StatusOr<std::string> ReadToken(const std::string& file) {
  absl::StatusOr<std::string> token = ReadWholeFile(file);
  if (!token.ok()) return absl::UnavailableError(fmt::format("bearer token file {}: cannot read it", file));
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r' || token->back() == ' ')) token->pop_back();
  if (token->empty()) return absl::UnavailableError(fmt::format("bearer token file {} is empty", file));
  return token;
}

std::unique_ptr<httplib::Client> MakeClient(const Target& t, const ReceiverAuth& auth, double timeout_s) {
  auto c = std::make_unique<httplib::Client>(t.origin);
  const auto us = std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  c->set_connection_timeout(std::min<std::chrono::microseconds>(us, std::chrono::seconds(5)));
  c->set_read_timeout(us);
  c->set_write_timeout(us);
  if (t.origin.starts_with("https://")) {
    c->enable_server_certificate_verification(true);
    if (!auth.ca_file.empty()) {
      c->set_ca_cert_path(auth.ca_file.c_str());
    } else if (const char* ca = std::getenv("SSL_CERT_FILE"); ca != nullptr && *ca != '\0') {
      c->set_ca_cert_path(ca);
    }
  }
  return c;
}

// What went wrong, in words (cpp-httplib names its errors in one word).
std::string Describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "could not connect";
    case httplib::Error::ConnectionTimeout: return "connecting timed out";
    case httplib::Error::Read: return "no answer (read failed or timed out)";
    case httplib::Error::Write: return "sending failed";
    case httplib::Error::SSLConnection: return "TLS handshake failed";
    case httplib::Error::SSLLoadingCerts: return "CA certificates did not load";
    case httplib::Error::SSLServerVerification: return "the server's certificate did not verify";
    default: return httplib::to_string(e);
  }
}

}  // namespace

telemetry::PostFn RemoteWritePost(const std::string& url, const ReceiverAuth& auth, const std::string& user_agent) {
  const Target target = Split(url);
  auto client = std::shared_ptr<httplib::Client>(MakeClient(target, auth, 30));
  client->set_keep_alive(true);
  httplib::Headers base;
  for (const auto& [k, v] : telemetry::RemoteWriteHeaders(user_agent)) {
    if (k != "Content-Type") base.emplace(k, v);  // httplib writes the content type it is given
  }
  return [client, target, auth, base](const std::string& body) -> telemetry::PostResult {
    httplib::Headers headers = base;
    if (!auth.bearer_token_file.empty()) {
      absl::StatusOr<std::string> token = ReadToken(auth.bearer_token_file);
      if (!token.ok()) return {0, std::string(token.status().message()), std::nullopt};
      headers.emplace("Authorization", "Bearer " + *token);
    }
    httplib::Result res = client->Post(target.path, headers, body, "application/x-protobuf");
    if (!res) return {0, Describe(res.error()), std::nullopt};
    telemetry::PostResult out{res->status, "", std::nullopt};
    if (res->status < 200 || res->status >= 300) {
      out.error = res->body.substr(0, 256);
      while (!out.error.empty() && (out.error.back() == '\n' || out.error.back() == '\r')) out.error.pop_back();
    }
    if (res->has_header("Retry-After")) {
      if (std::optional<int64_t> s = ParseInt(res->get_header_value("Retry-After")); s && *s >= 0 && *s <= 3600) {
        out.retry_after = std::chrono::seconds(*s);
      }
    }
    return out;
  };
}

absl::StatusOr<std::string> FetchMetrics(const std::string& url) {
  const Target target = Split(url);
  httplib::Client c(target.origin);
  c.set_connection_timeout(5);
  c.set_read_timeout(10);
  // Split names "/" for a URL without a path; a scrape target's default is /metrics.
  const bool no_path = target.origin == url;
  auto res = c.Get(no_path ? "/metrics" : target.path);
  if (!res) return absl::UnavailableError(Describe(res.error()));
  if (res->status != 200) return absl::UnavailableError(fmt::format("HTTP {}", res->status));
  return res->body;
}

telemetry::HttpGet QueryGet(const std::string& base_url, const ReceiverAuth& auth, double timeout_s) {
  std::string base = base_url;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const Target target = Split(base);
  const std::string prefix = target.path == "/" ? "" : target.path;
  return [target, prefix, auth, timeout_s](const std::string& path) -> absl::StatusOr<std::string> {
    httplib::Headers headers;
    if (!auth.bearer_token_file.empty()) {
      absl::StatusOr<std::string> token = ReadToken(auth.bearer_token_file);
      if (!token.ok()) return token.status();
      headers.emplace("Authorization", "Bearer " + *token);
    }
    std::unique_ptr<httplib::Client> client = MakeClient(target, auth, timeout_s);
    httplib::Result res = client->Get(prefix + path, headers);
    if (!res) {
      const bool late = res.error() == httplib::Error::Read || res.error() == httplib::Error::ConnectionTimeout;
      return absl::UnavailableError(late ? fmt::format("no answer within {} s", timeout_s) : Describe(res.error()));
    }
    if (res->status != 200) {
      std::string said = res->body.substr(0, 200);
      while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
      return absl::UnavailableError(fmt::format("HTTP {}: {}", res->status, said));
    }
    return res->body;
  };
}

}  // namespace gpuaas::exe
