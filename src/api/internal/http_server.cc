#include "api/internal/http_server.h"

#include <sys/stat.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <type_traits>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "api/problem.h"
#include "common/status.h"
#include "common/log.h"
#include "common/strings.h"
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

std::vector<std::string> HttpRequest::Headers(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      out.push_back(v);
    }
  }
  return out;
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

absl::Status ParseRequestTarget(std::string_view target, HttpRequest& req) {
  const size_t q = target.find('?');
  bool ok = PercentDecode(target.substr(0, q), false, req.path);
  if (ok && q != std::string_view::npos) {
    std::string_view rest = target.substr(q + 1);
    while (ok && !rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      if (pair.empty()) continue;
      const size_t eq = pair.find('=');
      std::string k, v;
      ok = PercentDecode(pair.substr(0, eq), true, k) &&
           PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true, v);
      if (ok) req.query.emplace(std::move(k), std::move(v));
    }
  }
  if (!ok) return absl::InvalidArgumentError("malformed percent-encoding in the request target");
  // Text is UTF-8 everywhere past this point (paths, names and selectors end up in JSON).
  bool utf8 = IsValidUtf8(req.path);
  for (const auto& [k, v] : req.query) utf8 = utf8 && IsValidUtf8(k) && IsValidUtf8(v);
  if (!utf8) return absl::InvalidArgumentError("the request target is not valid UTF-8");
  return absl::OkStatus();
}

namespace internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Counts open connections, in all and per remote address, and pauses accepting at the cap.
class ConnectionGate {
 public:
  explicit ConnectionGate(const HttpServerOptions& o) : max_(o.max_connections), per_address_(o.max_connections_per_address) {}
  // False when `address` already holds its share: the caller closes the connection.
  bool Enter(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    int& n = by_address_[address];
    if (n >= per_address_) {
      if (n == 0) by_address_.erase(address);
      ++refused_;
      return false;
    }
    ++n;
    ++open_;
    return true;
  }
  void Leave(const std::string& address) {
    std::function<void()> resume;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = by_address_.find(address); it != by_address_.end() && --it->second <= 0) by_address_.erase(it);
      --open_;
      if (paused_ && open_ < max_) {
        paused_ = false;
        resume = resume_;
      }
    }
    if (resume) resume();
  }
  // True (and remembers `resume`) when accepting must wait for a connection to close.
  bool PauseIfFull(std::function<void()> resume) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return true;
    if (open_ < max_) return false;
    paused_ = true;
    resume_ = std::move(resume);
    return true;
  }
  // The server stops: never resume accepting (the I/O context is going away).
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    paused_ = false;
    resume_ = nullptr;
  }
  int64_t refused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_;
  }

 private:
  const int max_, per_address_;
  mutable std::mutex mu_;
  int open_ = 0;
  bool paused_ = false;
  bool closed_ = false;
  int64_t refused_ = 0;
  std::function<void()> resume_;
  std::map<std::string, int> by_address_;
};

// A request's method, target and headers into `req`; the target's parse status.
absl::Status ReadHead(const http::request<http::string_body>& msg, HttpRequest& req) {
  req.method = std::string(msg.method_string());
  for (const auto& f : msg) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return ParseRequestTarget(std::string_view(msg.target().data(), msg.target().size()), req);
}

// What the server keeps of each connection, whatever its transport.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // True while a streamed response still has something to send.
  virtual bool Streaming() = 0;
  // Closes the socket outright (the server stops; its I/O threads no longer run).
  virtual void Abort() = 0;
};

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// The common name of the peer's certificate when the handshake verified it; "" otherwise.
std::string VerifiedClientName(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return "";
  std::string cn;
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    char buf[256];
    const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf);
    if (n > 0) cn.assign(buf, static_cast<size_t>(n));
  }
  X509_free(cert);
  return cn;
}

