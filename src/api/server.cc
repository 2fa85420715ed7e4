#include "api/server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <tuple>

#include "api/auth.h"
#include "api/http.h"
#include "api/internal/admin_api.h"
#include "api/internal/billing_api.h"
#include "api/internal/fleet_api.h"
#include "api/internal/forward.h"
#include "api/internal/http_server.h"
#include "api/internal/objects.h"
#include "api/internal/openapi.h"
#include "api/internal/pools_api.h"
#include "api/internal/rate_limit.h"
#include "api/internal/resources.h"
#include "api/internal/router.h"
#include "api/internal/summary_api.h"
#include "api/internal/telemetry_api.h"
#include "api/internal/web.h"
#include "api/metrics.h"
#include "api/problem.h"
#include "common/metrics_text.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api {
namespace {

using internal::Params;
using internal::Route;
using Reply = HttpResponse;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kApiPrefix = "/apis/gpuaas.io/v1";

// Who may call a route: anyone, any authenticated caller (handlers then scope members to their
// project), or operators only.
// kTelemetry: operators and node agents (agent tokens may do nothing else).
// The policies routes share.
constexpr Policy kPublic{Grant::kYes, Grant::kYes, Grant::kYes, Grant::kYes};
constexpr Policy kSignedIn{Grant::kYes, Grant::kYes, Grant::kYes, Grant::kNo};
constexpr Policy kOperatorOnly{Grant::kYes, Grant::kNo, Grant::kNo, Grant::kNo};
constexpr Policy kProjectWork{Grant::kYes, Grant::kOwn, Grant::kNo, Grant::kNo};  // a project's own objects
constexpr Policy kResourceRead{Grant::kYes, Grant::kOwn, Grant::kFleet, Grant::kNo};
constexpr Policy kTelemetryPush{Grant::kYes, Grant::kNo, Grant::kOwn, Grant::kNo};

Grant GrantFor(const Policy& p, const std::optional<Principal>& who) {
  if (!who) return p.anonymous;
  switch (who->role) {
    case Role::kOperator: return p.operator_;
    case Role::kMember: return p.member;
    case Role::kAgent: return p.agent;
  }
  return Grant::kNo;
}

// "localhost", "127.0.0.1" or "[::1]", with or without a port (or no Host: HTTP/1.0 clients).
bool LoopbackHost(std::string_view host) {
  if (host.empty()) return true;
  std::string_view name = host;
  if (name.front() == '[') {
    name = name.substr(0, name.find(']') + 1);
  } else if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) {
    name = name.substr(0, colon);
  }
  return EqualsIgnoreCase(name, "localhost") || name == "127.0.0.1" || name == "[::1]";
}

// Kubernetes clients (kubectl, client-go, GitOps tools) read errors as Kubernetes Status objects,
// and nothing of other bodies: a request under /apis or /openapi that asks for application/json
// (as client-go does) gets one, unless it accepts problem+json too (the dashboard does); one that
// takes anything (curl's */*) gets problem+json. A request that asks for Tables is kubectl's
// wherever it goes.
ErrorBody ErrorBodyFor(const HttpRequest& req) {
  const std::string accept = req.Header("Accept");
  if (accept.find("g=meta.k8s.io") != std::string::npos) return ErrorBody::kKubernetesStatus;
  const bool kube_path = req.path.starts_with("/apis") || req.path.starts_with("/openapi");
  return kube_path && accept.find("application/json") != std::string::npos &&
                 accept.find("problem+json") == std::string::npos
             ? ErrorBody::kKubernetesStatus
             : ErrorBody::kProblem;
}

Reply Refusal(const absl::Status& status, const std::string& allow, ErrorBody body = ErrorBody::kProblem) {
  Reply reply = ErrorResponse(status, body);
  if (reply.status == 401) reply.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gpuaas\"");
  if (reply.status == 405) reply.headers.emplace_back("Allow", allow);
  if (reply.status == 429 || reply.status == 503) reply.headers.emplace_back("Retry-After", "1");
  return reply;
}

}  // namespace

