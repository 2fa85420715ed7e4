#include "common/problem.h"

#include "common/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas {

namespace {

constexpr std::string_view kHttpPayload = "gpuaas.io/http";  // "STATUS REASON"

absl::StatusCode NearestCode(int http_status) {
  switch (http_status) {
    case 400: case 413: case 414: case 415: case 422: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 405: case 501: return absl::StatusCode::kUnimplemented;
    case 409: return absl::StatusCode::kAborted;
    case 410: return absl::StatusCode::kOutOfRange;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 503: return absl::StatusCode::kUnavailable;
    case 504: return absl::StatusCode::kDeadlineExceeded;
    default: return http_status < 500 ? absl::StatusCode::kFailedPrecondition : absl::StatusCode::kInternal;
  }
}

// A Status of the nearest code that carries `http_status` and `reason` for ProblemFor.
absl::Status HttpError(int http_status, std::string_view reason, std::string_view detail) {
  absl::Status s(NearestCode(http_status), absl::string_view(detail.data(), detail.size()));
  s.SetPayload(absl::string_view(kHttpPayload.data(), kHttpPayload.size()), absl::Cord(fmt::format("{} {}", http_status, reason)));
  return s;
}

}  // namespace

absl::Status MethodNotAllowed(std::string_view detail) { return HttpError(405, "MethodNotAllowed", detail); }
absl::Status ContentTooLarge(std::string_view detail) { return HttpError(413, "RequestEntityTooLarge", detail); }
absl::Status UnsupportedMediaType(std::string_view detail) { return HttpError(415, "UnsupportedMediaType", detail); }
absl::Status TooManyRequests(std::string_view detail) { return HttpError(429, "TooManyRequests", detail); }
absl::Status HeaderFieldsTooLarge(std::string_view detail) { return HttpError(431, "RequestHeaderFieldsTooLarge", detail); }
absl::Status NotReady(std::string_view detail) { return HttpError(503, "NotReady", detail); }

absl::Status StatusFromProblem(int http_status, std::string_view reason, std::string_view message) {
  const absl::string_view msg(message.data(), message.size());
  // The reasons ProblemFor gives codes of their own (409 has three), then the status alone.
  if (reason == "AlreadyExists") return absl::AlreadyExistsError(msg);
  if (reason == "Conflict") return absl::AbortedError(msg);
  if (reason == "FailedPrecondition") return absl::FailedPreconditionError(msg);
  if (reason == "QuotaExceeded") return absl::ResourceExhaustedError(msg);
  if (reason == "ServiceUnavailable") return absl::UnavailableError(msg);
  absl::Status s(NearestCode(http_status), msg);
  if (http_status >= 400 && http_status <= 599 && !reason.empty() && ProblemFor(s).reason != reason) {
    s.SetPayload(absl::string_view(kHttpPayload.data(), kHttpPayload.size()),
                 absl::Cord(fmt::format("{} {}", http_status, reason)));
  }
  return s;
}

std::string KubernetesStatusJson(const Problem& p) {
  return nlohmann::json{{"kind", "Status"},     {"apiVersion", "v1"},   {"metadata", nlohmann::json::object()},
                        {"status", "Failure"},  {"message", p.detail}, {"reason", p.reason},
                        {"code", p.status}}
      .dump();
}

namespace {

// The problem a status code maps to (or the one HttpError attached).
Problem ProblemByCode(const absl::Status& s) {
  std::string detail(s.message());
  if (absl::optional<absl::Cord> http = s.GetPayload(absl::string_view(kHttpPayload.data(), kHttpPayload.size()))) {
    const std::string v(*http);
    const size_t sp = v.find(' ');
    int code = 0;
    if (sp != std::string::npos && absl::SimpleAtoi(v.substr(0, sp), &code) && code >= 400 && code <= 599) {
      return {code, v.substr(sp + 1), detail};
    }
  }
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

}  // namespace

Problem ProblemFor(const absl::Status& s) {
  Problem p = ProblemByCode(s);
  if (absl::optional<absl::Cord> reason =
          s.GetPayload(absl::string_view(kReasonPayload.data(), kReasonPayload.size()))) {
    p.reason = std::string(*reason);
  }
  return p;
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
  // A detail may quote what a client sent; bytes that are not UTF-8 become U+FFFD.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gpuaas