// One connection: `Stream` is beast::tcp_stream (HTTP) or TlsStream (HTTPS, the handshake first).
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  bool Streaming() override {
    std::lock_guard<std::mutex> lock(out_mu_);
    return streaming_ && !gone_;
  }
  void Abort() override {
    beast::error_code ec;
    Tcp().socket().close(ec);
  }

  Session(Stream stream, const HttpServerOptions& options, const HttpHandler& handler,
          const HeadCheck& check, asio::thread_pool& workers, std::shared_ptr<ConnectionGate> gate,
          std::string address)
      : stream_(std::move(stream)),
        options_(options),
        handler_(handler),
        check_(check),
        workers_(workers),
        gate_(std::move(gate)),
        address_(std::move(address)) {}
  ~Session() { gate_->Leave(address_); }

  void Start() {
    if constexpr (kTls) {
      // The handshake within the head's time: a client that opens and says nothing is cut off.
      Tcp().expires_after(std::chrono::seconds(options_.head_timeout_s));
      stream_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) return self->Close();
        self->client_cn_ = VerifiedClientName(self->stream_.native_handle());
        self->Read();
      });
    } else {
      asio::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::Read, this->shared_from_this()));
    }
  }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  // The head first, within head_timeout_s (a client that dribbles its headers is cut off), then
  // the body, the whole request within idle_timeout_s. A body is read only once the head has
  // passed the check (the caller may send it).
  void Read() {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(64 * 1024);
    Tcp().expires_after(std::chrono::seconds(options_.head_timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->OnRead(ec, n);
                              if (self->Refused()) return;
                              self->Tcp().expires_after(std::chrono::seconds(self->options_.idle_timeout_s));
                              http::async_read(self->stream_, self->buffer_, *self->parser_,
                                               beast::bind_front_handler(&Session::OnRead, self));
                            });
  }

  // True when the head alone is refused: answered, the body left unread and the connection
  // closing.
  bool Refused() {
    const bool body = parser_->chunked() || parser_->content_length().value_or(0) > 0;
    if (!check_ || !body) return false;
    const http::request<http::string_body>& msg = parser_->get();
    HttpRequest req;
    req.client_cn = client_cn_;
    std::optional<HttpResponse> refusal;
    if (absl::Status target = ReadHead(msg, req); !target.ok()) {
      refusal = ErrorResponse(target);  // answered before its body, like any other refusal
    }
    try {
      if (!refusal) refusal = check_(req);
    } catch (const std::exception& e) {
      log::Error("head check {} {} threw: {}", req.method, req.path, e.what());
      refusal = ErrorResponse(absl::InternalError("internal error"));
    }
    if (!refusal) return false;
    linger_ = true;
    Write(*std::move(refusal), /*head=*/false, /*keep_alive=*/false, msg.version());
    return true;
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::error::eof) {
      return Close();
    }
    if (ec) {
      absl::Status refused = absl::InvalidArgumentError(fmt::format("malformed HTTP request: {}", ec.message()));
      if (ec == http::error::body_limit) {
        refused = ContentTooLarge(fmt::format("request body exceeds the limit of {} bytes", options_.max_body_bytes));
      } else if (ec == http::error::header_limit) {
        refused = HeaderFieldsTooLarge("request headers exceed 64 KiB");
      } else if (ec.category() != http::make_error_code(http::error::bad_target).category() ||
                 ec == http::error::partial_message) {
        return Close();  // a socket error or a client gone mid-request: nobody to answer
      }
      return Write(ErrorResponse(refused), /*head=*/false, /*keep_alive=*/false, 11);
    }
    http::request<http::string_body>& msg = parser_->get();
    HttpRequest req;
    req.client_cn = client_cn_;
    const absl::Status target = ReadHead(msg, req);
    req.body = std::move(msg.body());
    const bool keep_alive = msg.keep_alive();
    const bool head = msg.method() == http::verb::head;
    const unsigned version = msg.version();
    if (!target.ok()) return Write(ErrorResponse(target), head, keep_alive, version);
    // Reads answer from in-memory snapshots and run here, on the I/O thread. Writes wait for
    // the store and the cache, so they run on the worker pool: a slow commit must not stall
    // every other connection.
    if (req.method == "GET" || req.method == "HEAD") {
      return Write(Handle(req), head, keep_alive, version);
    }
    asio::post(workers_, [self = this->shared_from_this(), req = std::move(req), head, keep_alive, version]() mutable {
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
      return ErrorResponse(absl::InternalError("internal error"));
    }
  }

  // The watch side: chunks queued from any thread, written in order on the session's strand.
  bool QueueChunk(std::string chunk) {
    std::lock_guard<std::mutex> lock(out_mu_);
    if (gone_ || ended_) return false;
    if (out_bytes_ + chunk.size() > kMaxQueuedBytes) {
      // A client that does not read: let it go rather than hold its backlog; it resumes with
      // the last resourceVersion it saw.
      gone_ = true;
      asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
      return false;
    }
    out_bytes_ += chunk.size();
    out_.push_back(std::move(chunk));
    KickLocked();
    return true;
  }
  void QueueEnd() {
    std::lock_guard<std::mutex> lock(out_mu_);
    if (gone_ || ended_) return;
    ended_ = true;
    KickLocked();
  }
  static constexpr size_t kMaxQueuedBytes = 8 << 20;

  void KickLocked() {
    if (writing_) return;
    writing_ = true;
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->WriteNextChunk(); });
  }

  void WriteNextChunk() {
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(out_mu_);
      if (gone_) {
        writing_ = false;
        return;
      }
      if (out_.empty()) {
        if (!ended_) {
          writing_ = false;
          return;
        }
        last = true;
      } else {
        current_ = std::move(out_.front());
        out_.pop_front();
        out_bytes_ -= current_.size();
      }
    }
    auto done = [self = this->shared_from_this(), last](beast::error_code ec, size_t) {
      if (ec || last) {
        {
          std::lock_guard<std::mutex> lock(self->out_mu_);
          self->gone_ = true;
          self->writing_ = false;
        }
        return self->Close();
      }
      self->WriteNextChunk();
    };
    if (last) {
      asio::async_write(stream_, http::make_chunk_last(), std::move(done));
    } else {
      asio::async_write(stream_, http::make_chunk(asio::buffer(current_)), std::move(done));
    }
  }

  // Sends the head of a streamed response, then hands the stream its sink.
  void StartStream(HttpResponse r, unsigned version) {
    Tcp().expires_never();  // a watch stays open for as long as it lasts
    {
      std::lock_guard<std::mutex> lock(out_mu_);
      streaming_ = true;
    }
    auto head = std::make_shared<http::response<http::empty_body>>();
    head->version(version);
    head->result(static_cast<http::status>(r.status));
    head->set(http::field::server, "gpuaas");
    head->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) head->set(k, v);
    head->keep_alive(false);
    head->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*head);
    http::async_write_header(
        stream_, *serializer,
        [self = this->shared_from_this(), head, serializer, producer = std::move(r.stream)](beast::error_code ec, size_t) {
          if (ec) return self->Close();
          producer->Open(std::make_shared<Sink>(self));
          self->AwaitClientClose();
        });
  }

  // A client that closes its end ends the stream; anything it sends is ignored.
  void AwaitClientClose() {
    stream_.async_read_some(asio::buffer(discard_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) return self->AwaitClientClose();
      {
        std::lock_guard<std::mutex> lock(self->out_mu_);
        self->gone_ = true;
      }
      self->Close();
    });
  }

  // What a ResponseStream writes to: a weak handle on the session.
  class Sink final : public StreamSink {
   public:
    explicit Sink(const std::shared_ptr<Session>& s) : session_(s) {}
    bool Write(std::string chunk) override {
      std::shared_ptr<Session> s = session_.lock();
      return s != nullptr && s->QueueChunk(std::move(chunk));
    }
    void End() override {
      if (std::shared_ptr<Session> s = session_.lock()) s->QueueEnd();
    }

   private:
    std::weak_ptr<Session> session_;
  };

  void Write(HttpResponse r, bool head, bool keep_alive, unsigned version) {
    if (r.stream && !head) return StartStream(std::move(r), version);
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
                      [self = this->shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
    if (linger_) Linger();
  }

  // After refusing a request whose body is still coming: read and drop what the client sends
  // (for up to 5 s), so that closing does not reset the connection before the client has read
  // the answer. Nothing is kept.
  void Linger() {
    linger_ = false;
    Tcp().expires_after(std::chrono::seconds(5));
    DropInput();
  }
  void DropInput() {
    stream_.async_read_some(asio::buffer(discard_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->DropInput();
    });
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::mutex out_mu_;
  std::deque<std::string> out_;  // guarded by out_mu_
  size_t out_bytes_ = 0;         // guarded by out_mu_
  bool writing_ = false;         // guarded by out_mu_
  bool ended_ = false;           // guarded by out_mu_
  bool gone_ = false;            // guarded by out_mu_
  bool streaming_ = false;       // guarded by out_mu_
  std::string current_;          // the chunk being written (on the strand)
  std::array<char, 512> discard_{};
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  const HttpServerOptions& options_;
  const HttpHandler& handler_;
  const HeadCheck& check_;
  bool linger_ = false;  // on the strand
  asio::thread_pool& workers_;
  std::shared_ptr<ConnectionGate> gate_;
  std::string address_;  // the client's IP address
  std::string client_cn_;  // its verified certificate's common name (HTTPS with a client CA)
};

}  // namespace

