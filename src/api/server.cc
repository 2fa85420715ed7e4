#include "api/server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <thread>

#include "api/metrics.h"
#include "api/problem.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "model/labels.h"
#include "model/summary.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api {
namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kApiPrefix = "/apis/gpuaas.io/v1";

struct Reply {
  int status = 200;
  std::string content_type = std::string(kJson);
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

Reply Error(const absl::Status& s) {
  Problem p = ProblemFor(s);
  return {p.status, std::string(kProblemContentType), ProblemJson(p), {}};
}

Reply ErrorReply(int status, std::string reason, std::string detail) {
  return {status, std::string(kProblemContentType),
          ProblemJson({status, std::move(reason), std::move(detail)}), {}};
}

using Params = std::map<std::string, std::string>;
using Handler = std::function<Reply(const httplib::Request&, const Params&)>;

struct Route {
  std::string pattern;  // "/apis/gpuaas.io/v1/{plural}/{name}"
  std::vector<std::string> segments;
  std::map<std::string, Handler> methods;
};

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  for (std::string_view s : SplitAny(path, "/")) out.emplace_back(s);
  return out;
}

std::string ContinueToken(std::string_view plural, const std::string& ns, const std::string& name) {
  return Base64UrlEncode(fmt::format("v1\x1f{}\x1f{}\x1f{}", plural, ns, name));
}

// The (namespace, name) after which a page continues, or InvalidArgument.
absl::StatusOr<std::pair<std::string, std::string>> ParseContinue(std::string_view plural,
                                                                  std::string_view token) {
  std::optional<std::string> raw = Base64UrlDecode(token);
  std::vector<std::string_view> parts;
  if (raw) parts = Split(*raw, '\x1f');
  if (parts.size() != 4 || parts[0] != "v1" || parts[1] != plural) {
    return absl::InvalidArgumentError(
        "continue: invalid token; pass the metadata.continue value of the previous page unchanged");
  }
  return std::make_pair(std::string(parts[2]), std::string(parts[3]));
}

}  // namespace

const std::vector<ResourceType>& ResourceTypes() {
  static const std::vector<ResourceType> kTypes = {
      {std::string(model::Cluster::kPlural), std::string(model::Cluster::kKind), false},
      {std::string(model::NodeCapacity::kPlural), std::string(model::NodeCapacity::kKind), false},
      {std::string(model::GpuCapacity::kPlural), std::string(model::GpuCapacity::kKind), false},
      {std::string(model::SpecAndCount::kPlural), std::string(model::SpecAndCount::kKind), false},
  };
  return kTypes;
}

struct ApiServer::Impl {
  Impl(ServerOptions o, store::ObjectCache& c) : options(std::move(o)), cache(c) {}

  ServerOptions options;
  store::ObjectCache& cache;
  httplib::Server http;
  std::thread thread;
  int port = 0;
  std::atomic<bool> ready{false};
  std::vector<Route> routes;
  RequestMetrics metrics;

  // The summary is derived from the GpuCapacity snapshot; recomputed only when it changes.
  std::mutex summary_mu;
  std::shared_ptr<const store::KindSnapshot> summary_of;  // guarded by summary_mu
  std::shared_ptr<const model::FleetSummary> summary;     // guarded by summary_mu

  void Add(std::string pattern, std::string method, Handler h) {
    for (Route& r : routes) {
      if (r.pattern == pattern) {
        r.methods[method] = std::move(h);
        return;
      }
    }
    Route r{pattern, SplitPath(pattern), {}};
    r.methods[method] = std::move(h);
    routes.push_back(std::move(r));
  }

  const Route* Match(std::string_view path, Params& params) const {
    std::vector<std::string> segs = SplitPath(path);
    for (const Route& r : routes) {
      if (r.segments.size() != segs.size()) continue;
      Params p;
      bool ok = true;
      for (size_t i = 0; i < segs.size() && ok; ++i) {
        const std::string& want = r.segments[i];
        if (want.size() > 2 && want.front() == '{' && want.back() == '}') {
          p[want.substr(1, want.size() - 2)] = segs[i];
        } else {
          ok = want == segs[i];
        }
      }
      if (ok) {
        params = std::move(p);
        return &r;
      }
    }
    return nullptr;
  }

