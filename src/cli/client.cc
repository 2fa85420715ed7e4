#include "cli/client.h"

#include <cctype>
#include <functional>
#include <string>
#include <vector>

#include <httplib.h>

#include "cli/output.h"
#include "common/clock.h"
#include "common/problem.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/columns.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli::internal {

using nlohmann::json;

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

absl::Status ServerError(int http_status, const std::string& body) {
  const json p = json::parse(body, nullptr, false);
  const std::string reason = p.is_object() ? p.value("reason", "") : "";
  std::string detail = p.is_object() ? p.value("detail", p.value("message", body)) : body;
  if (absl::IsAborted(StatusFromProblem(http_status, reason, ""))) {
    detail += " (it changed meanwhile: run the command again)";
  }
  return StatusFromProblem(
      http_status, reason,
      fmt::format("Error from server ({}): {}", reason.empty() ? std::to_string(http_status) : reason, detail));
}

absl::StatusOr<std::string> Fetch(const ClientOptions& o, const std::string& path) {
  return Send(o, "GET", path, "");
}

absl::StatusOr<std::string> BaseUrl(const std::string& given) {
  std::string url = given;
  while (url.size() > 1 && url.back() == '/') url.pop_back();
  const size_t scheme = url.find("://");
  const bool ok = scheme != std::string::npos && (url.compare(0, scheme, "http") == 0 || url.compare(0, scheme, "https") == 0) &&
                  scheme + 3 < url.size() && url.find('/', scheme + 3) == std::string::npos;
  if (!ok) {
    return absl::InvalidArgumentError(fmt::format(
        "--server (or GPUAAS_SERVER) \"{}\" is not a server address: give http://HOST:PORT or https://HOST:PORT, "
        "e.g. http://127.0.0.1:8080",
        given));
  }
  return url;
}

absl::StatusOr<std::string> Send(const ClientOptions& o, const std::string& method,
                                 const std::string& path, const std::string& body) {
  ASSIGN_OR_RETURN(const std::string base, BaseUrl(o.server));
  httplib::Client client(base);
  if (!client.is_valid()) {
    return absl::InvalidArgumentError(fmt::format(
        "--server \"{}\" is not a valid URL: give http://HOST:PORT or https://HOST:PORT", o.server));
  }
  client.set_connection_timeout(5);
  if (!o.token.empty()) client.set_bearer_token_auth(o.token);
  client.set_read_timeout(60);
  httplib::Result r = method == "POST"     ? client.Post(path, body, "application/json")
                     : method == "PUT"    ? client.Put(path, body, "application/json")
                     : method == "DELETE" ? client.Delete(path)
                                          : client.Get(path);
  if (!r && r.error() == httplib::Error::SSLServerVerification) {
    return absl::UnavailableError(fmt::format(
        "the server at {} gave a certificate this machine does not trust; point SSL_CERT_FILE at the CA that signed "
        "it (for the demo's own: the --tls-cert file)",
        base));
  }
  if (!r) {
    return absl::UnavailableError(fmt::format(
        "cannot reach the gpuaas server at {} ({}); is `gpuaas server` running there? Give its address with "
        "--server URL or GPUAAS_SERVER",
        base, httplib::to_string(r.error())));
  }
  // What the server warns of (a write it took but questions, as kube-apiserver warns), as kubectl
  // prints it.
  if (o.warnings != nullptr) {
    for (size_t i = 0, n = r->get_header_value_count("Warning"); i < n; ++i) {
      std::string w = r->get_header_value("Warning", i);
      // RFC 7234 form: 299 - "text", with \" and \\ inside the quotes.
      if (const size_t q = w.find('"'); q != std::string::npos && w.size() > q + 1 && w.back() == '"') {
        const std::string quoted = w.substr(q + 1, w.size() - q - 2);
        w.clear();
        for (size_t k = 0; k < quoted.size(); ++k) {
          if (quoted[k] == '\\' && k + 1 < quoted.size()) ++k;
          w += quoted[k];
        }
      }
      *o.warnings << "Warning: " << w << "\n";
    }
  }
  if (r->status >= 200 && r->status < 300) return r->body;
  if (r->status == 401) {
    return absl::UnauthenticatedError(
        "Error from server (Unauthorized): give a valid token with --token or GPUAAS_TOKEN");
  }
  return ServerError(r->status, r->body);
}

