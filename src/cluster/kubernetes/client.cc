#include "cluster/kubernetes/client.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <mutex>
#include <optional>

#include "absl/strings/cord.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {
namespace {

using nlohmann::json;

struct Endpoint {
  bool tls = false;
  std::string host;
  int port = 0;
  std::string base_path;  // a server URL may carry a path prefix (a proxy)
};

absl::StatusOr<Endpoint> ParseServer(const std::string& server) {
  Endpoint e;
  std::string_view rest = server;
  if (rest.starts_with("https://")) {
    e.tls = true;
    rest.remove_prefix(8);
    e.port = 443;
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    e.port = 80;
  } else {
    return absl::InvalidArgumentError(fmt::format("server \"{}\" is not an http(s) URL", server));
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) e.base_path = std::string(rest.substr(slash));
  while (!e.base_path.empty() && e.base_path.back() == '/') e.base_path.pop_back();
  size_t colon = std::string_view::npos;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return absl::InvalidArgumentError(fmt::format("server \"{}\": bad IPv6 host", server));
    e.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return absl::InvalidArgumentError(fmt::format("server \"{}\": bad port", server));
      colon = close + 1;
    }
  } else {
    colon = authority.rfind(':');
    e.host = std::string(authority.substr(0, colon));
  }
  if (colon != std::string_view::npos) {
    std::optional<int64_t> port = ParseInt(authority.substr(colon + 1));
    if (!port || *port <= 0 || *port > 65535) {
      return absl::InvalidArgumentError(fmt::format("server \"{}\": bad port", server));
    }
    e.port = static_cast<int>(*port);
  }
  if (e.host.empty()) return absl::InvalidArgumentError(fmt::format("server \"{}\" names no host", server));
  return e;
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "no detail";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// Every certificate of a PEM bundle into a new store; the caller owns it.
absl::StatusOr<X509_STORE*> CaStore(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509_STORE* store = X509_STORE_new();
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
    ++added;
  }
  ERR_clear_error();  // the end of the bundle reads as an error
  BIO_free(bio);
  if (added == 0) {
    X509_STORE_free(store);
    return absl::InvalidArgumentError("certificate-authority: no PEM certificate in it");
  }
  return store;
}

struct ClientIdentity {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  ~ClientIdentity() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

absl::Status LoadIdentity(const ClientConfig& c, ClientIdentity& id) {
  BIO* cb = BIO_new_mem_buf(c.client_cert_pem.data(), static_cast<int>(c.client_cert_pem.size()));
  id.cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  if (id.cert == nullptr) return absl::InvalidArgumentError("client-certificate: not a PEM certificate: " + OpenSslError());
  BIO* kb = BIO_new_mem_buf(c.client_key_pem.data(), static_cast<int>(c.client_key_pem.size()));
  id.key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  if (id.key == nullptr) return absl::InvalidArgumentError("client-key: not a PEM private key: " + OpenSslError());
  if (X509_check_private_key(id.cert, id.key) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("client-key does not match client-certificate");
  }
  return absl::OkStatus();
}

// The API server's Status message of an error body, or the body's start.
std::string ServerMessage(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  return body.substr(0, 200);
}

absl::Status HttpError(const std::string& what, int status, const std::string& body, const std::string& retry_after) {
  const std::string msg = fmt::format("{}: HTTP {}: {}", what, status, ServerMessage(body));
  switch (status) {
    case 401: return absl::UnauthenticatedError(msg);
    case 403: return absl::PermissionDeniedError(msg);
    case 404: return absl::NotFoundError(msg);
    case 409: return absl::AbortedError(msg);
    case 410: return absl::OutOfRangeError(msg);
    case 429: {
      absl::Status s = absl::ResourceExhaustedError(msg);
      if (!retry_after.empty()) s.SetPayload(kRetryAfterPayload, absl::Cord(retry_after));
      return s;
    }
    default:
      if (status >= 500) return absl::UnavailableError(msg);
      return absl::InternalError(msg);
  }
}

std::string WithParam(const std::string& path, const std::string& param) {
  return path + (path.find('?') == std::string::npos ? "?" : "&") + param;
}

}  // namespace

struct Client::Impl {
  Endpoint endpoint;
  std::string ca_pem;
  bool verify = true;
  std::string client_cert_pem, client_key_pem;
  std::mutex mu;
  httplib::ClientImpl* watching = nullptr;  // the running watch's connection; guarded by mu
  std::string token;                        // guarded by mu
  std::chrono::steady_clock::time_point token_read{};  // guarded by mu; zero: read at next use