// The server's parts, each serving its routes (api/internal/*_api.h, resources.h), and what
// stands before every handler: the route table, authentication, the callers' rates and the
// routes' policies.
struct ApiServer::Impl {
  Impl(ServerOptions o, store::ObjectCache& c, service::PoolService* p, Authenticator* a, telemetry::Hub* h)
      : options(std::move(o)), cache(c), auth(a), clock(options.clock != nullptr ? *options.clock : RealClock::Get()) {
    if (h != nullptr) telemetry = std::make_unique<internal::TelemetryApi>(*h, cache, gpus, clock);
    billing = std::make_unique<internal::BillingApi>(cache, h, clock);
    if (telemetry) telemetry->AddAlerts([this] { return billing->BudgetAlertsJson(); });
    resources = std::make_unique<internal::ResourceApi>(cache, clock, options.watch_bookmark_interval);
    pools = std::make_unique<internal::PoolsApi>(p, cache, *billing, clock, options.read_your_write_timeout);
    admin = std::make_unique<internal::AdminApi>(p, a, options.defrag, options.clusters);
    fleet = std::make_unique<internal::FleetApi>(cache, gpus, h);
    summary = std::make_unique<internal::SummaryApi>(cache);
    if (!options.web_root.empty()) {
      absl::StatusOr<internal::WebAssets> w = internal::WebAssets::Load(options.web_root);
      if (w.ok()) {
        web.emplace(std::move(*w));
      } else {
        web_error = w.status();
      }
    }
  }

  ServerOptions options;
  store::ObjectCache& cache;
  internal::DecodedGpus gpus{cache};  // the fleet decoded, shared by the routes
  Authenticator* auth;  // null: no authentication, every caller is an operator
  const Clock& clock;   // ServerOptions::clock, or the system clock
  std::unique_ptr<internal::TelemetryApi> telemetry;  // null: no telemetry routes
  std::unique_ptr<internal::BillingApi> billing;
  std::unique_ptr<internal::ResourceApi> resources;  // the objects, their watches and pages
  std::unique_ptr<internal::PoolsApi> pools;
  std::unique_ptr<internal::AdminApi> admin;
  std::unique_ptr<internal::FleetApi> fleet;
  std::unique_ptr<internal::SummaryApi> summary;
  std::optional<internal::WebAssets> web;  // the dashboard, when options.web_root is set
  absl::Status web_error;                  // why it could not be read
  // One limiter per role (operator, member, agent), keyed by the token's user.
  std::array<internal::RateLimiter, 3> limiters{internal::RateLimiter(options.requests_per_second_per_token.operator_),
                                                internal::RateLimiter(options.requests_per_second_per_token.member),
                                                internal::RateLimiter(options.requests_per_second_per_token.agent)};
  // A burst holds at least one body of the largest size, so a low rate slows pushes down rather
  // than refusing a large one for ever.
  std::array<internal::RateLimiter, 3> ingest_limiters{
      internal::RateLimiter(options.telemetry_bytes_per_second_per_token.operator_, "bytes of telemetry",
                            static_cast<double>(options.max_body_bytes)),
      internal::RateLimiter(options.telemetry_bytes_per_second_per_token.member, "bytes of telemetry",
                            static_cast<double>(options.max_body_bytes)),
      internal::RateLimiter(options.telemetry_bytes_per_second_per_token.agent, "bytes of telemetry",
                            static_cast<double>(options.max_body_bytes))};
  std::unique_ptr<internal::HttpServer> http;
  std::atomic<bool> ready{false};
  internal::Router router;  // written once, by Routes(), before the server starts
  std::set<std::pair<std::string, std::string>> dry_runnable;  // (pattern, method); likewise
  std::unique_ptr<RequestMetrics> metrics;  // created once the routes are known

  // The caller: from the bearer token, or everyone is an operator when the server runs without
  // authentication (tests, --insecure-no-auth).
  std::optional<Principal> Identify(const HttpRequest& req) const {
    if (auth == nullptr) return Principal{"anonymous", Role::kOperator, "", "", {}};
    // Through the aggregation layer: the front proxy's certificate vouches for the headers.
    // Anyone else's X-Remote-* headers are not looked at.
    if (!req.client_cn.empty() && !options.front_proxy_ca_file.empty() &&
        (options.front_proxy_names.empty() ||
         std::find(options.front_proxy_names.begin(), options.front_proxy_names.end(), req.client_cn) !=
             options.front_proxy_names.end())) {
      if (std::optional<Principal> p = FrontProxyPrincipal(req.Header("X-Remote-User"), req.Headers("X-Remote-Group"))) {
        return p;
      }
    }
    const std::string h = req.Header("Authorization");
    if (h.size() < 8 || !StartsWithIgnoreCase(h, "Bearer ")) return std::nullopt;
    return auth->Authenticate(Trim(std::string_view(h).substr(7)));
  }