int Fail(std::ostream& err, const absl::Status& s) {
  err << s.message() << "\n";
  return 1;
}

absl::Status PrintDoc(const std::string& body, Format f, std::ostream& out) {
  absl::StatusOr<std::string> text = f == Format::kYaml ? JsonToYaml(body) : PrettyJson(body);
  if (!text.ok()) return text.status();
  out << *text;
  return absl::OkStatus();
}

std::optional<int> PrintStructured(const ClientOptions& o, const std::string& body, std::ostream& out,
                                   std::ostream& err) {
  if (o.output != "json" && o.output != "yaml") return std::nullopt;
  absl::Status s = PrintDoc(body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
  return s.ok() ? 0 : Fail(err, s);
}

void PrintTable(const std::string& plural, const std::vector<json>& items, std::ostream& out) {
  Table t(model::Columns(plural));
  const Time now = RealClock::Get().Now();
  for (const json& item : items) {
    absl::StatusOr<std::vector<std::string>> row = model::Row(plural, item, now);
    if (row.ok()) t.Add(std::move(*row));
  }
  t.Print(out);
}

absl::Status Watch(const ClientOptions& o, const std::string& base, std::string revision,
                   const std::function<void(const json&)>& on_event) {
  while (true) {
    httplib::Client client(o.server);
    if (!client.is_valid()) return absl::InvalidArgumentError(fmt::format("--server \"{}\" is not a valid URL", o.server));
    client.set_connection_timeout(5);
    client.set_read_timeout(300);  // bookmarks arrive every minute
    if (!o.token.empty()) client.set_bearer_token_auth(o.token);
    std::string path = base + "?watch=1&allowWatchBookmarks=true";
    if (!revision.empty()) path += "&resourceVersion=" + Escape(revision);
    if (!o.selector.empty()) path += "&labelSelector=" + Escape(o.selector);
    std::string buffer, error_body;
    int status = 0;
    httplib::Result r = client.Get(
        path, httplib::Headers{},
        [&](const httplib::Response& res) {
          status = res.status;
          return true;
        },
        [&](const char* data, size_t n) {
          if (status != 200) {
            error_body.append(data, n);
            return true;
          }
          buffer.append(data, n);
          for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
            json e = json::parse(buffer.substr(0, nl), nullptr, false);
            if (!e.is_object()) continue;
            const std::string rv = e["object"]["metadata"].value("resourceVersion", "");
            if (!rv.empty()) revision = rv;
            if (e["type"] == "BOOKMARK") continue;
            if (e["type"] == "ERROR") {
              status = e["object"].value("code", 500);
              error_body = e["object"].dump();
              return false;
            }
            on_event(e);
          }
          return true;
        });
    if (status == 410) {
      return absl::OutOfRangeError("the watch fell too far behind (410 Expired); run the command again to relist");
    }
    if (status != 0 && status != 200) return ServerError(status, error_body);
    if (!r && status == 0) {
      return absl::UnavailableError(fmt::format("cannot reach the gpuaas server at {} ({})", o.server,
                                                httplib::to_string(r.error())));
    }
    // The server ended the watch (its timeout, a restart): go on from the last revision seen.
  }
}

int PrintWritten(const ClientOptions& o, const absl::StatusOr<std::string>& body,
                 const std::string& verb, std::ostream& out, std::ostream& err) {
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  json j = json::parse(*body, nullptr, false);
  const std::string kind = j.is_object() ? j.value("kind", "object") : "object";
  std::string plural = kind == "GpuPool" ? "gpupools" : ToLower(kind) + "s";
  out << plural << "/" << (j.is_object() ? j["metadata"].value("name", "?") : "?") << " " << verb << "\n";
  return 0;
}

}  // namespace gpuaas::cli::internal