  std::unique_ptr<httplib::ClientImpl> Connection(const ClientConfig& c, const ClientTimeouts& t,
                                                  std::chrono::seconds read_timeout, const std::string& bearer) const {
    std::unique_ptr<httplib::ClientImpl> conn;
    if (endpoint.tls) {
      std::unique_ptr<httplib::SSLClient> ssl;
      if (!client_cert_pem.empty()) {
        ClientIdentity id;
        if (!LoadIdentity(c, id).ok()) return nullptr;  // checked in Make
        ssl = std::make_unique<httplib::SSLClient>(endpoint.host, endpoint.port, id.cert, id.key);
      } else {
        ssl = std::make_unique<httplib::SSLClient>(endpoint.host, endpoint.port);
      }
      if (!ca_pem.empty()) {
        absl::StatusOr<X509_STORE*> store = CaStore(ca_pem);
        if (store.ok()) ssl->set_ca_cert_store(*store);  // the connection owns it
      }
      ssl->enable_server_certificate_verification(verify);
      conn = std::move(ssl);
    } else {
      conn = std::make_unique<httplib::ClientImpl>(endpoint.host, endpoint.port);
    }
    conn->set_connection_timeout(t.connect);
    conn->set_read_timeout(read_timeout);
    conn->set_write_timeout(t.request);
    if (!bearer.empty()) conn->set_bearer_token_auth(bearer);
    conn->set_default_headers({{"Accept", "application/json"}, {"User-Agent", "gpuaas"}});
    return conn;
  }
};

Client::Client(ClientConfig config, ClientTimeouts timeouts, std::unique_ptr<Impl> impl)
    : config_(std::move(config)), timeouts_(timeouts), impl_(std::move(impl)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Make(const ClientConfig& config, ClientTimeouts timeouts) {
  auto impl = std::make_unique<Impl>();
  absl::StatusOr<Endpoint> e = ParseServer(config.server);
  if (!e.ok()) return e.status();
  impl->endpoint = *e;
  if (!config.tls_server_name.empty() && config.tls_server_name != e->host) {
    return absl::UnimplementedError(
        "tls-server-name other than the server's host is not supported: name the server by a host its certificate has");
  }
  if (e->tls) {
    if (!config.ca_pem.empty()) {
      absl::StatusOr<X509_STORE*> store = CaStore(config.ca_pem);
      if (!store.ok()) return store.status();
      X509_STORE_free(*store);
    }
    if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
      ClientIdentity id;
      if (absl::Status s = LoadIdentity(config, id); !s.ok()) return s;
    }
  } else if (!config.client_cert_pem.empty()) {
    return absl::InvalidArgumentError("a client certificate needs an https server");
  }
  impl->ca_pem = config.ca_pem;
  impl->verify = !config.insecure_skip_tls_verify;
  impl->client_cert_pem = config.client_cert_pem;
  impl->client_key_pem = config.client_key_pem;
  return std::unique_ptr<Client>(new Client(config, timeouts, std::move(impl)));
}

absl::StatusOr<std::string> Client::Get(const std::string& path) {
  if (stopped_) return absl::CancelledError("client stopped");
  std::unique_ptr<httplib::ClientImpl> conn = impl_->Connection(config_, timeouts_, timeouts_.request, Token());
  if (conn == nullptr) return absl::InternalError("cannot make a connection");
  httplib::Result res = conn->Get(impl_->endpoint.base_path + path);
  const std::string what = "GET " + path;
  if (!res) {
    std::string detail = httplib::to_string(res.error());
    if (res.error() == httplib::Error::SSLServerVerification) detail += ": the server's certificate is not trusted";
    return absl::UnavailableError(fmt::format("{}: {}", what, detail));
  }
  if (res->status == 401) ExpireToken();
  if (res->status != 200) return HttpError(what, res->status, res->body, res->get_header_value("Retry-After"));
  return std::move(res->body);
}

absl::StatusOr<std::string> Client::Send(const std::string& method, const std::string& path, const std::string& body,
                                          const std::string& content_type) {
  if (method != "POST" && method != "PUT" && method != "PATCH" && method != "DELETE") {
    return absl::InvalidArgumentError(fmt::format("{}: not a write method", method));
  }
  if (stopped_) return absl::CancelledError("client stopped");
  std::unique_ptr<httplib::ClientImpl> conn = impl_->Connection(config_, timeouts_, timeouts_.request, Token());
  if (conn == nullptr) return absl::InternalError("cannot make a connection");
  const std::string full = impl_->endpoint.base_path + path;
  httplib::Result res = method == "POST"   ? conn->Post(full, body, content_type)
                        : method == "PUT"  ? conn->Put(full, body, content_type)
                        : method == "PATCH" ? conn->Patch(full, body, content_type)
                        : body.empty()      ? conn->Delete(full)
                                            : conn->Delete(full, body, content_type);  // DeleteOptions
  const std::string what = method + " " + path;
  if (!res) return absl::UnavailableError(fmt::format("{}: {}", what, httplib::to_string(res.error())));
  log::Info("kubernetes {}: {} -> {}", config_.server, what, res->status);
  if (res->status == 401) ExpireToken();
  if (res->status < 200 || res->status > 299) {
    return HttpError(what, res->status, res->body, res->get_header_value("Retry-After"));
  }
  return std::move(res->body);
}

