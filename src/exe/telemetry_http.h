// The HTTP side of telemetry leaving the process (cpp-httplib, with OpenSSL for https): the
// POST that a remote-write queue hands its batches to. telemetry/ stays free of I/O libraries.
#ifndef GPUAAS_EXE_TELEMETRY_HTTP_H_
#define GPUAAS_EXE_TELEMETRY_HTTP_H_

#include <string>

#include "telemetry/remote_write.h"

namespace gpuaas::exe {

struct ReceiverAuth {
  std::string bearer_token_file;  // read at each POST; empty: no Authorization header
  std::string ca_file;            // for https; empty: the system's CAs (or SSL_CERT_FILE)
};

// POSTs to `url` ("http(s)://host[:port]/path") over one kept-alive connection, with the
// remote-write headers. Connect timeout 5 s, read and write 30 s. Meant for one thread (a queue's).
telemetry::PostFn RemoteWritePost(const std::string& url, const ReceiverAuth& auth, const std::string& user_agent);

}  // namespace gpuaas::exe

#endif  // GPUAAS_EXE_TELEMETRY_HTTP_H_
