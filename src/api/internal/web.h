// The dashboard's built files (web/dist: index.html and assets/), read once at start and served
// from memory by the API server: the pages' paths answer index.html (no-cache), assets/ files
// carry content hashes in their names and are cached for a year. Every answer carries the
// Content-Security-Policy below: nothing loads from another host. Text files are also held
// gzipped (once, at start) for clients that accept it.
#ifndef GPUAAS_API_INTERNAL_WEB_H_
#define GPUAAS_API_INTERNAL_WEB_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/http.h"

namespace gpuaas::api::internal {

inline constexpr std::string_view kDashboardCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

struct WebFile {
  std::string body;
  std::string content_type;
  std::string gzip;  // the body gzipped; empty when that would not be smaller
};

class WebAssets {
 public:
  // Reads `root`/index.html and every file directly in `root`/assets (at most 64 MiB in all).
  // NotFound when index.html is missing; InvalidArgument for a file name outside [A-Za-z0-9._-].
  static absl::StatusOr<WebAssets> Load(const std::string& root);

  const WebFile& index() const { return index_; }
  // The file `name` of assets/, or nullptr.
  const WebFile* Asset(std::string_view name) const;
  size_t files() const { return assets_.size() + 1; }

  // The headers of every dashboard answer; `immutable` for content-hashed assets.
  static std::vector<std::pair<std::string, std::string>> Headers(bool immutable);

 private:
  WebFile index_;
  std::map<std::string, WebFile, std::less<>> assets_;
};

// The answers of the dashboard's routes. Every page's path answers the app (index.html: it
// routes in the browser); assets/ files are served by name. Public, as a login page is: what
// the dashboard shows comes from the API with the user's token. `web` null: the server runs
// without the dashboard, and the pages answer NotFound saying how to build it. The body is the
// gzipped one when the request accepts gzip.
absl::StatusOr<HttpResponse> DashboardPage(const WebAssets* web, const HttpRequest& req);
absl::StatusOr<HttpResponse> DashboardAsset(const WebAssets* web, const HttpRequest& req, std::string_view name);

// The content type of a file by its extension ("application/octet-stream" when unknown).
std::string_view ContentTypeOf(std::string_view name);

// True when an Accept-Encoding header value allows gzip (listed, and not with q=0).
bool AcceptsGzip(std::string_view accept_encoding);

// `in` gzipped (RFC 1952, best compression); empty when zlib fails.
std::string Gzip(std::string_view in);

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_WEB_H_