std::string Client::Token() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!config_.token_source) return config_.token;
  const auto now = std::chrono::steady_clock::now();
  if (impl_->token_read == std::chrono::steady_clock::time_point{} || now - impl_->token_read >= std::chrono::minutes(1)) {
    absl::StatusOr<std::string> t = config_.token_source();
    if (t.ok()) {
      impl_->token = *t;
    } else {
      log::Warn("kubernetes {}: the token file cannot be read again, keeping the last token: {}", config_.server,
                t.status().ToString());
    }
    if (impl_->token.empty()) impl_->token = config_.token;
    impl_->token_read = now;
  }
  return impl_->token;
}

void Client::ExpireToken() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->token_read = {};
}

absl::StatusOr<ListResult> Client::List(const std::string& path, int page_size) {
  ListResult out;
  std::string cont;
  bool restarted = false;
  for (;;) {
    std::string page_path = WithParam(path, fmt::format("limit={}", page_size));
    if (!cont.empty()) page_path += "&continue=" + httplib::detail::encode_query_param(cont);
    absl::StatusOr<std::string> body = Get(page_path);
    if (!body.ok() && absl::IsOutOfRange(body.status()) && !cont.empty() && !restarted) {
      // The continue token expired (the list took longer than the server keeps it): once more.
      restarted = true;
      out = {};
      cont.clear();
      continue;
    }
    if (!body.ok()) return body.status();
    json page = json::parse(*body, nullptr, false);
    if (!page.is_object() || !page.contains("items") || !page["items"].is_array()) {
      return absl::UnavailableError(fmt::format("GET {}: not a list", path));
    }
    // Items of a list carry no kind; the list's kind says it ("NodeList").
    std::string kind = page.value("kind", "");
    if (kind.ends_with("List")) kind.resize(kind.size() - 4);
    const std::string api_version = page.value("apiVersion", "");
    for (json& item : page["items"]) {
      if (!item.contains("kind") && !kind.empty()) item["kind"] = kind;
      if (!item.contains("apiVersion") && !api_version.empty()) item["apiVersion"] = api_version;
      out.items.push_back(item.dump());
    }
    const json& meta = page.contains("metadata") ? page["metadata"] : json::object();
    out.resource_version = meta.value("resourceVersion", "");
    cont = meta.value("continue", "");
    if (cont.empty()) return out;
  }
}

absl::Status Client::Watch(const std::string& path, const std::string& resource_version,
                           const std::function<bool(const WatchEvent&)>& on_event,
                           const std::function<void()>& on_open) {
  std::unique_ptr<httplib::ClientImpl> conn =
      impl_->Connection(config_, timeouts_, timeouts_.watch + std::chrono::seconds(30), Token());
  if (conn == nullptr) return absl::InternalError("cannot make a connection");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (stopped_) return absl::CancelledError("client stopped");
    impl_->watching = conn.get();
  }
  std::string query = WithParam(path, "watch=1&allowWatchBookmarks=true");
  if (!resource_version.empty()) query += "&resourceVersion=" + httplib::detail::encode_query_param(resource_version);
  query += fmt::format("&timeoutSeconds={}", timeouts_.watch.count());
  const std::string what = "watch " + path;

  int status = 0;
  std::string retry_after, error_body, pending;
  absl::Status event_error;
  bool stopped_by_caller = false;
  httplib::Result res = conn->Get(
      impl_->endpoint.base_path + query, httplib::Headers{},
      [&](const httplib::Response& r) {
        status = r.status;
        retry_after = r.get_header_value("Retry-After");
        if (status == 200 && on_open) on_open();
        return true;
      },
      [&](const char* data, size_t n) {
        if (status != 200) {
          if (error_body.size() < 64 * 1024) error_body.append(data, n);
          return true;
        }
        pending.append(data, n);
        size_t start = 0;
        for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
          const std::string_view line(pending.data() + start, nl - start);
          if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
          json ev = json::parse(line, nullptr, false);
          if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string() || !ev.contains("object")) {
            event_error = absl::UnavailableError(fmt::format("{}: an event that is not one: {}", what, line.substr(0, 120)));
            return false;
          }
          WatchEvent e{ev["type"].get<std::string>(), ev["object"].dump()};
          if (e.type == "ERROR") {
            const json& st = ev["object"];
            event_error = HttpError(what, st.value("code", 500), e.object, "");
            return false;
          }
          if (!on_event(e)) {
            stopped_by_caller = true;
            return false;
          }
        }
        pending.erase(0, start);
        return true;
      });
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->watching = nullptr;
  }
  if (!event_error.ok()) return event_error;
  if (stopped_by_caller) return absl::OkStatus();
  if (stopped_) return absl::CancelledError("client stopped");
  if (status == 401) ExpireToken();
  if (status != 0 && status != 200) return HttpError(what, status, error_body, retry_after);
  if (!res) {
    // A watch the server ends by closing (its timeout, a restart) is a normal end only when it
    // ended at an event boundary; otherwise the connection dropped.
    if (res.error() == httplib::Error::Read && pending.empty() && status == 200) return absl::OkStatus();
    return absl::UnavailableError(fmt::format("{}: {}", what, httplib::to_string(res.error())));
  }
  return absl::OkStatus();
}

void Client::Stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  stopped_ = true;
  if (impl_->watching != nullptr) impl_->watching->stop();
}

}  // namespace gpuaas::cluster::kubernetes
