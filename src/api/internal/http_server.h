// An HTTP/1.1 server on Boost.Beast, over TCP or TLS (OpenSSL): keep-alive, a fixed pool of I/O threads (event-driven, so a
// connection costs no thread while idle), request size limits. Protocol errors it detects
// itself (malformed request 400, body too large 413, header too large 431) are answered with
// problem+json and the connection is closed. Only src/api may include this.
#ifndef GPUAAS_API_INTERNAL_HTTP_SERVER_H_
#define GPUAAS_API_INTERNAL_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "api/http.h"

namespace gpuaas::api::internal {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  int threads = 2;          // I/O threads; reads are answered on them
  int worker_threads = 8;   // writes, which wait for the store, run here
  size_t max_body_bytes = 1 << 20;
  int idle_timeout_s = 120;  // a whole request (head and body) must arrive within this
  int head_timeout_s = 30;   // the request line and headers (and the wait between requests)
  // Open connections in all and from one address. At the cap the server stops accepting (the
  // kernel's backlog holds new clients) until one closes; past the per-address cap a connection
  // is closed at once, so one client cannot take every slot.
  int max_connections = 10000;
  int max_connections_per_address = 1000;
  // HTTPS with this certificate (chain, PEM) and key; both empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // With HTTPS: clients may present a certificate, which this CA (PEM file) must have signed
  // (a client presenting another is refused at the handshake); its common name reaches the
  // handler as HttpRequest::client_cn. Clients without one are served as before.
  std::string client_ca_file;
  // How often the certificate, key and client CA files are looked at; a change reloads them.
  int tls_reload_poll_ms = 1000;
};

// Called on an I/O thread for every complete request; must not block for long.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Called on an I/O thread with a request's head (its body empty) when a body is to follow: an
// answer refuses the request before a byte of its body is kept (a caller who may not send it),
// and the connection closes after it.
using HeadCheck = std::function<std::optional<HttpResponse>(const HttpRequest&)>;

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler, HeadCheck check = nullptr);
  ~HttpServer();
  absl::Status Start();
  int port() const;
  // Loads the certificate, key and client CA files again (SIGHUP): new connections use them.
  // On an error (InvalidArgument, saying which file) the last good ones stay.
  absl::Status ReloadTls();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_HTTP_SERVER_H_