// The HTTPS context of `o`'s certificate and key (and client CA): InvalidArgument saying which
// file is wrong.
absl::StatusOr<std::shared_ptr<asio::ssl::context>> MakeTlsContext(const HttpServerOptions& o) {
  beast::error_code ec;
  auto tls = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                   asio::ssl::context::single_dh_use);
  tls->use_certificate_chain_file(o.tls_cert_file, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("TLS certificate {}: {}", o.tls_cert_file, ec.message()));
  tls->use_private_key_file(o.tls_key_file, asio::ssl::context::pem, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("TLS key {}: {}", o.tls_key_file, ec.message()));
  if (SSL_CTX_check_private_key(tls->native_handle()) != 1) {
    return absl::InvalidArgumentError(
        fmt::format("TLS key {} is not the key of certificate {}", o.tls_key_file, o.tls_cert_file));
  }
  if (!o.client_ca_file.empty()) {
    // Asked for, not required: the front proxy presents one, token callers none.
    tls->load_verify_file(o.client_ca_file, ec);
    if (ec) return absl::InvalidArgumentError(fmt::format("client CA {}: {}", o.client_ca_file, ec.message()));
    tls->set_verify_mode(asio::ssl::verify_peer);
    // The CA names sent in the CertificateRequest, so that a client picks the matching certificate.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(tls->native_handle(), names);
    }
  }
  return tls;
}

