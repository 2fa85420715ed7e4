#include "exe/server_main.h"

#include <signal.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "api/auth.h"
#include "api/server.h"
#include "billing/billing.h"
#include "cluster/kubernetes/client_config.h"
#include "cluster/kubernetes/driver.h"
#include "cluster/kubernetes/webhook_server.h"
#include "cluster/simulated/fleet.h"
#include "cluster/simulated/fleet_simulation.h"
#include "service/clusters.h"
#include "service/defrag.h"
#include "httplib.h"
#include "telemetry/hub.h"
#include "telemetry/scraper.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/log.h"
#include "common/strings.h"
#include "common/status.h"
#include "fmt/format.h"
#include "controller/control_plane.h"
#include "controller/runtime/leader_election.h"
#include "store/fenced_store.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "nlohmann/json.hpp"
#include "service/pools.h"
#include "store/cache.h"
#include "store/store.h"

namespace gpuaas::exe {
namespace {

// The demo's rate card, installed when the store has none: list prices per device-hour in USD.
// Illustrative figures (an H100 SXM at 3.99 USD an hour is a public on-demand price of 2026);
// MIG instances are priced by their compute slices.
void InstallDemoRateCard(store::Store& db, service::PoolService& pools) {
  absl::StatusOr<std::vector<store::Record>> cards = db.List(model::RateCard::kKind, "");
  if (!cards.ok() || !cards->empty()) return;
  model::RateCard card;
  card.metadata.name = "demo-list-prices";
  card.spec.currency = "USD";
  card.spec.effective_from = billing::MonthOf(RealClock::Get().Now()).start;
  card.spec.mig_pricing = model::RateCard::MigPricing::kCompute;
  card.spec.prices = {{"H200-SXM-141GB", "full", 4'500'000}, {"H100-SXM5-80GB", "full", 3'990'000},
                      {"A100-80GB", "full", 1'800'000},      {"B200-180GB", "full", 6'690'000},
                      {"L40S-48GB", "full", 1'200'000}};
  if (absl::StatusOr<model::RateCard> made = pools.CreateRateCard(card, "gpuaas-demo"); !made.ok()) {
    log::Warn("demo rate card not installed: {}", made.status().message());
  }
}

// The demo's operator and member tokens, kept in its store (kind DemoTokens) so that a restart
// on the same store keeps them working, as it keeps the state they go with: the exported
// GPUAAS_TOKEN and dashboard sessions stay valid. A demo store only: these two secrets sit in it
// in the clear (every other token is stored hashed). New ones when the store has none, or the
// kept ones no longer work (revoked); earlier demo tokens are then revoked.
struct DemoTokens {
  std::string operator_token;
  std::string member_token;
  bool kept = false;
};

absl::StatusOr<DemoTokens> KeepDemoTokens(store::Store& db, api::Authenticator& auth) {
  const store::Key key{"DemoTokens", "", "demo"};
  ASSIGN_OR_RETURN(std::optional<store::Record> have, db.Get(key));
  if (have) {
    const nlohmann::json j = nlohmann::json::parse(have->data, nullptr, false);
    DemoTokens t{j.is_object() ? j.value("operator", "") : "", j.is_object() ? j.value("member", "") : "", true};
    std::optional<api::Principal> op = auth.Authenticate(t.operator_token);
    std::optional<api::Principal> member = auth.Authenticate(t.member_token);
    if (op && member && op->role == api::Role::kOperator && member->project == "demo") return t;
  }
  if (absl::StatusOr<std::vector<api::TokenInfo>> old = auth.List(); old.ok()) {
    for (const api::TokenInfo& t : *old) {
      if (t.created_by == "gpuaas-demo") (void)auth.Revoke(t.id);
    }
  }
  ASSIGN_OR_RETURN(auto op, auth.Create("demo-operator", api::Role::kOperator, "", "gpuaas-demo"));
  ASSIGN_OR_RETURN(auto member, auth.Create("demo-member", api::Role::kMember, "demo", "gpuaas-demo"));
  const nlohmann::json j = {{"operator", op.first}, {"member", member.first}};
  RETURN_IF_ERROR(db.Transact([&](store::Txn& tx) { return tx.Put(key, "", j.dump(), store::kAnyVersion); }));
  return DemoTokens{op.first, member.first, false};
}

// On the demo's first start, project demo holds a pool in use (approved, billed from then) and a
// request waiting for an operator's decision, so the dashboard's queue and bills have something
// to show. A100s only: the H100s and H200s stay free to try things with.
void SeedDemoPools(service::PoolService& pools) {
  model::GpuPool training;
  training.metadata.name = "training";
  training.metadata.ns = "demo";
  training.spec.items = {{"A100-80GB", "full", 2}};
  if (pools.CreatePool(training, "demo-member").ok()) {
    (void)pools.Approve("demo", "training", true, "demo: approved at the first start", "gpuaas-demo");
  }
  model::GpuPool inference;
  inference.metadata.name = "inference";
  inference.metadata.ns = "demo";
  inference.spec.items = {{"A100-80GB", "1g.10gb", 4}, {"A100-80GB", "full", 1}};
  if (absl::StatusOr<model::GpuPool> made = pools.CreatePool(inference, "demo-member"); !made.ok()) {
    log::Warn("demo pool request not created: {}", made.status().message());
  }
}

// "NAME=KUBECONFIG[#CONTEXT]" or "NAME=in-cluster": a Kubernetes driver, not started.
absl::StatusOr<std::unique_ptr<cluster::kubernetes::KubernetesDriver>> KubernetesDriverFor(const std::string& arg) {
  namespace k8s = cluster::kubernetes;
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    return absl::InvalidArgumentError(fmt::format("--kubernetes \"{}\": expected NAME=KUBECONFIG[#CONTEXT] or NAME=in-cluster", arg));
  }
  const std::string name = arg.substr(0, eq);
  if (absl::Status s = model::ValidateName(name); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format("--kubernetes: cluster name \"{}\": {}", name, s.message()));
  }
  std::string source = arg.substr(eq + 1);
  absl::StatusOr<k8s::ClientConfig> config;
  if (source == "in-cluster") {
    config = k8s::InClusterConfig(
        [](const std::string& var) {
          const char* v = std::getenv(var.c_str());
          return std::string(v == nullptr ? "" : v);
        },
        ReadWholeFile);
  } else {
    std::string context;
    if (const size_t hash = source.rfind('#'); hash != std::string::npos) {
      context = source.substr(hash + 1);
      source.resize(hash);
    }
    config = k8s::ParseKubeconfigFile(source, context, ReadWholeFile);
  }
  if (!config.ok()) {
    return absl::Status(config.status().code(), fmt::format("--kubernetes {}: {}", name, config.status().message()));
  }
  absl::StatusOr<std::unique_ptr<k8s::KubernetesDriver>> driver = k8s::KubernetesDriver::Make(name, *config);
  if (!driver.ok()) {
    return absl::Status(driver.status().code(), fmt::format("--kubernetes {}: {}", name, driver.status().message()));
  }
  return driver;
}

