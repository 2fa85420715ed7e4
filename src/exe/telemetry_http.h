// The HTTP side of telemetry (cpp-httplib, with OpenSSL for https): the scraper's GET of
// dcgm-exporter endpoints, the POST that a remote-write queue hands its batches to, and the GET
// the telemetry history reads back with. telemetry/ stays free of I/O libraries.
#ifndef GPUAAS_EXE_TELEMETRY_HTTP_H_
#define GPUAAS_EXE_TELEMETRY_HTTP_H_

#include <string>

#include "telemetry/history.h"
#include "telemetry/remote_write.h"

namespace gpuaas::exe {

struct ReceiverAuth {
  std::string bearer_token_file;  // read at each POST; empty: no Authorization header
  std::string ca_file;            // for https; empty: the system's CAs (or SSL_CERT_FILE)
};

// POSTs to `url` ("http(s)://host[:port]/path") over one kept-alive connection, with the
// remote-write headers. Connect timeout 5 s, read and write 30 s. Meant for one thread (a queue's).
telemetry::PostFn RemoteWritePost(const std::string& url, const ReceiverAuth& auth, const std::string& user_agent);

// GET of a dcgm-exporter endpoint for the scraper ("http://host:port[/path]", /metrics when no
// path is given): the body of a 200, else Unavailable with the reason.
absl::StatusOr<std::string> FetchMetrics(const std::string& url);

// GETs paths from the query API at `base_url` ("http(s)://host[:port][/prefix]"), a connection
// per request (API threads ask at once); each takes at most about `timeout_s` to connect and as
// long again to answer. A non-200 answer is an error naming its status and the start of its body.
telemetry::HttpGet QueryGet(const std::string& base_url, const ReceiverAuth& auth, double timeout_s);

}  // namespace gpuaas::exe

#endif  // GPUAAS_EXE_TELEMETRY_HTTP_H_
