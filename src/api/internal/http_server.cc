#include "api/internal/http_server.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "api/problem.h"
#include "common/log.h"
#include "fmt/format.h"

namespace gpuaas::api {

std::string HttpRequest::Param(std::string_view key) const {
  auto it = query.find(std::string(key));
  return it == query.end() ? "" : it->second;
}

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() &&
        std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return "";
}

bool PercentDecode(std::string_view in, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(in.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const int h = hex(in[i + 1]);
      const int l = hex(in[i + 2]);
      if (h < 0 || l < 0) return false;
      out += static_cast<char>(h * 16 + l);
      i += 2;
    } else if (in[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += in[i];
    }
  }
  return true;
}

namespace internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options, const HttpHandler& handler,
          asio::thread_pool& workers)
      : stream_(std::move(socket)), options_(options), handler_(handler), workers_(workers) {}

  void Start() {
    asio::dispatch(stream_.get_executor(),
                   beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(options_.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::error::eof) {
      return Close();
    }
    if (ec) {
      int status = 400;
      std::string reason = "BadRequest";
      std::string detail = fmt::format("malformed HTTP request: {}", ec.message());
      if (ec == http::error::body_limit) {
        status = 413;
        reason = "RequestEntityTooLarge";
        detail = fmt::format("request body exceeds the limit of {} bytes", options_.max_body_bytes);
      } else if (ec == http::error::header_limit) {
        status = 431;
        reason = "RequestHeaderFieldsTooLarge";
        detail = "request headers exceed 64 KiB";
      } else if (ec.category() != http::make_error_code(http::error::bad_target).category() ||
                 ec == http::error::partial_message) {
        return Close();  // a socket error or a client gone mid-request: nobody to answer
      }
      HttpResponse r{status, std::string(kProblemContentType), ProblemJson({status, reason, detail}), {}};
      return Write(std::move(r), /*head=*/false, /*keep_alive=*/false, 11);
    }
    http::request<http::string_body>& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    std::string_view target(msg.target().data(), msg.target().size());
    const size_t q = target.find('?');
    bool ok = PercentDecode(target.substr(0, q), false, req.path);
    if (ok && q != std::string_view::npos) {
      std::string_view rest = target.substr(q + 1);
      while (ok && !rest.empty()) {
        size_t amp = rest.find('&');
        std::string_view pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
        if (pair.empty()) continue;
        size_t eq = pair.find('=');
        std::string k, v;
        ok = PercentDecode(pair.substr(0, eq), true, k) &&
             PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true, v);
        if (ok) req.query.emplace(std::move(k), std::move(v));
      }
    }
    for (const auto& f : msg) {
      req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    req.body = std::move(msg.body());
    const bool keep_alive = msg.keep_alive();
    const bool head = msg.method() == http::verb::head;
    const unsigned version = msg.version();
    if (!ok) {
      HttpResponse resp{400, std::string(kProblemContentType),
                        ProblemJson({400, "BadRequest", "malformed percent-encoding in the request target"}), {}};
      return Write(std::move(resp), head, keep_alive, version);
    }
    // Reads answer from in-memory snapshots and run here, on the I/O thread. Writes wait for
    // the store and the cache, so they run on the worker pool: a slow commit must not stall
    // every other connection.
    if (req.method == "GET" || req.method == "HEAD") {
      return Write(Handle(req), head, keep_alive, version);
    }
    asio::post(workers_, [self = shared_from_this(), req = std::move(req), head, keep_alive, version]() mutable {
      HttpResponse resp = self->Handle(req);
      asio::post(self->stream_.get_executor(), [self, resp = std::move(resp), head, keep_alive, version]() mutable {
        self->Write(std::move(resp), head, keep_alive, version);
      });
    });
  }

  HttpResponse Handle(const HttpRequest& req) {
    try {
      return handler_(req);
    } catch (const std::exception& e) {
      log::Error("handler {} {} threw: {}", req.method, req.path, e.what());
      return {500, std::string(kProblemContentType), ProblemJson({500, "InternalError", "internal error"}), {}};
    }
  }

  void Write(HttpResponse r, bool head, bool keep_alive, unsigned version) {
    res_ = {};
    res_.version(version);
    res_.result(static_cast<http::status>(r.status));
    res_.set(http::field::server, "gpuaas");
    res_.set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res_.set(k, v);
    res_.keep_alive(keep_alive);
    const size_t length = r.body.size();
    if (!head) res_.body() = std::move(r.body);
    res_.content_length(length);
    http::async_write(stream_, res_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  const HttpServerOptions& options_;
  const HttpHandler& handler_;
  asio::thread_pool& workers_;
};

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions o, HttpHandler h)
      : options(std::move(o)), handler(std::move(h)), io(std::max(1, options.threads)), acceptor(io),
        workers(static_cast<size_t>(std::max(1, options.worker_threads))) {}

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
        log::Warn("accept: {}", ec.message());
      } else {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<Session>(std::move(socket), options, handler, workers)->Start();
      }
      Accept();
    });
  }

  HttpServerOptions options;
  HttpHandler handler;
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::thread_pool workers;  // runs handlers that may block (writes)
  std::vector<std::thread> threads;
  int port = 0;
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  Impl& s = *impl_;
  beast::error_code ec;
  auto addr = asio::ip::make_address(s.options.host == "localhost" ? "127.0.0.1" : s.options.host, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("\"{}\" is not an IP address", s.options.host));
  tcp::endpoint ep(addr, static_cast<unsigned short>(s.options.port));
  s.acceptor.open(ep.protocol(), ec);
  // SO_REUSEADDR lets a restarted server bind while old connections linger in TIME_WAIT; no
  // SO_REUSEPORT, so a second server cannot silently share the port.
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}:{}: {}", s.options.host, s.options.port, ec.message()));
  }
  s.port = s.acceptor.local_endpoint().port();
  s.Accept();
  for (int i = 0; i < std::max(1, s.options.threads); ++i) {
    s.threads.emplace_back([&s] { s.io.run(); });
  }
  return absl::OkStatus();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (s.threads.empty()) return;
  asio::post(s.io, [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
  });
  s.workers.join();  // let in-flight writes finish (they commit to the store)
  s.io.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace internal
}  // namespace gpuaas::api
