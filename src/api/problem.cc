#include "api/problem.h"

#include "nlohmann/json.hpp"

namespace gpuaas::api {

Problem ProblemFor(const absl::Status& s) {
  std::string detail(s.message());
  switch (s.code()) {
    case absl::StatusCode::kOk: return {200, "OK", detail};
    case absl::StatusCode::kInvalidArgument: return {400, "BadRequest", detail};
    case absl::StatusCode::kUnauthenticated: return {401, "Unauthorized", detail};
    case absl::StatusCode::kPermissionDenied: return {403, "Forbidden", detail};
    case absl::StatusCode::kNotFound: return {404, "NotFound", detail};
    case absl::StatusCode::kAlreadyExists: return {409, "AlreadyExists", detail};
    case absl::StatusCode::kAborted: return {409, "Conflict", detail};
    case absl::StatusCode::kFailedPrecondition: return {409, "FailedPrecondition", detail};
    case absl::StatusCode::kOutOfRange: return {410, "Expired", detail};
    // As kube-apiserver answers a request over a ResourceQuota: 403 with the quota named.
    case absl::StatusCode::kResourceExhausted: return {403, "QuotaExceeded", detail};
    case absl::StatusCode::kUnimplemented: return {501, "NotImplemented", detail};
    case absl::StatusCode::kUnavailable: return {503, "ServiceUnavailable", detail};
    case absl::StatusCode::kDeadlineExceeded: return {504, "Timeout", detail};
    default: return {500, "InternalError", detail};
  }
}

std::string_view StatusText(int code) {
  switch (code) {
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return code < 400 ? "OK" : code < 500 ? "Client Error" : "Server Error";
  }
}

std::string ProblemJson(const Problem& p) {
  nlohmann::json j = {{"type", "about:blank"},
                      {"title", StatusText(p.status)},
                      {"status", p.status},
                      {"reason", p.reason},
                      {"detail", p.detail}};
  return j.dump();
}

}  // namespace gpuaas::api
