// Fuzz target for the request path: whole HTTP requests (request line, headers, body) through
// the target parsing, the router, the role policies and every handler, against a server with
// the demo fleet, pools, tokens of each role and telemetry, without sockets. Properties: no
// crash, leak or sanitizer report on any input, and no 5xx answer other than 501 (a route the
// server runs without) for anything a client sends.
//
// Input: "METHOD TARGET\n", then "Name: value\n" header lines, an empty line, and the body.
// The corpus names the tokens "operator-fuzz-token-01", "member-fuzz-token-0001" (project
// vision) and "agent-fuzz-token-00001" (cluster alpha, node h200-01).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "api/auth.h"
#include "api/http.h"
#include "api/server.h"
#include "cluster/simulated/fleet.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/control_plane.h"
#include "service/pools.h"
#include "store/sqlite_store.h"
#include "telemetry/hub.h"

namespace {

using namespace gpuaas;

struct World {
  World() {
    log::SetLevel(log::Level::kError);
    store = std::move(*store::OpenStore("sqlite::memory:"));
    drivers = cluster::simulated::MakeDrivers(cluster::simulated::DemoFleet());
    std::vector<cluster::ClusterDriver*> ds;
    for (auto& d : drivers) ds.push_back(d.get());
    if (!controller::ObserveOnce(*store, ds, RealClock::Get()).ok()) std::abort();
    cache = std::make_unique<store::ObjectCache>(*store);
    std::vector<std::string> kinds = {std::string(api::kTokenKind)};
    for (const api::ResourceType& t : api::ResourceTypes()) kinds.push_back(t.kind);
    if (!cache->Start(kinds).ok()) std::abort();
    pools = std::make_unique<service::PoolService>(*store, RealClock::Get(), [] {
      return std::map<std::string, int64_t>{{"H200-SXM-141GB", 48}, {"H100-SXM5-80GB", 64}, {"A100-80GB", 32}};
    });
    model::Project vision;
    vision.metadata.name = "vision";
    (void)pools->CreateProject(vision, "fuzz");
    auth = std::make_unique<api::Authenticator>(*store, *cache, RealClock::Get());
    (void)auth->AddStaticToken("operator-fuzz-token-01", {"olive", api::Role::kOperator, "", "", {}});
    (void)auth->AddStaticToken("member-fuzz-token-0001", {"mia", api::Role::kMember, "vision", "", {}});
    (void)auth->AddStaticToken("agent-fuzz-token-00001", {"node", api::Role::kAgent, "", "alpha", {"h200-01"}});
    api::ServerOptions o;
    o.read_your_write_timeout = std::chrono::milliseconds(200);
    o.requests_per_second_per_token = api::RoleRates::All(0);
    server = std::make_unique<api::ApiServer>(o, *cache, pools.get(), auth.get(), &hub);
    server->SetReady(true);
  }
  telemetry::Hub hub;
  std::unique_ptr<store::Store> store;
  std::vector<std::unique_ptr<cluster::ClusterDriver>> drivers;
  std::unique_ptr<store::ObjectCache> cache;
  std::unique_ptr<service::PoolService> pools;
  std::unique_ptr<api::Authenticator> auth;
  std::unique_ptr<api::ApiServer> server;
};

std::string_view Line(std::string_view& in) {
  const size_t nl = in.find('\n');
  std::string_view line = in.substr(0, nl);
  in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // one server for every input, as a running one would be
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view first = Line(in);
  const size_t sp = first.find(' ');
  if (sp == std::string_view::npos || sp == 0) return 0;
  api::HttpRequest req;
  req.method = std::string(first.substr(0, sp));
  if (!api::ParseRequestTarget(first.substr(sp + 1), req).ok()) return 0;  // 400 at the edge
  while (!in.empty()) {
    const std::string_view h = Line(in);
    if (h.empty()) break;
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view v = h.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    req.headers.emplace_back(std::string(h.substr(0, colon)), std::string(v));
  }
  req.body = std::string(in);
  const api::HttpResponse r = world->server->Handle(req);
  if (r.status >= 500 && r.status != 501) {
    std::fprintf(stderr, "%s %s answered %d: %s\n", req.method.c_str(), req.path.c_str(), r.status, r.body.c_str());
    std::abort();
  }
  return 0;
}
