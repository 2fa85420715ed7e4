// HTTP requests and responses as the API's handlers see them, independent of the server library.
#ifndef GPUAAS_API_HTTP_H_
#define GPUAAS_API_HTTP_H_

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuaas::api {

struct HttpRequest {
  std::string method;  // "GET"
  std::string path;    // percent-decoded, without the query
  std::multimap<std::string, std::string> query;  // percent-decoded
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  bool HasParam(std::string_view key) const { return query.find(std::string(key)) != query.end(); }
  // The first value of `key`, or "" when absent.
  std::string Param(std::string_view key) const;
  // The first header named `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Decodes %XX escapes (and '+' as space when `plus_is_space`); false on a malformed escape.
bool PercentDecode(std::string_view in, bool plus_is_space, std::string& out);

}  // namespace gpuaas::api

#endif  // GPUAAS_API_HTTP_H_