  HttpResponse Dispatch(const HttpRequest& req) {
    const auto start = std::chrono::steady_clock::now();
    Params params;
    std::string allow;
    const std::string method = req.method == "HEAD" ? "GET" : req.method;
    const Route* route = router.Match(req.path, method, params, allow);
    absl::StatusOr<Reply> result = Serve(req, route, method, params, allow);
    Reply reply = result.ok() ? *std::move(result) : Refusal(result.status(), allow, ErrorBodyFor(req));
    metrics->Observe(router.IndexOf(route), RequestMetrics::MethodIndex(req.method), reply.status,
                     std::chrono::steady_clock::now() - start);
    return reply;
  }

  // A request's head, before its body is read: refused when no body could be accepted from
  // this caller (no route, no valid token, a role the route refuses), so strangers cannot make
  // the server hold their bodies. Everything else is decided again on the whole request.
  std::optional<HttpResponse> CheckHead(const HttpRequest& head) {
    Params params;
    std::string allow;
    const std::string method = head.method == "HEAD" ? "GET" : head.method;
    const Route* route = router.Match(head.path, method, params, allow);
    absl::StatusOr<Principal> who = Admit(head, route, method, allow, /*count=*/false);
    if (who.ok()) return std::nullopt;
    Reply reply = Refusal(who.status(), allow);
    metrics->Observe(router.IndexOf(route), RequestMetrics::MethodIndex(head.method), reply.status, {});
    return reply;
  }

  // Where a telemetry request is served when not here: the leader's URL, unless this replica
  // leads (or runs alone), or the request was forwarded to it already.
  std::optional<std::string> ForwardTarget(const HttpRequest& r) const {
    if (!options.leader_url || !r.Header(internal::kForwardedHeader).empty()) return std::nullopt;
    std::string url = options.leader_url();
    if (url.empty()) return std::nullopt;
    return url;
  }

  // Who may call the route, then its handler.
  absl::StatusOr<Reply> Serve(const HttpRequest& req, const Route* route, const std::string& method,
                              const Params& params, const std::string& allow) {
    ASSIGN_OR_RETURN(Principal who, Admit(req, route, method, allow, /*count=*/true));
    // (A DELETE asks in its body, DeleteOptions, as kubectl sends it.)
    const bool dry = req.HasParam("dryRun") || (method == "DELETE" && req.body.find("\"dryRun\"") != std::string::npos);
    if (method != "GET" && dry && !dry_runnable.contains({route->pattern, method})) {
      return absl::InvalidArgumentError(fmt::format(
          "dryRun: {} {} takes no dry run; nothing was done (the writes of projects, pools, workloads, rate cards, "
          "budgets and credit notes do)",
          method, route->pattern));
    }
    return route->methods.at(method).first(req, params, who);
  }

  // The caller, when the route exists and its policy lets this caller in: the Host guard, the
  // token, the caller's request rate (`count`: one request taken) and the route's policy.
  absl::StatusOr<Principal> Admit(const HttpRequest& req, const Route* route, const std::string& method,
                                  const std::string& allow, bool count) {
    if (route == nullptr) {
      // A resource type that does not exist is absent whatever the method, as a GET answers.
      if (std::optional<std::string_view> plural = internal::PluralOf(req.path);
          plural && internal::FindType(*plural) == nullptr) {
        return internal::UnknownResource(*plural);
      }
      if (!allow.empty()) {
        return MethodNotAllowed(fmt::format("{} {} is not allowed; allowed: {}", req.method, req.path, allow));
      }
      return absl::NotFoundError(fmt::format("no route for {} {}", req.method, req.path));
    }
    const Policy& policy = route->methods.at(method).second;
    if (auth == nullptr && !LoopbackHost(req.Header("Host"))) {
      // Without authentication every caller is an operator: only pages of this machine may
      // call, not a web page that renamed its host to 127.0.0.1 (DNS rebinding).
      return absl::PermissionDeniedError(fmt::format(
          "Host \"{}\" is refused: a server without authentication answers only requests for localhost, "
          "127.0.0.1 or [::1] (a guard against DNS rebinding)", req.Header("Host")));
    }
    std::optional<Principal> who = Identify(req);
    if (count && who && auth != nullptr) {
      RETURN_IF_ERROR(limiters[static_cast<size_t>(who->role)].Take(who->user, std::chrono::steady_clock::now()));
    }
    if (GrantFor(policy, who) == Grant::kNo) {
      if (!who) return absl::UnauthenticatedError("a valid bearer token is required (Authorization: Bearer TOKEN)");
      std::vector<std::string> may;
      if (policy.operator_ != Grant::kNo) may.emplace_back("operators");
      if (policy.member != Grant::kNo) may.emplace_back("members");
      if (policy.agent != Grant::kNo) may.emplace_back("node agents");
      auto hint = route->instead.find(method);
      return absl::PermissionDeniedError(fmt::format("user {} ({}) may not {} {}; {} only{}", who->user,
                                                     ToString(who->role), req.method, route->pattern,
                                                     fmt::join(may, " and "),
                                                     hint == route->instead.end() ? "" : "; " + hint->second));
    }
    return who.value_or(Principal{"anonymous", Role::kMember, "", "", {}});
  }