// The driver of a cluster registered through the API, not started. InvalidArgument when its
// kubeconfig does not make a client (the API refuses such registrations).
absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>> RegisteredDriver(const model::ClusterRegistration& r) {
  cluster::kubernetes::DriverOptions options;
  options.display_name = r.spec.display_name;
  options.region = r.spec.region;
  ASSIGN_OR_RETURN(std::unique_ptr<cluster::kubernetes::KubernetesDriver> d,
                   cluster::kubernetes::DriverFromKubeconfig(r.metadata.name, r.spec.kubeconfig, r.spec.context, options));
  return std::shared_ptr<cluster::ClusterDriver>(std::move(d));
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

int RunServer(const ServerFlags& flags, const std::string& version) {
  log::Level level;
  if (!log::ParseLevel(flags.log_level, &level)) {
    std::cerr << "--log-level: use debug, info, warn, error or off\n";
    return 2;
  }
  log::SetLevel(level);

  const size_t colon = flags.listen.rfind(':');
  std::optional<int64_t> port =
      colon == std::string::npos ? std::nullopt : ParseInt(flags.listen.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    std::cerr << "--listen: expected HOST:PORT, e.g. 127.0.0.1:8080\n";
    return 2;
  }
  std::string host = flags.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const bool tls = !flags.tls_cert.empty() || !flags.tls_key.empty();
  if (tls && (flags.tls_cert.empty() || flags.tls_key.empty())) {
    std::cerr << "--tls-cert and --tls-key go together\n";
    return 2;
  }
  if (!flags.requestheader_client_ca.empty() && !tls) {
    std::cerr << "--requestheader-client-ca-file needs HTTPS: the front proxy's certificate is checked in the TLS "
                 "handshake (give --tls-cert and --tls-key)\n";
    return 2;
  }
  if (!IsLoopback(host) && !flags.allow_remote && !tls) {
    std::cerr << "refusing to listen on " << flags.listen
              << ": plain HTTP serves loopback only; give the API a certificate (--tls-cert, --tls-key), or pass "
                 "--allow-insecure-remote to listen there anyway\n";
    return 2;
  }

  if (flags.no_auth && !IsLoopback(host)) {
    std::cerr << "--insecure-no-auth serves loopback only\n";
    return 2;
  }
  int sources = (flags.demo ? 1 : 0) + (flags.fleet_file.empty() ? 0 : 1) +
                (flags.synthetic_gpus > 0 ? 1 : 0);
  if (sources > 1) {
    std::cerr << "choose one of --demo, --fleet FILE and --synthetic-gpus N\n";
    return 2;
  }
  cluster::simulated::FleetSpec fleet;
  if (flags.demo) {
    fleet = cluster::simulated::DemoFleet();
  } else if (!flags.fleet_file.empty()) {
    absl::StatusOr<cluster::simulated::FleetSpec> f = cluster::simulated::LoadFleetFile(flags.fleet_file);
    if (!f.ok()) {
      std::cerr << f.status().message() << "\n";
      return 2;
    }
    fleet = *f;
  } else if (flags.synthetic_gpus > 0) {
    fleet = cluster::simulated::SyntheticFleet(flags.synthetic_gpus, 2);
  }

  // Block the stop signals in every thread; the main thread waits for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // not a stop: reloads the TLS certificate
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<store::Store>> st = store::OpenStore(flags.db);
  if (!st.ok()) {
    std::cerr << "cannot open store " << store::RedactedUrl(flags.db) << ": " << st.status().message() << "\n";
    return 1;
  }
  store::Store& db = **st;

  // The read cache follows the store's change feed; the API and the controllers' informers
  // read from it.
  store::ObjectCache cache(db);
  std::set<std::string> kinds = {std::string(api::kTokenKind)};
  for (const api::ResourceType& t : api::ResourceTypes()) kinds.insert(t.kind);
  for (const std::string& k : controller::ControlPlaneKinds()) kinds.insert(k);
  if (absl::Status s = cache.Start({kinds.begin(), kinds.end()}); !s.ok()) {
    std::cerr << "cannot load the store: " << s.message() << "\n";
    return 1;
  }

  // The controllers, on one manager.
  std::vector<std::unique_ptr<cluster::ClusterDriver>> drivers = cluster::simulated::MakeDrivers(fleet);
  const size_t simulated_clusters = drivers.size();
  std::vector<cluster::kubernetes::KubernetesDriver*> kubernetes;
  for (const std::string& arg : flags.kubernetes) {
    absl::StatusOr<std::unique_ptr<cluster::kubernetes::KubernetesDriver>> d = KubernetesDriverFor(arg);
    if (!d.ok()) {
      std::cerr << d.status().message() << "\n";
      return 2;
    }
    kubernetes.push_back(d->get());
    drivers.push_back(std::move(*d));
  }
  std::map<std::string, cluster::ClusterDriver*> by_cluster;
  for (auto& d : drivers) {
    if (!by_cluster.emplace(std::string(d->ClusterName()), d.get()).second) {
      std::cerr << "two clusters are named " << d->ClusterName() << "\n";
      return 2;
    }
  }
  telemetry::Hub hub;
  controller::ControlPlaneOptions cp_options;
  cp_options.inventory_resync = std::chrono::seconds(std::max(1, flags.sync_interval_s));
  // Clusters registered at run time (gpuaas cluster add) are Kubernetes clusters.
  cp_options.connect = [](const model::ClusterRegistration& r)
      -> absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>> {
    return RegisteredDriver(r);
  };
  // The clusters managed now; the API lists them whether or not this replica leads.
  cluster::Registry registry(by_cluster);
  for (cluster::kubernetes::KubernetesDriver* k : kubernetes) k->Start();  // they tell the inventory of changes

  // Telemetry sources in the server itself, run by the leader's manager: dcgm-exporter
  // endpoints to scrape, and with --simulate-telemetry (--demo) a simulated node agent for every GPU.
  auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  telemetry::Scraper scraper(hub, flags.scrape, [](const std::string& url) -> absl::StatusOr<std::string> {
    const size_t path_at = url.find('/', url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
    httplib::Client c(url.substr(0, path_at));
    c.set_connection_timeout(5);
    c.set_read_timeout(10);
    auto res = c.Get(path_at == std::string::npos ? "/metrics" : url.substr(path_at));
    if (!res) return absl::UnavailableError(httplib::to_string(res.error()));
    if (res->status != 200) return absl::UnavailableError(fmt::format("HTTP {}", res->status));
    return res->body;
  });
  cluster::simulated::FleetSimulation simulated(hub);

  // Leader election: one replica at a time runs the controllers (a term), writing through a
  // store fenced by its lease; every replica serves the API.
  controller::runtime::LeaderElectionOptions election;
  election.identity = controller::runtime::UniqueIdentity(flags.replica_id);
  election.address = flags.advertise_url;  // else set once the API listens
  election.lease_duration = std::chrono::milliseconds(static_cast<int64_t>(flags.lease_duration_s * 1000));
  election.renew_deadline = std::chrono::milliseconds(static_cast<int64_t>(flags.renew_deadline_s * 1000));
  election.retry_period = std::chrono::milliseconds(static_cast<int64_t>(flags.retry_period_s * 1000));
  if (absl::Status s = election.Validate(); !s.ok()) {
    std::cerr << "--leader-elect-*: " << s.message() << "\n";
    return 2;
  }
  struct Term {
    std::unique_ptr<controller::ControlPlane> control_plane;
    std::optional<controller::runtime::Periodic> scrape_task;
    std::optional<controller::runtime::Periodic> simulate_task;
  };
  std::mutex term_mu;
  std::shared_ptr<Term> term;  // guarded by term_mu; null while this replica does not lead
  std::unique_ptr<controller::runtime::LeaderElector> elector;
  store::FencedStore fenced(db, [&elector] { return elector->token(); });
  auto start_term = [&] {
    auto t = std::make_shared<Term>();
    t->control_plane = std::make_unique<controller::ControlPlane>(fenced, cache, RealClock::Get(), registry, hub, cp_options);
    controller::ControlPlane& cp = *t->control_plane;
    if (absl::Status s = cp.Restore(); !s.ok()) log::Warn("telemetry state not restored: {}", s.ToString());
    if (!flags.scrape.empty()) {
      t->scrape_task.emplace(cp.manager(), "scrape", std::chrono::seconds(std::max(1, flags.scrape_interval_s)), [&] {
        scraper.ScrapeAll(now_ms());
        for (const auto& [url, target] : scraper.targets()) {
          if (!target.up) log::Warn("scrape {}: {}", url, target.last_error);
        }
        return absl::OkStatus();
      });
    }
    if (flags.simulate_telemetry || flags.demo) {
      auto& gpus = cp.manager().informers().For<model::GpuCapacity>();
      t->simulate_task.emplace(cp.manager(), "simulated-telemetry",
                               std::chrono::seconds(std::max(1, flags.telemetry_interval_s)), [&simulated, &gpus, now_ms] {
                                 simulated.Follow(gpus.Revision(), gpus.List());  // MIG changes
                                 simulated.Tick(now_ms());
                                 return absl::OkStatus();
                               });
    }
    cp.Start();
    std::lock_guard<std::mutex> lock(term_mu);
    term = std::move(t);
  };
  auto stop_term = [&] {
    std::shared_ptr<Term> t;
    {
      std::lock_guard<std::mutex> lock(term_mu);
      t = std::move(term);
    }
    if (t) t->control_plane->Stop();  // in-flight reconciles finish (a deposed leader's are fenced)
  };
  auto current_term = [&] {
    std::lock_guard<std::mutex> lock(term_mu);
    return term;
  };
  elector = std::make_unique<controller::runtime::LeaderElector>(db, election, start_term, stop_term);

  service::ClusterService clusters(
      db, RealClock::Get(), registry,
      [](const model::ClusterRegistration& r) { return RegisteredDriver(r).status(); },
      [](const model::ClusterRegistration& r) {
        absl::StatusOr<cluster::kubernetes::ClientConfig> c =
            cluster::kubernetes::ParseSelfContainedKubeconfig(r.spec.kubeconfig, r.spec.context);
        return c.ok() ? service::ClusterService::Endpoint{c->server, c->context} : service::ClusterService::Endpoint{};
      });
  api::ServerOptions opts;
  opts.clusters = &clusters;
  service::DefragService defrag(db, RealClock::Get());
  opts.defrag = &defrag;
  opts.tls_cert_file = flags.tls_cert;
  opts.tls_key_file = flags.tls_key;
  opts.front_proxy_ca_file = flags.requestheader_client_ca;
  opts.front_proxy_names = flags.requestheader_allowed_names;
  opts.host = host;
  opts.port = static_cast<int>(*port);
  for (const std::string& r : flags.request_rates) {
    if (absl::Status bad = opts.requests_per_second_per_token.Set(r); !bad.ok()) {
      std::cerr << "--requests-per-second " << bad.message() << "\n";
      return 2;
    }
  }
  for (const std::string& r : flags.telemetry_rates) {
    if (absl::Status bad = opts.telemetry_bytes_per_second_per_token.Set(r); !bad.ok()) {
      std::cerr << "--telemetry-bytes-per-second " << bad.message() << "\n";
      return 2;
    }
  }
  opts.replica_name = election.identity;
  opts.leader_url = [&elector, &election]() -> std::string {
    if (elector->leading()) return "";
    const store::Lease l = elector->observed();
    return l.remaining.count() > 0 && l.holder != election.identity ? l.address : "";
  };
  opts.threads = flags.threads > 0 ? flags.threads
                                    : static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  opts.version = version;
  opts.web_root = flags.web_root;
  opts.more_metrics = [&](std::string& out) {
    elector->AppendMetrics(out);
    if (std::shared_ptr<Term> t = current_term()) t->control_plane->manager().AppendMetrics(out);
  };
  // GPUs per catalogue model, from the cache's labels (no decoding), for pool capacity checks.
  service::PoolService pools(db, RealClock::Get(), [&cache] {
    std::map<std::string, int64_t> counts;
    // Hold the snapshot: iterating a temporary's member would outlive it.
    const std::shared_ptr<const store::KindSnapshot> gpus = cache.Snapshot(std::string(model::GpuCapacity::kKind));
    for (const auto& g : gpus->items) {
      auto it = g->labels.find(std::string(controller::kLabelModel));
      if (it != g->labels.end()) ++counts[it->second];
    }
    return counts;
  });
  api::Authenticator auth(db, cache, RealClock::Get());
  if (!flags.token_auth_file.empty()) {
    if (absl::Status s = auth.LoadTokenFile(flags.token_auth_file); !s.ok()) {
      std::cerr << s.message() << "\n";
      return 2;
    }
  }
  api::ApiServer server(opts, cache, &pools, flags.no_auth ? nullptr : &auth, &hub);
  if (absl::Status s = server.Start(); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  // The pod admission webhook, over HTTPS, deciding from the pools as the cache holds them
  // (decoded once per change by an informer of their own, looked up by project).
  std::unique_ptr<cluster::kubernetes::WebhookServer> webhook;
  controller::runtime::InformerSet webhook_informers(cache);
  constexpr std::string_view kByProject = "project";
  auto& pools_by_project = webhook_informers.For<model::GpuPool>();
  pools_by_project.AddIndex(std::string(kByProject), [](const model::GpuPool& p) { return std::vector<std::string>{p.metadata.ns}; });
  if (!flags.webhook_listen.empty()) {
    const size_t wcolon = flags.webhook_listen.rfind(':');
    std::optional<int64_t> wport =
        wcolon == std::string::npos ? std::nullopt : ParseInt(std::string_view(flags.webhook_listen).substr(wcolon + 1));
    if (!wport || *wport < 0 || *wport > 65535 || flags.webhook_cert.empty() || flags.webhook_key.empty()) {
      std::cerr << "--webhook-listen HOST:PORT needs --webhook-tls-cert and --webhook-tls-key\n";
      return 2;
    }
    absl::StatusOr<std::unique_ptr<cluster::kubernetes::WebhookServer>> made = cluster::kubernetes::WebhookServer::Make(
        flags.webhook_cert, flags.webhook_key,
        [&pools_by_project](std::string_view project) { return pools_by_project.ByIndex(kByProject, project); },
        [&registry](std::string_view cluster) { return registry.Get(cluster) != nullptr; });
    if (!made.ok()) {
      std::cerr << made.status().message() << "\n";
      return 2;
    }
    webhook_informers.Start();
    webhook = std::move(*made);
    absl::StatusOr<int> bound = webhook->Start(flags.webhook_listen.substr(0, wcolon), static_cast<int>(*wport));
    if (!bound.ok()) {
      std::cerr << bound.status().message() << "\n";
      return 1;
    }
    log::Info("admission webhook on https://{}:{}/admission/CLUSTER/mutate-pods and validate-pods",
              flags.webhook_listen.substr(0, wcolon), *bound);
  }
  if (flags.advertise_url.empty() && (host == "0.0.0.0" || host == "::") && !flags.db.starts_with("sqlite:")) {
    log::Warn("--advertise-url is not set and the API listens on {}: should this replica lead, the others cannot "
              "forward telemetry to it; give it the URL they reach it at",
              flags.listen);
  }
  if (flags.advertise_url.empty()) {
    elector->SetAddress(fmt::format("{}://{}:{}", tls ? "https" : "http",
                                    host.find(':') != std::string::npos ? "[" + host + "]" : host, server.port()));
  }
  elector->Start();
  {
    // Until this replica leads and has observed every cluster, or another replica leads.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool settled = false;
    while (!settled && std::chrono::steady_clock::now() < deadline) {
      if (std::shared_ptr<Term> t = current_term()) {
        settled = t->control_plane->inventory().WaitObserved(std::chrono::seconds(60));
        break;
      }
      const store::Lease seen = elector->observed();
      settled = !elector->leading() && !seen.holder.empty() && seen.holder != election.identity &&
                seen.remaining.count() > 0;
      if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!settled) log::Warn("the first observation of every cluster took longer than a minute");
  }
  cache.WaitFor(db.Revision(), std::chrono::seconds(30));
  if (flags.demo) InstallDemoRateCard(db, pools);
  if (flags.demo && !flags.no_auth) {
    // A project and fresh tokens to try the demo with; earlier demo tokens are revoked.
    model::Project demo;
    demo.metadata.name = "demo";
    demo.spec.display_name = "Demo project";
    const bool first_start = pools.CreateProject(demo, "gpuaas-demo").ok();
    cache.WaitFor(db.Revision(), std::chrono::seconds(5));
    if (first_start) {
      SeedDemoPools(pools);
      cache.WaitFor(db.Revision(), std::chrono::seconds(5));
    }
    if (absl::StatusOr<DemoTokens> tokens = KeepDemoTokens(db, auth); tokens.ok()) {
      // Where the CLI finds this server, when it is not where it looks by default.
      const std::string url = fmt::format("{}://{}:{}", tls ? "https" : "http",
                                          host.find(':') != std::string::npos ? "[" + host + "]" : host, server.port());
      std::cout << "demo operator token:              " << tokens->operator_token << "\n"
                << "demo member token (project demo): " << tokens->member_token << "\n"
                << (tokens->kept ? "  (the same as at the last start: they are kept with the demo's state in "
                                   "the store)\n"
                                 : "")
                << "  export GPUAAS_TOKEN=" << tokens->operator_token << "\n"
                << (url == "http://127.0.0.1:8080" ? "" : "  export GPUAAS_SERVER=" + url + "\n") << std::flush;
    } else {
      log::Warn("demo tokens not made: {}", tokens.status().message());
    }
  }
  server.SetReady(true);
  log::Info("gpuaas {} serving {}://{}:{} (store {}, {} simulated and {} Kubernetes cluster(s), revision {}, replica {}, {}{})",
            version, tls ? "https" : "http", host, server.port(), store::RedactedUrl(flags.db), simulated_clusters, kubernetes.size(), db.Revision(),
            election.identity, elector->leading() ? "the leader" : "a follower",
            flags.web_root.empty() ? "; no dashboard: --web DIR serves it" : "; dashboard at /");

  int sig = 0;
  while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
    if (!tls) {
      log::Info("SIGHUP: nothing to reload (the API serves plain HTTP)");
    } else if (absl::Status s = server.ReloadTls(); s.ok()) {
      log::Info("SIGHUP: TLS certificate {} reloaded; new connections use it", flags.tls_cert);
    } else {
      log::Warn("SIGHUP: the TLS certificate does not load ({}); still serving the last good one", std::string(s.message()));
    }
  }
  log::Info("received signal {}, shutting down", sig);
  if (webhook) webhook->Stop();
  elector->Stop();  // a leader stops its controllers (in-flight reconciles finish), then releases the lease
  for (cluster::kubernetes::KubernetesDriver* k : kubernetes) k->Stop();
  server.Stop();
  cache.Stop();
  return 0;
}

}  // namespace gpuaas::exe
