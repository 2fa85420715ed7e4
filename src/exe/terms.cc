#include "exe/terms.h"

#include <optional>

#include "common/log.h"
#include "common/status.h"
#include "controller/runtime/manager.h"
#include "exe/telemetry_http.h"
#include "fmt/format.h"

namespace gpuaas::exe {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Terms::Term {
  std::shared_ptr<controller::ControlPlane> control_plane;
  std::optional<controller::runtime::Periodic> scrape_task;
  std::optional<controller::runtime::Periodic> simulate_task;
};

Terms::Terms(store::Store& fenced, store::ObjectCache& cache, cluster::Registry& registry, telemetry::Hub& hub,
             TermOptions options)
    : fenced_(fenced),
      cache_(cache),
      registry_(registry),
      hub_(hub),
      options_(std::move(options)),
      scraper_(hub, options_.scrape, FetchMetrics),
      simulated_(hub) {}

Terms::~Terms() { End(); }

void Terms::Begin() {
  auto t = std::make_shared<Term>();
  t->control_plane = std::make_shared<controller::ControlPlane>(fenced_, cache_, RealClock::Get(), registry_, hub_,
                                                                options_.control_plane);
  controller::ControlPlane& cp = *t->control_plane;
  if (absl::Status s = cp.Restore(); !s.ok()) log::Warn("telemetry state not restored: {}", s.ToString());
  if (!options_.scrape.empty()) {
    t->scrape_task.emplace(cp.manager(), "scrape", options_.scrape_interval, [this] {
      scraper_.ScrapeAll(NowMs());
      for (const auto& [url, target] : scraper_.targets()) {
        if (!target.up) log::Warn("scrape {}: {}", url, target.last_error);
      }
      return absl::OkStatus();
    });
  }
  if (options_.simulate_telemetry) {
    auto& gpus = cp.manager().informers().For<model::GpuCapacity>();
    t->simulate_task.emplace(cp.manager(), "simulated-telemetry", options_.telemetry_interval, [this, &gpus] {
      simulated_.Follow(gpus.Revision(), gpus.List());  // MIG changes
      simulated_.Tick(NowMs());
      return absl::OkStatus();
    });
  }
  cp.Start();
  std::lock_guard<std::mutex> lock(mu_);
  term_ = std::move(t);
}

void Terms::End() {
  std::shared_ptr<Term> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t = std::move(term_);
  }
  if (t) t->control_plane->Stop();  // in-flight reconciles finish (a deposed leader's are fenced)
}

std::shared_ptr<controller::ControlPlane> Terms::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return term_ ? term_->control_plane : nullptr;
}

}  // namespace gpuaas::exe