  // /metrics: the requests', the fleet's, the telemetry hub's and the controllers' families,
  // each written by its own MetricsText, then the store's revision.
  Reply Metrics() {
    std::string out;
    metrics->Render(out);
    summary->AppendMetrics(out);
    if (telemetry) telemetry->AppendMetrics(out);
    if (options.more_metrics) options.more_metrics(out);
    MetricsText w(out);
    w.Family("gpuaas_store_revision", "gauge", "Last store revision applied to the read cache.");
    w.Sample("gpuaas_store_revision", {}, cache.Revision());
    return Reply{200, "text/plain; version=0.0.4; charset=utf-8", std::move(out), {}};
  }

  const internal::WebAssets* Web() const { return web ? &*web : nullptr; }

  void Add(std::string pattern, std::string method, Policy policy, internal::Handler h) {
    router.Add(std::move(pattern), std::move(method), policy, std::move(h));
  }
  // A write that takes ?dryRun=All (the pool service's); any other write refuses it.
  void AddDryRunnable(std::string pattern, std::string method, Policy policy, internal::Handler h) {
    dry_runnable.emplace(pattern, method);
    Add(std::move(pattern), std::move(method), policy, std::move(h));
  }

  // Every route, with who may call it.
  void Routes() {
    using R = const HttpRequest&;
    using P = const Params&;
    using W = const Principal&;
    // The dashboard's pages all answer the app (it routes in the browser).
    for (const char* page : {"/", "/fleet", "/fleet/gpus/{uuid}", "/pools", "/monitoring", "/billing"}) {
      Add(page, "GET", kPublic, [this](R r, P, W) { return internal::DashboardPage(Web(), r); });
    }
    Add("/assets/{file}", "GET", kPublic, [this](R r, P p, W) { return internal::DashboardAsset(Web(), r, p.at("file")); });
    Add("/api/v1/fleet/gpus", "GET", kSignedIn, [this](R r, P, W w) -> absl::StatusOr<Reply> {
      // Live utilization and health verdicts are the leader's.
      if (std::optional<std::string> to = ForwardTarget(r); to && telemetry != nullptr) {
        return internal::Forward(r, *to, options.replica_name);
      }
      return fleet->Gpus(r, w);
    });
    Add("/api/v1/catalog", "GET", kSignedIn, [this](R r, P, W) { return fleet->Catalog(r); });
    Add("/healthz", "GET", kPublic, [](R, P, W) { return Reply{200, "text/plain", "ok", {}}; });
    Add("/readyz", "GET", kPublic, [this](R, P, W) -> absl::StatusOr<Reply> {
      if (!ready) return NotReady("the first inventory sync has not finished");
      return Reply{200, "text/plain", "ok", {}};
    });
    Add("/version", "GET", kPublic, [this](R, P, W) {
      nlohmann::json j = {{"gitVersion", options.version}, {"apiVersion", "gpuaas.io/v1"},
                          {"platform", "linux"}};
      return Reply{200, std::string(kJson), j.dump(), {}};
    });
    // Prometheus scrapes without a token; the summary holds fleet-wide counts only.
    Add("/metrics", "GET", kPublic, [this](R, P, W) { return Metrics(); });
    Add("/api/v1/summary", "GET", kPublic, [this](R, P, W) { return summary->Summary(); });
    Add("/api", "GET", kSignedIn, [](R, P, W) { return internal::ApiVersions(); });
    Add("/apis", "GET", kSignedIn, [](R, P, W) { return internal::ApiGroupList(); });
    Add("/apis/gpuaas.io", "GET", kSignedIn, [](R, P, W) { return internal::ApiGroup(); });
    Add(std::string(kApiPrefix), "GET", kSignedIn, [](R, P, W) { return internal::ApiResourceList(); });
    Add("/openapi/v3", "GET", kSignedIn, [](R, P, W) { return internal::OpenApiV3Index(); });
    Add("/openapi/v3/apis/gpuaas.io/v1", "GET", kSignedIn, [](R r, P, W) { return internal::OpenApiV3GroupVersion(r); });
    Add("/openapi/v2", "GET", kSignedIn, [](R r, P, W) { return internal::OpenApiV2(r); });
    // The objects: every project's (or the fleet's), or one project's under namespaces/.
    auto list = [this](R r, P p, W w) { return resources->List(r, p.at("plural"), p.at("namespace"), w); };
    auto get = [this](R r, P p, W w) {
      return resources->Get(r, p.at("plural"), p.at("namespace"), p.at("name"), w);
    };
    Add(std::string(kApiPrefix) + "/{plural}", "GET", kResourceRead, list);
    Add(std::string(kApiPrefix) + "/{plural}/{name}", "GET", kResourceRead, get);
    // Projects and rate cards: patched (merge, JSON patch, server-side apply) and replaced.
    AddDryRunnable(std::string(kApiPrefix) + "/{plural}/{name}", "PATCH", kOperatorOnly,
        [this](R r, P p, W w) { return pools->Patch(r, p.at("plural"), "", p.at("name"), w); });
    AddDryRunnable(std::string(kApiPrefix) + "/{plural}/{name}", "PUT", kOperatorOnly,
        [this](R r, P p, W w) { return pools->Replace(r, p.at("plural"), "", p.at("name"), w); });
    AddDryRunnable(std::string(kApiPrefix) + "/projects", "POST", kOperatorOnly,
        [this](R r, P, W w) { return pools->CreateProject(r, w); });
    AddDryRunnable(std::string(kApiPrefix) + "/projects/{name}/budget", "PUT", kOperatorOnly,
        [this](R r, P p, W w) { return pools->SetBudget(r, p.at("name"), w); });
    AddDryRunnable(std::string(kApiPrefix) + "/ratecards", "POST", kOperatorOnly,
        [this](R r, P, W w) { return pools->CreateRateCard(r, w); });
    Add("/api/v1/projects/{project}/invoices", "GET", kProjectWork,
        [this](R r, P p, W w) { return billing->Invoices(r, std::string(p.at("project")), w); });
    Add("/api/v1/projects/{project}/invoices/{period}", "GET", kProjectWork, [this](R r, P p, W w) {
      return billing->Invoice(r, std::string(p.at("project")), std::string(p.at("period")), w);
    });
    AddDryRunnable("/api/v1/projects/{project}/creditnotes", "POST", kOperatorOnly,
        [this](R r, P p, W w) { return pools->IssueCreditNote(r, p.at("project"), w); });
    Add("/api/v1/billing/focus", "GET", kOperatorOnly, [this](R r, P, W) { return billing->Focus(r); });
    Add("/api/v1/billing/summary", "GET", kOperatorOnly, [this](R r, P, W) { return billing->Summary(r); });
    const std::string pools_path = std::string(kApiPrefix) + "/namespaces/{namespace}/{plural}";
    Add(pools_path, "GET", kProjectWork, list);
    AddDryRunnable(pools_path, "POST", kProjectWork, [this](R r, P p, W w) -> absl::StatusOr<Reply> {
      if (p.at("plural") == model::Workload::kPlural) return pools->CreateWorkload(r, p.at("namespace"), w);
      if (p.at("plural") != model::GpuPool::kPlural) return internal::NotServed(p.at("plural"), "created");
      return pools->CreatePool(r, p.at("namespace"), w);
    });
    AddDryRunnable(pools_path + "/{name}", "DELETE", kProjectWork, [this](R r, P p, W w) -> absl::StatusOr<Reply> {
      if (p.at("plural") == model::GpuPool::kPlural) return pools->DeletePool(r, p.at("namespace"), p.at("name"), w);
      if (p.at("plural") != model::Workload::kPlural) return internal::NotServed(p.at("plural"), "deleted");
      return pools->DeleteWorkload(r, p.at("namespace"), p.at("name"), w);
    });
    Add(pools_path + "/{name}", "GET", kProjectWork, get);
    AddDryRunnable(pools_path + "/{name}", "PATCH", kProjectWork, [this](R r, P p, W w) {
      return pools->Patch(r, p.at("plural"), p.at("namespace"), p.at("name"), w);
    });
    AddDryRunnable(pools_path + "/{name}", "PUT", kProjectWork, [this](R r, P p, W w) {
      return pools->Replace(r, p.at("plural"), p.at("namespace"), p.at("name"), w);
    });
    AddDryRunnable(pools_path + "/{name}/approval", "PUT", kOperatorOnly, [this](R r, P p, W w) -> absl::StatusOr<Reply> {
      if (p.at("plural") != model::GpuPool::kPlural) return internal::UnknownResource(p.at("plural"));
      return pools->Approve(r, p.at("namespace"), p.at("name"), w);
    });
    router.Instead(pools_path + "/{name}/approval", "PUT",
                   "a member may withdraw its own request that is not decided yet: gpuaas pool delete NAME -p "
                   "PROJECT (DELETE .../gpupools/NAME)");
    AddDryRunnable(pools_path + "/{name}/release", "POST", kProjectWork, [this](R r, P p, W w) -> absl::StatusOr<Reply> {
      if (p.at("plural") != model::GpuPool::kPlural) return internal::UnknownResource(p.at("plural"));
      return pools->Release(r, p.at("namespace"), p.at("name"), w);
    });
    Add("/api/v1/audit", "GET", kOperatorOnly, [this](R r, P, W) { return admin->Audit(r); });
    Add("/api/v1/clusters", "GET", kOperatorOnly, [this](R, P, W) { return admin->Clusters(); });
    Add("/api/v1/clusters", "POST", kOperatorOnly, [this](R r, P, W w) { return admin->RegisterCluster(r, w); });
    Add("/api/v1/clusters/{name}", "DELETE", kOperatorOnly,
        [this](R, P p, W w) { return admin->UnregisterCluster(p.at("name"), w); });
    Add("/api/v1/defrag", "GET", kOperatorOnly, [this](R, P, W) { return admin->DefragPlan(); });
    Add("/api/v1/defrag", "POST", kOperatorOnly, [this](R r, P, W w) { return admin->DefragApply(r, w); });
    Add("/api/v1/tokens", "GET", kOperatorOnly, [this](R, P, W) { return admin->Tokens(); });
    Add("/api/v1/tokens", "POST", kOperatorOnly, [this](R r, P, W w) { return admin->CreateToken(r, w); });
    Add("/api/v1/tokens/{id}", "DELETE", kOperatorOnly, [this](R, P p, W) { return admin->RevokeToken(p.at("id")); });
    if (telemetry) {
      // Telemetry lives on the leader (it runs the health controller): the others forward.
      Add("/api/v1/telemetry", "POST", kTelemetryPush, [this](R r, P, W w) -> absl::StatusOr<Reply> {
        if (auth != nullptr) {
          RETURN_IF_ERROR(ingest_limiters[static_cast<size_t>(w.role)].Take(w.user, std::chrono::steady_clock::now(),
                                                                           static_cast<double>(r.body.size())));
        }
        if (std::optional<std::string> to = ForwardTarget(r)) return internal::Forward(r, *to, options.replica_name);
        return telemetry->Ingest(r, w);
      });
      Add("/api/v1/metrics/query", "GET", kProjectWork, [this](R r, P, W w) -> absl::StatusOr<Reply> {
        if (std::optional<std::string> to = ForwardTarget(r)) return internal::Forward(r, *to, options.replica_name);
        return telemetry->Query(r, w);
      });
      Add("/api/v1/alerts", "GET", kOperatorOnly, [this](R r, P, W w) -> absl::StatusOr<Reply> {
        if (std::optional<std::string> to = ForwardTarget(r)) return internal::Forward(r, *to, options.replica_name);
        return telemetry->Alerts(r, w);
      });
      Add("/api/v1/assessment", "GET", kProjectWork, [this](R r, P, W w) -> absl::StatusOr<Reply> {
        if (std::optional<std::string> to = ForwardTarget(r)) return internal::Forward(r, *to, options.replica_name);
        return telemetry->Assessment(r, w);
      });
    }
    Add("/api/v1/whoami", "GET", kSignedIn, [](R, P, W w) {
      nlohmann::json j = {{"user", w.user}, {"role", ToString(w.role)}, {"project", w.project}};
      return Reply{200, std::string(kJson), j.dump(), {}};
    });
  }
};