// What changes when a certificate, key or client CA file is replaced (a Kubernetes Secret
// volume swaps a symbolic link; stat follows it): each file's modification time and size.
std::string TlsFilesSignature(const HttpServerOptions& o) {
  std::string sig;
  for (const std::string* f : {&o.tls_cert_file, &o.tls_key_file, &o.client_ca_file}) {
    struct stat st {};
    if (f->empty() || stat(f->c_str(), &st) != 0) {
      sig += "-;";
      continue;
    }
    sig += fmt::format("{}.{}:{};", st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_size);
  }
  return sig;
}

struct HttpServer::Impl {
  Impl(HttpServerOptions o, HttpHandler h, HeadCheck c)
      : options(std::move(o)),
        handler(std::move(h)),
        check(std::move(c)),
        io(std::max(1, options.threads)),
        acceptor(io),
        workers(static_cast<size_t>(std::max(1, options.worker_threads))),
        gate(std::make_shared<ConnectionGate>(options)),
        retry(io) {}

  template <class Stream>
  void Serve(Stream stream, std::string address) {
    auto session = std::make_shared<Session<Stream>>(std::move(stream), options, handler, check, workers, gate,
                                                     std::move(address));
    {
      std::lock_guard<std::mutex> lock(sessions_mu);
      std::erase_if(sessions, [](const std::weak_ptr<SessionBase>& w) { return w.expired(); });
      sessions.push_back(session);
    }
    session->Start();
  }

