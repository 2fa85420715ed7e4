// What a replica runs while it leads (a term): the control plane, writing through the store fenced
// by its lease, and the telemetry sources that run inside the server (dcgm-exporter endpoints to
// scrape; with --simulate-telemetry or --demo, an agent for every simulated GPU), on the control
// plane's manager. The leader elector begins a term when this replica takes the lease and ends it
// when the replica loses it or stops. Thread-safe.
#ifndef GPUAAS_EXE_TERMS_H_
#define GPUAAS_EXE_TERMS_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "cluster/registry.h"
#include "cluster/simulated/fleet_simulation.h"
#include "common/clock.h"
#include "controller/control_plane.h"
#include "store/cache.h"
#include "store/store.h"
#include "telemetry/hub.h"
#include "telemetry/scraper.h"

namespace gpuaas::exe {

struct TermOptions {
  controller::ControlPlaneOptions control_plane;
  std::vector<std::string> scrape;  // dcgm-exporter /metrics URLs
  Duration scrape_interval = std::chrono::seconds(15);
  bool simulate_telemetry = false;
  Duration telemetry_interval = std::chrono::seconds(10);
};

class Terms {
 public:
  // `fenced`: the store as the leader writes to it (store::FencedStore).
  Terms(store::Store& fenced, store::ObjectCache& cache, cluster::Registry& registry, telemetry::Hub& hub,
        TermOptions options);
  ~Terms();

  // Starts a term: restores the telemetry state, starts the control plane and the sources.
  void Begin();
  // Ends the term in force (in-flight reconciles finish; a deposed leader's writes are fenced).
  // Nothing when there is none.
  void End();
  // The control plane of the term in force; null while this replica does not lead.
  std::shared_ptr<controller::ControlPlane> Current() const;

 private:
  struct Term;
  store::Store& fenced_;
  store::ObjectCache& cache_;
  cluster::Registry& registry_;
  telemetry::Hub& hub_;
  const TermOptions options_;
  telemetry::Scraper scraper_;
  cluster::simulated::FleetSimulation simulated_;
  mutable std::mutex mu_;
  std::shared_ptr<Term> term_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::exe

#endif  // GPUAAS_EXE_TERMS_H_