absl::Status RoleRates::Set(std::string_view role_equals_rate) {
  const size_t eq = role_equals_rate.find('=');
  const std::string_view role = role_equals_rate.substr(0, eq == std::string_view::npos ? 0 : eq);
  std::optional<double> rate;
  if (eq != std::string_view::npos) {
    const std::string text(role_equals_rate.substr(eq + 1));
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && v >= 0 && std::isfinite(v)) rate = v;
  }
  if (!rate) {
    return absl::InvalidArgumentError(fmt::format(
        "\"{}\": expected ROLE=RATE, a role (operator, member, agent or all) and a number >= 0 (0: no limit)",
        role_equals_rate));
  }
  if (role == "all") {
    *this = All(*rate);
  } else if (std::optional<Role> r = ParseRole(role)) {
    (*r == Role::kOperator ? operator_ : *r == Role::kMember ? member : agent) = *rate;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("\"{}\": unknown role \"{}\" (operator, member, agent or all)", role_equals_rate, role));
  }
  return absl::OkStatus();
}

ApiServer::ApiServer(ServerOptions options, store::ObjectCache& cache, service::PoolService* pools,
                     Authenticator* auth, telemetry::Hub* telemetry)
    : impl_(std::make_unique<Impl>(std::move(options), cache, pools, auth, telemetry)) {
  impl_->Routes();
  std::vector<std::string> patterns;
  for (const Route& r : impl_->router.routes()) patterns.push_back(r.pattern);
  impl_->metrics = std::make_unique<RequestMetrics>(std::move(patterns));
}

