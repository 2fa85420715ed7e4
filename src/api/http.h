// HTTP requests and responses as the API's handlers see them, independent of the server library.
#ifndef GPUAAS_API_HTTP_H_
#define GPUAAS_API_HTTP_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace gpuaas::api {

struct HttpRequest {
  std::string method;  // "GET"
  std::string path;    // percent-decoded, without the query
  std::multimap<std::string, std::string> query;  // percent-decoded
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The common name of the client certificate the connection presented, when the server's
  // client CA verified it (HTTPS with a client CA); empty otherwise.
  std::string client_cn;

  bool HasParam(std::string_view key) const { return query.find(std::string(key)) != query.end(); }
  // The first value of `key`, or "" when absent.
  std::string Param(std::string_view key) const;
  // The first header named `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  // Every header named `name` (case-insensitive), in order.
  std::vector<std::string> Headers(std::string_view name) const;
};

// Where a streamed response (a watch) writes: chunks go out in order, as the connection
// allows. Thread-safe; never blocks (chunks queue).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Queues a chunk; false once the stream is closed (the client left, the server stops, or the
  // client reads too slowly and its queue passed the limit), after which the writer should let go.
  virtual bool Write(std::string chunk) = 0;
  // Ends the stream (the last chunk) and the connection.
  virtual void End() = 0;
};

// The producer of a streamed body: Open is called once the head went out.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  virtual void Open(std::shared_ptr<StreamSink> sink) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, `body` is ignored: the head goes out with chunked transfer encoding and the
  // stream writes the body for as long as it lasts.
  std::shared_ptr<ResponseStream> stream = nullptr;
};

// Decodes %XX escapes (and '+' as space when `plus_is_space`); false on a malformed escape.
bool PercentDecode(std::string_view in, bool plus_is_space, std::string& out);

// Fills `req.path` and `req.query` from a request target ("/path?k=v&..."), percent-decoded;
// InvalidArgument for a malformed escape or text that is not UTF-8.
absl::Status ParseRequestTarget(std::string_view target, HttpRequest& req);

}  // namespace gpuaas::api

#endif  // GPUAAS_API_HTTP_H_
