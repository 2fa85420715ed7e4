#include "exe/server_main.h"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>
#include <span>
#include <thread>

#include "api/auth.h"
#include "api/server.h"
#include "cluster/kubernetes/client_config.h"
#include "cluster/kubernetes/driver.h"
#include "cluster/kubernetes/webhook_server.h"
#include "cluster/registry.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/control_plane.h"
#include "controller/inventory.h"
#include "controller/runtime/informer.h"
#include "controller/runtime/leader_election.h"
#include "controller/telemetry_labels.h"
#include "exe/cluster_drivers.h"
#include "exe/demo.h"
#include "exe/telemetry_http.h"
#include "exe/terms.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "service/clusters.h"
#include "service/defrag.h"
#include "service/pools.h"
#include "store/cache.h"
#include "store/fenced_store.h"
#include "store/store.h"
#include "telemetry/hub.h"
#include "telemetry/remote_write.h"

namespace gpuaas::exe {
int RunServer(const ServerFlags& flags, const std::string& version) {
  log::Level level;
  if (!log::ParseLevel(flags.log_level, &level)) {
    std::cerr << "--log-level: use debug, info, warn, error or off\n";
    return 2;
  }
  log::SetLevel(level);

  absl::StatusOr<ServerPlan> plan = PlanServer(flags);
  if (!plan.ok()) {
    std::cerr << plan.status().message() << "\n";
    return 2;
  }
  const std::string& host = plan->host;
  const bool tls = plan->tls;
  const cluster::simulated::FleetSpec& fleet = plan->fleet;

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

  // The clusters: simulated ones from the fleet, Kubernetes ones from --kubernetes.
  absl::StatusOr<ClusterDrivers> clusters_or = MakeClusterDrivers(fleet, flags.kubernetes);
  if (!clusters_or.ok()) {
    std::cerr << clusters_or.status().message() << "\n";
    return 2;
  }
  ClusterDrivers& drivers = *clusters_or;
  const std::vector<cluster::kubernetes::KubernetesDriver*>& kubernetes = drivers.kubernetes;
  telemetry::SeriesLimits series_limits;
  series_limits.hot_window_s = flags.hot_window_s;
  series_limits.raw_points = static_cast<int>(std::max<int64_t>(720, flags.hot_window_s / 5));  // at 5 s
  telemetry::Hub hub(series_limits);
  const ReceiverAuth receiver_auth{flags.telemetry_token_file, flags.telemetry_ca_file};
  if (!flags.telemetry_query.empty()) {
    hub.SetHistory(std::make_shared<telemetry::PromHistory>(
        flags.telemetry_query, QueryGet(flags.telemetry_query, receiver_auth, flags.telemetry_query_timeout_s)));
    log::Info("telemetry older than {} s read back from {}", flags.hot_window_s, flags.telemetry_query);
  }
  // Remote write: every sample the hub stores also goes to each receiver, labelled from a
  // directory that a manager of this replica's own keeps current (every replica sends what its
  // hub ingests, leader or not).
  telemetry::DeviceDirectory directory;
  telemetry::RemoteWrite remote_write(hub, directory);
  std::optional<controller::runtime::Manager> replica_manager;
  std::optional<controller::TelemetryLabels> labeller;
  for (const std::string& url : flags.remote_write) {
    telemetry::RemoteWriteOptions o;
    o.url = url;
    o.capacity = static_cast<size_t>(flags.remote_write_queue);
    o.shards = flags.remote_write_shards;
    remote_write.Add(o, [&] { return RemoteWritePost(url, receiver_auth, "gpuaas/" + version); });
  }
  if (!flags.remote_write.empty()) {
    replica_manager.emplace(RealClock::Get(), cache);
    labeller.emplace(directory, *replica_manager);
    replica_manager->Start();
    hub.SetSink([&remote_write](std::span<const telemetry::Sample> stored) { remote_write.Take(stored); });
    remote_write.Start();
    log::Info("remote write to {}", fmt::join(flags.remote_write, ", "));
  }
  controller::ControlPlaneOptions cp_options;
  cp_options.inventory_resync = std::chrono::seconds(std::max(1, flags.sync_interval_s));
  // Clusters registered at run time (gpuaas cluster add) are Kubernetes clusters.
  cp_options.connect = [](const model::ClusterRegistration& r)
      -> absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>> {
    return RegisteredDriver(r);
  };
  // The clusters managed now; the API lists them whether or not this replica leads.
  cluster::Registry registry(drivers.by_name);
  for (cluster::kubernetes::KubernetesDriver* k : kubernetes) k->Start();  // they tell the inventory of changes

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
  std::unique_ptr<controller::runtime::LeaderElector> elector;
  store::FencedStore fenced(db, [&elector] { return elector->token(); });
  TermOptions term_options;
  term_options.control_plane = cp_options;
  term_options.scrape = flags.scrape;
  term_options.scrape_interval = std::chrono::seconds(std::max(1, flags.scrape_interval_s));
  term_options.simulate_telemetry = flags.simulate_telemetry || flags.demo;
  term_options.telemetry_interval = std::chrono::seconds(std::max(1, flags.telemetry_interval_s));
  Terms terms(fenced, cache, registry, hub, term_options);
  elector = std::make_unique<controller::runtime::LeaderElector>(db, election, [&terms] { terms.Begin(); },
                                                                 [&terms] { terms.End(); });

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
  opts.port = plan->port;
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
    if (std::shared_ptr<controller::ControlPlane> cp = terms.Current()) cp->manager().AppendMetrics(out);
    remote_write.AppendMetrics(out);
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
  // While a loan runs its devices are the borrower's (model::PoolsWithLoans).
  auto& loans_by_project = webhook_informers.For<model::Loan>();
  loans_by_project.AddIndex(std::string(kByProject), [](const model::Loan& l) {
    return l.spec.end ? std::vector<std::string>{} : std::vector<std::string>{l.spec.borrower, l.spec.lender};
  });
  auto project_pools = [&pools_by_project, &loans_by_project, kByProject](std::string_view project) {
    std::vector<std::shared_ptr<const model::GpuPool>> held = pools_by_project.ByIndex(kByProject, project);
    const std::vector<std::shared_ptr<const model::Loan>> open = loans_by_project.ByIndex(kByProject, project);
    const Time now = RealClock::Get().Now();
    if (open.empty() && std::none_of(held.begin(), held.end(), [&](const auto& p) { return model::PoolBeforeStart(*p, now); })) {
      return held;
    }
    std::vector<model::GpuPool> own;
    for (const auto& p : held) own.push_back(*p);
    std::vector<model::Loan> loans;
    for (const auto& l : open) loans.push_back(*l);
    std::vector<std::shared_ptr<const model::GpuPool>> keep;
    std::vector<std::shared_ptr<const model::GpuPool>> out;
    for (model::GpuPool& p : model::PoolsWithLoans(
             project, std::move(own), loans,
             [&](std::string_view ns, std::string_view name) {
               keep.push_back(pools_by_project.Get(ns, name));
               return keep.back().get();
             },
             now)) {
      out.push_back(std::make_shared<const model::GpuPool>(std::move(p)));
    }
    return out;
  };
  if (!plan->webhook_host.empty()) {
    absl::StatusOr<std::unique_ptr<cluster::kubernetes::WebhookServer>> made = cluster::kubernetes::WebhookServer::Make(
        flags.webhook_cert, flags.webhook_key, project_pools,
        [&registry](std::string_view cluster) { return registry.Get(cluster) != nullptr; });
    if (!made.ok()) {
      std::cerr << made.status().message() << "\n";
      return 2;
    }
    webhook_informers.Start();
    webhook = std::move(*made);
    absl::StatusOr<int> bound = webhook->Start(plan->webhook_host, plan->webhook_port);
    if (!bound.ok()) {
      std::cerr << bound.status().message() << "\n";
      return 1;
    }
    log::Info("admission webhook on https://{}:{}/admission/CLUSTER/mutate-pods and validate-pods",
              plan->webhook_host, *bound);
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
    // Until this replica leads, has observed every cluster and judged every GPU's health (a new
    // fleet's GPUs are written once more for it), or another replica leads.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool settled = false;
    while (!settled && std::chrono::steady_clock::now() < deadline) {
      if (std::shared_ptr<controller::ControlPlane> cp = terms.Current()) {
        settled = cp->inventory().WaitObserved(std::chrono::seconds(60)) &&
                  cache.WaitFor(db.Revision(), std::chrono::seconds(30)) &&
                  cp->health().WaitJudged(std::chrono::seconds(60));
        break;
      }
      const store::Lease seen = elector->observed();
      settled = !elector->leading() && !seen.holder.empty() && seen.holder != election.identity &&
                seen.remaining.count() > 0;
      if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!settled) log::Warn("the first observation of every cluster and its GPUs' health took longer than a minute");
  }
  cache.WaitFor(db.Revision(), std::chrono::seconds(30));
  if (flags.demo) {
    SetUpDemo(db, cache, pools, flags.no_auth ? nullptr : &auth,
              fmt::format("{}://{}:{}", tls ? "https" : "http", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                          server.port()),
              std::cout);
  }
  server.SetReady(true);
  log::Info("gpuaas {} serving {}://{}:{} (store {}, {} simulated and {} Kubernetes cluster(s), revision {}, replica {}, {}{})",
            version, tls ? "https" : "http", host, server.port(), store::RedactedUrl(flags.db), drivers.simulated, kubernetes.size(), db.Revision(),
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
  // What is queued for the receivers goes out before the process ends (a batch each, at most,
  // when a receiver does not answer).
  hub.SetSink(nullptr);
  remote_write.Stop();
  if (replica_manager) replica_manager->Stop();
  cache.Stop();
  return 0;
}

}  // namespace gpuaas::exe