ApiServer::~ApiServer() { Stop(); }

HttpResponse ApiServer::Handle(const HttpRequest& req) { return impl_->Dispatch(req); }

std::vector<RouteInfo> ApiServer::Routes() const {
  std::vector<RouteInfo> out;
  for (const Route& r : impl_->router.routes()) {
    for (const auto& [method, hp] : r.methods) out.push_back({method, r.pattern, hp.second});
  }
  std::sort(out.begin(), out.end(), [](const RouteInfo& a, const RouteInfo& b) {
    return std::tie(a.pattern, a.method) < std::tie(b.pattern, b.method);
  });
  return out;
}

std::string_view ToString(Grant g) {
  switch (g) {
    case Grant::kNo: return "no";
    case Grant::kYes: return "yes";
    case Grant::kOwn: return "own";
    case Grant::kFleet: return "fleet";
  }
  return "no";
}

absl::Status ApiServer::Start() {
  Impl& s = *impl_;
  RETURN_IF_ERROR(s.web_error);
  internal::HttpServerOptions o;
  o.host = s.options.host;
  o.port = s.options.port;
  o.threads = s.options.threads;
  o.max_body_bytes = s.options.max_body_bytes;
  o.max_connections = s.options.max_connections;
  o.max_connections_per_address = s.options.max_connections_per_address;
  o.head_timeout_s = s.options.head_timeout_s;
  o.tls_cert_file = s.options.tls_cert_file;
  o.tls_key_file = s.options.tls_key_file;
  o.client_ca_file = s.options.front_proxy_ca_file;
  s.http = std::make_unique<internal::HttpServer>(
      o, [&s](const HttpRequest& req) { return s.Dispatch(req); },
      [&s](const HttpRequest& head) { return s.CheckHead(head); });
  return s.http->Start();
}

int ApiServer::port() const { return impl_->http ? impl_->http->port() : 0; }

void ApiServer::Stop() {
  impl_->resources->CloseWatches();  // watches end with their last chunk
  if (impl_->http) impl_->http->Stop();
}

absl::Status ApiServer::ReloadTls() {
  if (!impl_->http) return absl::FailedPreconditionError("the server is not started");
  return impl_->http->ReloadTls();
}

void ApiServer::SetReady(bool ready) {
  // Decode the fleet before the first reader needs it (about 0.5 s for 10,000 GPUs).
  if (ready) (void)impl_->summary->Get();
  impl_->ready = ready;
}

}  // namespace gpuaas::api