  void Dispatch(const httplib::Request& req, httplib::Response& res) {
    const auto start = std::chrono::steady_clock::now();
    Params params;
    const Route* route = Match(req.path, params);
    Reply reply;
    std::string route_label = route ? route->pattern : "unmatched";
    if (route == nullptr) {
      reply = ErrorReply(404, "NotFound", fmt::format("no route for {} {}", req.method, req.path));
    } else {
      std::string method = req.method == "HEAD" ? "GET" : req.method;
      auto it = route->methods.find(method);
      if (it == route->methods.end()) {
        std::string allow;
        for (const auto& [m, h] : route->methods) allow += (allow.empty() ? "" : ", ") + m;
        reply = ErrorReply(405, "MethodNotAllowed",
                           fmt::format("{} does not allow {}; allowed: {}", route->pattern,
                                       req.method, allow));
        reply.headers.emplace_back("Allow", allow);
      } else {
        try {
          reply = it->second(req, params);
        } catch (const std::exception& e) {
          log::Error("handler {} {} threw: {}", req.method, req.path, e.what());
          reply = ErrorReply(500, "InternalError", "internal error");
        }
      }
    }
    res.status = reply.status;
    for (auto& [k, v] : reply.headers) res.set_header(k, v);
    res.set_header("Content-Type", reply.content_type);
    res.body = std::move(reply.body);
    metrics.Observe(req.method, route_label, reply.status,
                    std::chrono::steady_clock::now() - start);
  }

  // --- handlers -------------------------------------------------------------------------

  static const ResourceType* FindType(const std::string& plural) {
    for (const ResourceType& t : ResourceTypes()) {
      if (t.plural == plural) return &t;
    }
    return nullptr;
  }

  Reply UnknownResource(const std::string& plural) {
    return ErrorReply(404, "NotFound",
                      fmt::format("the server has no resource type \"{}\" in gpuaas.io/v1", plural));
  }

  Reply List(const httplib::Request& req, const Params& p) {
    const ResourceType* type = FindType(p.at("plural"));
    if (type == nullptr) return UnknownResource(p.at("plural"));
    absl::StatusOr<model::LabelSelector> selector =
        model::LabelSelector::Parse(req.get_param_value("labelSelector"));
    if (!selector.ok()) return Error(selector.status());
    size_t limit = 0;
    if (req.has_param("limit")) {
      std::optional<int64_t> l = ParseInt(req.get_param_value("limit"));
      if (!l || *l < 0) {
        return Error(absl::InvalidArgumentError(fmt::format(
            "limit: \"{}\" is not a non-negative integer", req.get_param_value("limit"))));
      }
      limit = static_cast<size_t>(*l);
    }
    std::shared_ptr<const store::KindSnapshot> snap = cache.Snapshot(type->kind);
    const auto& items = snap->items;
    size_t begin = 0;
    if (req.has_param("continue") && !req.get_param_value("continue").empty()) {
      absl::StatusOr<std::pair<std::string, std::string>> after =
          ParseContinue(type->plural, req.get_param_value("continue"));
      if (!after.ok()) return Error(after.status());
      begin = static_cast<size_t>(
          std::upper_bound(items.begin(), items.end(), *after,
                           [](const std::pair<std::string, std::string>& key, const auto& obj) {
                             return key < std::make_pair(obj->ns, obj->name);
                           }) -
          items.begin());
    }
    std::string body;
    body.reserve(256 + (limit ? std::min(limit, items.size()) : items.size()) *
                           (items.empty() ? 0 : items[0]->json.size() + 1));
    body += fmt::format(R"({{"apiVersion":"gpuaas.io/v1","kind":"{}List","items":[)", type->kind);
    size_t n = 0;
    size_t i = begin;
    for (; i < items.size(); ++i) {
      if (!selector->Empty() && !selector->Matches(items[i]->labels)) continue;
      if (limit && n == limit) break;
      if (n++) body += ',';
      body += items[i]->json;
    }
    body += fmt::format(R"(],"metadata":{{"resourceVersion":"{}")", snap->revision);
    if (i < items.size()) {
      // More may follow: hand out a token naming the last item returned.
      size_t last = i;
      while (last > begin) {
        --last;
        if (selector->Empty() || selector->Matches(items[last]->labels)) break;
      }
      body += fmt::format(R"(,"continue":"{}")",
                          ContinueToken(type->plural, items[last]->ns, items[last]->name));
      if (selector->Empty()) body += fmt::format(R"(,"remainingItemCount":{})", items.size() - i);
    }
    body += "}}";
    return {200, std::string(kJson), std::move(body), {}};
  }