  void Accept() {
    // At the connection cap, wait for one to close: new clients queue in the kernel's backlog.
    if (gate->PauseIfFull([this] { asio::post(io, [this] { Accept(); }); })) return;
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // Out of file descriptors (EMFILE, ENFILE) or memory: try again shortly, not at once,
        // which would spin a core while nothing can be accepted.
        if (++accept_errors == 1 || accept_errors % 100 == 0) {
          log::Warn("accept: {} ({} time(s)); retrying in 100 ms", ec.message(), accept_errors);
        }
        retry.expires_after(std::chrono::milliseconds(100));
        retry.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec) Accept();
        });
        return;
      }
      accept_errors = 0;
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      const tcp::endpoint peer = socket.remote_endpoint(ignored);
      std::string address = ignored ? std::string("?") : peer.address().to_string();
      if (gate->Enter(address)) {
        if (std::shared_ptr<asio::ssl::context> ctx = CurrentTls()) {
          Serve(TlsStream(beast::tcp_stream(std::move(socket)), *ctx), std::move(address));
        } else {
          Serve(beast::tcp_stream(std::move(socket)), std::move(address));
        }
      } else {
        socket.close(ignored);  // this address holds its share of connections already
      }
      Accept();
    });
  }

  HttpServerOptions options;
  HttpHandler handler;
  HeadCheck check;
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::thread_pool workers;  // runs handlers that may block (writes)
  std::shared_ptr<ConnectionGate> gate;
  asio::steady_timer retry;  // the accept loop's back-off
  int64_t accept_errors = 0;
  // HTTPS when the options name a certificate. Replaced whole when the files change (a new
  // connection takes the current one); replaced contexts are kept, as connections made with them
  // may still run, and reloads are rare.
  std::mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls ABSL_GUARDED_BY(tls_mu);
  std::vector<std::shared_ptr<asio::ssl::context>> retired_tls ABSL_GUARDED_BY(tls_mu);
  std::string tls_seen;  // the files' signature last loaded or tried (the watcher's)
  std::thread tls_watch;
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  bool stopping = false;  // guarded by watch_mu

  std::shared_ptr<asio::ssl::context> CurrentTls() {
    std::lock_guard<std::mutex> lock(tls_mu);
    return tls;
  }

  absl::Status ReloadTls() {
    absl::StatusOr<std::shared_ptr<asio::ssl::context>> made = MakeTlsContext(options);
    if (!made.ok()) return made.status();
    std::lock_guard<std::mutex> lock(tls_mu);
    retired_tls.push_back(std::move(tls));
    tls = std::move(*made);
    return absl::OkStatus();
  }

  // Reloads the certificate when its files change, looking once a second; a pair that does not
  // load (half written, a key of another certificate) leaves the last good one serving.
  void WatchTlsFiles() {
    std::unique_lock<std::mutex> lock(watch_mu);
    while (!watch_cv.wait_for(lock, std::chrono::milliseconds(options.tls_reload_poll_ms), [&] { return stopping; })) {
      const std::string now = TlsFilesSignature(options);
      if (now == tls_seen) continue;
      tls_seen = now;
      if (absl::Status st = ReloadTls(); st.ok()) {
        log::Info("TLS: {} reloaded; new connections use it", options.tls_cert_file);
      } else {
        log::Warn("TLS: the changed certificate does not load ({}); still serving the last good one",
                  std::string(st.message()));
      }
    }
  }
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<SessionBase>> sessions;  // guarded by sessions_mu

  std::vector<std::shared_ptr<SessionBase>> Live() {
    std::lock_guard<std::mutex> lock(sessions_mu);
    std::vector<std::shared_ptr<SessionBase>> out;
    for (const auto& w : sessions) {
      if (auto s = w.lock()) out.push_back(std::move(s));
    }
    return out;
  }
  std::vector<std::thread> threads;
  int port = 0;
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HeadCheck check)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(check))) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  Impl& s = *impl_;
  beast::error_code ec;
  if (!s.options.client_ca_file.empty() && s.options.tls_cert_file.empty()) {
    return absl::InvalidArgumentError("a client CA needs HTTPS (a certificate and key)");
  }
  if (!s.options.tls_cert_file.empty() || !s.options.tls_key_file.empty()) {
    if (s.options.tls_cert_file.empty() || s.options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("TLS needs both a certificate and its key");
    }
    ASSIGN_OR_RETURN(s.tls, MakeTlsContext(s.options));
    s.tls_seen = TlsFilesSignature(s.options);
    s.tls_watch = std::thread([&s] { s.WatchTlsFiles(); });
  }
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

absl::Status HttpServer::ReloadTls() {
  if (impl_->CurrentTls() == nullptr) return absl::FailedPreconditionError("the server does not serve HTTPS");
  return impl_->ReloadTls();
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.watch_mu);
    s.stopping = true;
  }
  s.watch_cv.notify_all();
  if (s.tls_watch.joinable()) s.tls_watch.join();
  if (s.threads.empty()) return;
  s.gate->Close();
  asio::post(s.io, [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    s.retry.cancel();
  });
  s.workers.join();  // let in-flight writes finish (they commit to the store)
  // Streams that were ended (watches) get up to two seconds to send their last chunk.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::shared_ptr<SessionBase>> live = s.Live();
    if (std::none_of(live.begin(), live.end(), [](const auto& x) { return x->Streaming(); })) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.io.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  // Nothing runs on the sockets any more: close what is still open, so that no client waits.
  for (const auto& session : s.Live()) session->Abort();
}

}  // namespace internal
}  // namespace gpuaas::api
