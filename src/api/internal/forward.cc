#include "api/internal/forward.h"

#include <cstdlib>

#include "fmt/format.h"
#include "httplib.h"

namespace gpuaas::api::internal {

absl::StatusOr<HttpResponse> Forward(const HttpRequest& req, const std::string& leader_url, std::string_view self) {
  httplib::Client client(leader_url);
  if (!client.is_valid()) return absl::UnavailableError(fmt::format("the leader's address {} is not a URL", leader_url));
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  client.set_write_timeout(10);
  client.enable_server_certificate_verification(true);
  if (const char* ca = std::getenv("SSL_CERT_FILE"); ca != nullptr && *ca != '\0') client.set_ca_cert_path(ca);
  httplib::Headers headers;
  for (std::string_view name : {"Authorization", "Accept"}) {
    if (std::string v = req.Header(name); !v.empty()) headers.emplace(std::string(name), v);
  }
  headers.emplace(std::string(kForwardedHeader), std::string(self));
  std::string target = req.path;
  char sep = '?';
  for (const auto& [k, v] : req.query) {
    target += sep;
    target += httplib::detail::encode_query_param(k) + "=" + httplib::detail::encode_query_param(v);
    sep = '&';
  }
  std::string content_type = req.Header("Content-Type");
  if (content_type.empty()) content_type = "application/octet-stream";
  httplib::Result res = req.method == "POST"  ? client.Post(target, headers, req.body, content_type)
                        : req.method == "PUT" ? client.Put(target, headers, req.body, content_type)
                                              : client.Get(target, headers);
  if (!res) {
    return absl::UnavailableError(fmt::format("the leader replica at {} cannot be reached ({}); try again",
                                              leader_url, httplib::to_string(res.error())));
  }
  HttpResponse out;
  out.status = res->status;
  out.content_type = res->get_header_value("Content-Type");
  out.body = std::move(res->body);
  for (std::string_view name : {"Retry-After", "Warning", "WWW-Authenticate"}) {
    if (res->has_header(std::string(name))) out.headers.emplace_back(std::string(name), res->get_header_value(std::string(name)));
  }
  out.headers.emplace_back("X-Gpuaas-Served-By", leader_url);
  return out;
}

}  // namespace gpuaas::api::internal