  Reply GetOne(const httplib::Request&, const Params& p) {
    const ResourceType* type = FindType(p.at("plural"));
    if (type == nullptr) return UnknownResource(p.at("plural"));
    std::shared_ptr<const store::CachedObject> obj = cache.Get(type->kind, "", p.at("name"));
    if (!obj) {
      return ErrorReply(404, "NotFound",
                        fmt::format("{} \"{}\" not found", type->plural, p.at("name")));
    }
    return {200, std::string(kJson), obj->json, {}};
  }

  Reply Discovery(const httplib::Request&, const Params&) {
    nlohmann::json j = {{"kind", "APIResourceList"},
                        {"apiVersion", "v1"},
                        {"groupVersion", "gpuaas.io/v1"},
                        {"resources", nlohmann::json::array()}};
    for (const ResourceType& t : ResourceTypes()) {
      j["resources"].push_back({{"name", t.plural},
                                {"kind", t.kind},
                                {"namespaced", t.namespaced},
                                {"verbs", {"get", "list"}}});
    }
    return {200, std::string(kJson), j.dump(), {}};
  }

  std::shared_ptr<const model::FleetSummary> Summary() {
    std::shared_ptr<const store::KindSnapshot> snap = cache.Snapshot(model::GpuCapacity::kKind.data());
    std::lock_guard<std::mutex> lock(summary_mu);
    if (summary && summary_of == snap) return summary;
    std::vector<model::GpuCapacity> gpus;
    gpus.reserve(snap->items.size());
    for (const auto& obj : snap->items) {
      absl::StatusOr<model::GpuCapacity> g = model::Decode<model::GpuCapacity>(obj->json);
      if (g.ok()) gpus.push_back(std::move(*g));
    }
    summary = std::make_shared<model::FleetSummary>(model::Summarize(gpus));
    summary_of = snap;
    return summary;
  }

  Reply SummaryReply(const httplib::Request&, const Params&) {
    std::shared_ptr<const model::FleetSummary> s = Summary();
    auto count = [](const model::FleetSummary::ModelCount& c) {
      return nlohmann::json{{"gpus", c.gpus}, {"migEnabled", c.mig_enabled}, {"full", c.full},
                            {"unhealthy", c.unhealthy}};
    };
    nlohmann::json by_model = nlohmann::json::array();
    for (const auto& [m, c] : s->by_model) {
      nlohmann::json e = count(c);
      e["model"] = m;
      by_model.push_back(std::move(e));
    }
    nlohmann::json logical = nlohmann::json::array();
    for (const auto& [key, d] : s->logical) {
      logical.push_back({{"model", key.first}, {"profile", key.second},
                         {"count", d.count}, {"allocated", d.allocated}, {"free", d.free()}});
    }
    nlohmann::json physical = count(s->physical);
    physical["byModel"] = std::move(by_model);
    nlohmann::json j = {
        {"apiVersion", "gpuaas.io/v1"},
        {"kind", "FleetSummary"},
        {"clusters", cache.Snapshot(model::Cluster::kKind.data())->items.size()},
        {"nodes", cache.Snapshot(model::NodeCapacity::kKind.data())->items.size()},
        {"physical", std::move(physical)},
        {"logical", {{"count", s->logical_total.count},
                     {"allocated", s->logical_total.allocated},
                     {"free", s->logical_total.free()},
                     {"byProfile", std::move(logical)}}},
    };
    return {200, std::string(kJson), j.dump(), {}};
  }

  Reply Metrics(const httplib::Request&, const Params&) {
    std::string out;
    metrics.Render(out);
    std::shared_ptr<const model::FleetSummary> s = Summary();
    out += "# HELP gpuaas_fleet_gpus Physical GPUs known to gpuaas, by model and MIG mode.\n";
    out += "# TYPE gpuaas_fleet_gpus gauge\n";
    for (const auto& [m, c] : s->by_model) {
      out += fmt::format("gpuaas_fleet_gpus{{model=\"{}\",mig=\"enabled\"}} {}\n", m, c.mig_enabled);
      out += fmt::format("gpuaas_fleet_gpus{{model=\"{}\",mig=\"disabled\"}} {}\n", m, c.full);
    }
    out += "# HELP gpuaas_fleet_devices Logical devices (full GPUs, MIG instances) by state.\n";
    out += "# TYPE gpuaas_fleet_devices gauge\n";
    for (const auto& [key, d] : s->logical) {
      out += fmt::format("gpuaas_fleet_devices{{model=\"{}\",profile=\"{}\",state=\"allocated\"}} {}\n",
                         key.first, key.second, d.allocated);
      out += fmt::format("gpuaas_fleet_devices{{model=\"{}\",profile=\"{}\",state=\"free\"}} {}\n",
                         key.first, key.second, d.free());
    }
    out += "# HELP gpuaas_store_revision Last store revision applied to the read cache.\n";
    out += "# TYPE gpuaas_store_revision gauge\n";
    out += fmt::format("gpuaas_store_revision {}\n", cache.Revision());
    return {200, "text/plain; version=0.0.4; charset=utf-8", std::move(out), {}};
  }

