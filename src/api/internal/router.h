// The API server's route table: patterns of literal and {parameter} segments
// ("/apis/gpuaas.io/v1/namespaces/{namespace}/{plural}"), each with a handler and a policy per
// method, and the matching of a request path against them. Routes are added before the server
// starts; matching is then read-only and thread-safe.
#ifndef GPUAAS_API_INTERNAL_ROUTER_H_
#define GPUAAS_API_INTERNAL_ROUTER_H_

#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/auth.h"
#include "api/http.h"
#include "api/server.h"

namespace gpuaas::api::internal {

// Path parameters of a matched route, as views into the request path.
struct Params {
  std::array<std::pair<std::string_view, std::string_view>, 4> kv;
  size_t n = 0;
  // The value of {key}, or "" when the route has no such parameter.
  std::string_view at(std::string_view key) const {
    for (size_t i = 0; i < n; ++i) {
      if (kv[i].first == key) return kv[i].second;
    }
    return {};
  }
};

using Handler = std::function<absl::StatusOr<HttpResponse>(const HttpRequest&, const Params&, const Principal&)>;

struct Route {
  std::string pattern;  // "/apis/gpuaas.io/v1/{plural}/{name}"
  std::vector<std::string> segments;
  std::map<std::string, std::pair<Handler, Policy>> methods;
  // What a caller whom a method's policy refuses may do instead, by method.
  std::map<std::string, std::string> instead;
};

class Router {
 public:
  // Adds `method` on `pattern` (a second Add of the same method replaces the first).
  void Add(std::string pattern, std::string method, Policy policy, Handler h);
  // Says what a caller refused `method` on `pattern` (added before) may do instead.
  void Instead(const std::string& pattern, const std::string& method, std::string hint);

  // The route for `method` on `path`: among the routes whose pattern matches, the one with the
  // method and the most literal segments. Null with `allow` filled when the path matches but no
  // route takes the method; null with `allow` empty when nothing matches.
  const Route* Match(std::string_view path, std::string_view method, Params& params, std::string& allow) const;

  // Every route, in the order added; a route's index is its place here.
  const std::vector<Route>& routes() const { return routes_; }
  // The index of a route Match returned, or routes().size() for none.
  size_t IndexOf(const Route* route) const {
    return route ? static_cast<size_t>(route - routes_.data()) : routes_.size();
  }

 private:
  std::vector<Route> routes_;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_ROUTER_H_
