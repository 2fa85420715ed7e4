#include "exe/server_main.h"

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "api/auth.h"
#include "api/server.h"
#include "agent/fleet_simulation.h"
#include "cluster/simulated/fleet.h"
#include "httplib.h"
#include "telemetry/controller.h"
#include "telemetry/hub.h"
#include "telemetry/scraper.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strings.h"
#include "controller/inventory.h"
#include "controller/pools.h"
#include "controller/workloads.h"
#include "model/fleet.h"
#include "service/pools.h"
#include "store/cache.h"
#include "store/store.h"

namespace gpuaas::exe {
namespace {

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
  if (!IsLoopback(host) && !flags.allow_remote) {
    std::cerr << "refusing to listen on " << flags.listen
              << ": the API has no TLS yet, so it serves loopback only; pass "
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
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<store::Store>> st = store::OpenStore(flags.db);
  if (!st.ok()) {
    std::cerr << "cannot open store " << flags.db << ": " << st.status().message() << "\n";
    return 1;
  }
  store::Store& db = **st;

  std::vector<std::unique_ptr<cluster::ClusterDriver>> drivers = cluster::simulated::MakeDrivers(fleet);
  controller::InventoryController inventory(db, RealClock::Get());
  auto sync_all = [&] {
    for (auto& d : drivers) {
      absl::StatusOr<controller::SyncStats> s = inventory.Sync(*d);
      if (!s.ok()) {
        log::Error("inventory sync of cluster {} failed: {}", d->ClusterName(), s.status().ToString());
      } else if (s->created + s->updated + s->deleted > 0) {
        log::Info("cluster {}: {} created, {} updated, {} deleted", d->ClusterName(), s->created,
                  s->updated, s->deleted);
      }
    }
  };

  store::ObjectCache cache(db);
  std::vector<std::string> kinds;
  for (const api::ResourceType& t : api::ResourceTypes()) kinds.push_back(t.kind);
  kinds.push_back(std::string(api::kTokenKind));
  if (absl::Status s = cache.Start(kinds); !s.ok()) {
    std::cerr << "cannot load the store: " << s.message() << "\n";
    return 1;
  }
  api::ServerOptions opts;
  opts.host = host;
  opts.port = static_cast<int>(*port);
  opts.threads = flags.threads > 0 ? flags.threads
                                    : static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  opts.version = version;
  // GPUs per catalogue model, from the cache's labels (no decoding), for pool capacity checks.
  service::PoolService pools(db, RealClock::Get(), [&cache] {
    std::map<std::string, int64_t> counts;
    for (const auto& g : cache.Snapshot(std::string(model::GpuCapacity::kKind))->items) {
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
  // Telemetry: the hub holds the series; its controller restores the persisted rollups now and
  // writes health into the inventory every pass.
  telemetry::Hub hub;
  telemetry::TelemetryController telemetry_controller(db, hub, RealClock::Get());
  if (absl::StatusOr<size_t> n = telemetry_controller.Restore(); !n.ok()) {
    log::Warn("telemetry rollups not restored: {}", n.status().ToString());
  } else if (*n > 0) {
    log::Info("telemetry: {} rollup buckets restored", *n);
  }
  api::ApiServer server(opts, cache, &pools, flags.no_auth ? nullptr : &auth, &hub);
  if (absl::Status s = server.Start(); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  sync_all();
  cache.WaitFor(db.Revision(), std::chrono::seconds(30));
  if (flags.demo && !flags.no_auth) {
    // A project and fresh tokens to try the demo with; earlier demo tokens are revoked.
    model::Project demo;
    demo.metadata.name = "demo";
    demo.spec.display_name = "Demo project";
    (void)pools.CreateProject(demo, "gpuaas-demo");
    cache.WaitFor(db.Revision(), std::chrono::seconds(5));
    if (absl::StatusOr<std::vector<api::TokenInfo>> old = auth.List(); old.ok()) {
      for (const api::TokenInfo& t : *old) {
        if (t.created_by == "gpuaas-demo") (void)auth.Revoke(t.id);
      }
    }
    auto op = auth.Create("demo-operator", api::Role::kOperator, "", "gpuaas-demo");
    auto member = auth.Create("demo-member", api::Role::kMember, "demo", "gpuaas-demo");
    if (op.ok() && member.ok()) {
      std::cout << "demo operator token:              " << op->first << "\n"
                << "demo member token (project demo): " << member->first << "\n"
                << "  export GPUAAS_TOKEN=" << op->first << "\n"
                << std::flush;
    }
  }
  (void)telemetry_controller.RunOnce();  // the hub learns the inventory before the first push
  server.SetReady(true);
  log::Info("gpuaas {} serving http://{}:{} (store {}, {} simulated cluster(s), revision {})",
            version, host, server.port(), flags.db, drivers.size(), db.Revision());

  // The controllers: one pass a second (they are level-triggered, so a pass after a restart
  // resumes whatever was in flight); the inventory is observed every --sync-interval, and after
  // each pass that is waiting for a driver to apply a MIG layout.
  std::map<std::string, cluster::ClusterDriver*> by_cluster;
  for (auto& d : drivers) by_cluster[std::string(d->ClusterName())] = d.get();
  controller::PoolController pool_controller(db, RealClock::Get(), by_cluster);
  controller::WorkloadController workload_controller(db, RealClock::Get());
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread syncer([&] {
    auto last_sync = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; })) {
      lock.unlock();
      // Health first, so that a GPU that just failed is not handed out in this pass.
      if (absl::StatusOr<telemetry::TelemetryPassStats> t = telemetry_controller.RunOnce(); !t.ok()) {
        log::Error("telemetry controller: {}", t.status().ToString());
      }
      absl::StatusOr<controller::PassStats> pass = pool_controller.RunOnce();
      if (!pass.ok()) log::Error("pool controller: {}", pass.status().ToString());
      if (absl::StatusOr<controller::WorkloadStats> w = workload_controller.RunOnce(); !w.ok()) {
        log::Error("workload controller: {}", w.status().ToString());
      }
      if ((pass.ok() && pass->needs_observation) ||
          std::chrono::steady_clock::now() - last_sync >= std::chrono::seconds(std::max(1, flags.sync_interval_s))) {
        sync_all();
        last_sync = std::chrono::steady_clock::now();
      }
      lock.lock();
    }
  });

  // Telemetry sources in the server itself: dcgm-exporter endpoints to scrape, and with
  // --simulate-telemetry (--demo) a simulated node agent for every simulated GPU.
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
  agent::FleetSimulation simulated(hub);
  auto refresh_simulated = [&] {
    std::string body = "{\"items\":[";
    bool first = true;
    for (const auto& obj : cache.Snapshot(std::string(model::GpuCapacity::kKind))->items) {
      body += (first ? "" : ",") + obj->json;
      first = false;
    }
    body += "]}";
    if (absl::Status s = simulated.Refresh(body); !s.ok()) log::Warn("simulated telemetry: {}", s.ToString());
  };
  const bool simulate_telemetry = flags.simulate_telemetry || flags.demo;
  std::thread telemetry_sources;
  if (simulate_telemetry || !flags.scrape.empty()) {
    telemetry_sources = std::thread([&] {
      auto next_scrape = std::chrono::steady_clock::now();
      auto next_sim = next_scrape;
      int ticks = 0;
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_until(lock, std::min(next_scrape, next_sim), [&] { return stopping; })) {
        lock.unlock();
        const auto now = std::chrono::steady_clock::now();
        const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count();
        if (!flags.scrape.empty() && now >= next_scrape) {
          scraper.ScrapeAll(now_ms);
          for (const auto& [url, t] : scraper.targets()) {
            if (!t.up) log::Warn("scrape {}: {}", url, t.last_error);
          }
          next_scrape = now + std::chrono::seconds(std::max(1, flags.scrape_interval_s));
        }
        if (simulate_telemetry && now >= next_sim) {
          if (ticks++ % 6 == 0) refresh_simulated();  // follow MIG layout changes
          simulated.Tick(now_ms);
          next_sim = now + std::chrono::seconds(std::max(1, flags.telemetry_interval_s));
        }
        if (!simulate_telemetry) next_sim = next_scrape;
        if (flags.scrape.empty()) next_scrape = next_sim;
        lock.lock();
      }
    });
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  log::Info("received signal {}, shutting down", sig);
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  syncer.join();
  if (telemetry_sources.joinable()) telemetry_sources.join();
  server.Stop();
  cache.Stop();
  return 0;
}

}  // namespace gpuaas::exe