  void Routes() {
    using R = const httplib::Request&;
    using P = const Params&;
    Add("/healthz", "GET", [](R, P) { return Reply{200, "text/plain", "ok", {}}; });
    Add("/readyz", "GET", [this](R, P) {
      return ready ? Reply{200, "text/plain", "ok", {}}
                   : ErrorReply(503, "NotReady", "the first inventory sync has not finished");
    });
    Add("/version", "GET", [this](R, P) {
      nlohmann::json j = {{"gitVersion", options.version}, {"apiVersion", "gpuaas.io/v1"},
                          {"platform", "linux"}};
      return Reply{200, std::string(kJson), j.dump(), {}};
    });
    Add("/metrics", "GET", [this](R r, P p) { return Metrics(r, p); });
    Add("/api/v1/summary", "GET", [this](R r, P p) { return SummaryReply(r, p); });
    Add(std::string(kApiPrefix), "GET", [this](R r, P p) { return Discovery(r, p); });
    Add(std::string(kApiPrefix) + "/{plural}", "GET", [this](R r, P p) { return List(r, p); });
    Add(std::string(kApiPrefix) + "/{plural}/{name}", "GET",
        [this](R r, P p) { return GetOne(r, p); });
  }
};

ApiServer::ApiServer(ServerOptions options, store::ObjectCache& cache)
    : impl_(std::make_unique<Impl>(std::move(options), cache)) {
  impl_->Routes();
}

ApiServer::~ApiServer() { Stop(); }

absl::Status ApiServer::Start() {
  Impl& s = *impl_;
  const int threads = std::max(1, s.options.threads);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_tcp_nodelay(true);
  // SO_REUSEADDR only: the library's default also sets SO_REUSEPORT, which would let a second
  // server bind the same port and silently share its traffic.
  s.http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.http.set_keep_alive_max_count(100000);
  s.http.set_keep_alive_timeout(5);
  s.http.set_read_timeout(10);
  s.http.set_payload_max_length(s.options.max_body_bytes);
  auto dispatch = [&s](const httplib::Request& req, httplib::Response& res) { s.Dispatch(req, res); };
  for (const char* m : {"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    const std::string method = m;
    if (method == "GET") s.http.Get(".*", dispatch);
    if (method == "POST") s.http.Post(".*", dispatch);
    if (method == "PUT") s.http.Put(".*", dispatch);
    if (method == "PATCH") s.http.Patch(".*", dispatch);
    if (method == "DELETE") s.http.Delete(".*", dispatch);
    if (method == "OPTIONS") s.http.Options(".*", dispatch);
  }
  // Errors raised by the HTTP library itself (413 body too large, 400 malformed request, 414)
  // get a problem+json body too; our own error replies already have one.
  s.http.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string reason = res.status == 413 ? "RequestEntityTooLarge"
                         : res.status == 414 ? "RequestURITooLong"
                         : res.status == 404 ? "NotFound"
                         : res.status == 405 ? "MethodNotAllowed"
                                             : "BadRequest";
    std::string detail = res.status == 413 ? "request body exceeds the server's limit"
                                           : std::string(StatusText(res.status));
    res.set_content(ProblemJson({res.status, reason, detail}), std::string(kProblemContentType));
    return httplib::Server::HandlerResponse::Handled;
  }));
  if (s.options.port == 0) {
    s.port = s.http.bind_to_any_port(s.options.host);
  } else {
    s.port = s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
  }
  if (s.port <= 0) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}:{} (in use, or not a local address)", s.options.host,
                    s.options.port));
  }
  s.thread = std::thread([&s] { s.http.listen_after_bind(); });
  // stop() is a no-op until the accept loop runs, so wait for it: a Stop() right after Start()
  // would otherwise leave the loop running and the join hanging.
  for (int i = 0; i < 5000 && !s.http.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return absl::OkStatus();
}

int ApiServer::port() const { return impl_->port; }

void ApiServer::Stop() {
  if (impl_->thread.joinable()) {
    impl_->http.stop();
    impl_->thread.join();
  }
}

void ApiServer::SetReady(bool ready) { impl_->ready = ready; }

}  // namespace gpuaas::api
