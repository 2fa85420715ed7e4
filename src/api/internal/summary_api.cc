#include "api/internal/summary_api.h"

#include <utility>

#include "common/metrics_text.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {

std::shared_ptr<const model::FleetSummary> SummaryApi::Get() {
  std::shared_ptr<const DecodedGpus::View> view = gpus_.Get();
  std::shared_ptr<const store::KindSnapshot> pools_now = cache_.Snapshot(std::string(model::GpuPool::kKind));
  std::lock_guard<std::mutex> lock(mu_);
  if (summary_ && gpus_of_ == view->snapshot && pools_of_ == pools_now) return summary_;
  const model::HeldDevices held = model::HeldByPools(DecodeAll<model::GpuPool>(cache_));
  summary_ = std::make_shared<model::FleetSummary>(model::Summarize(view->in_order, held));
  gpus_of_ = view->snapshot;
  pools_of_ = pools_now;
  return summary_;
}

HttpResponse SummaryApi::Summary() {
  using nlohmann::json;
  std::shared_ptr<const model::FleetSummary> s = Get();
  auto count = [](const model::FleetSummary::ModelCount& c) {
    return json{{"gpus", c.gpus}, {"migEnabled", c.mig_enabled}, {"full", c.full},
                {"unhealthy", c.unhealthy}, {"nodes", c.nodes}};
  };
  json by_model = json::array();
  for (const auto& [m, c] : s->by_model) {
    json e = count(c);
    e["model"] = m;
    by_model.push_back(std::move(e));
  }
  json by_cluster = json::array();
  for (const auto& [c, n] : s->by_cluster) {
    json e = count(n);
    e["cluster"] = c;
    by_cluster.push_back(std::move(e));
  }
  json logical = json::array();
  for (const auto& [key, d] : s->logical) {
    logical.push_back({{"model", key.first}, {"profile", key.second}, {"count", d.count},
                       {"allocated", d.allocated}, {"free", d.free()}, {"available", d.available}});
  }
  json physical = count(s->physical);
  physical["byModel"] = std::move(by_model);
  physical["byCluster"] = std::move(by_cluster);
  const json j = {
      {"apiVersion", "gpuaas.io/v1"},
      {"kind", "FleetSummary"},
      {"clusters", cache_.Snapshot(model::Cluster::kKind.data())->items.size()},
      {"nodes", cache_.Snapshot(model::NodeCapacity::kKind.data())->items.size()},
      {"physical", std::move(physical)},
      {"logical", {{"count", s->logical_total.count},
                   {"allocated", s->logical_total.allocated},
                   {"free", s->logical_total.free()},
                   {"available", s->logical_total.available},
                   {"byProfile", std::move(logical)}}},
  };
  return HttpResponse{200, "application/json", j.dump(), {}};
}

void SummaryApi::AppendMetrics(std::string& out) {
  std::shared_ptr<const model::FleetSummary> s = Get();
  MetricsText w(out);
  w.Family("gpuaas_fleet_gpus", "gauge", "Physical GPUs known to gpuaas, by model and MIG mode.");
  for (const auto& [m, c] : s->by_model) {
    w.Sample("gpuaas_fleet_gpus", {{"model", m}, {"mig", "enabled"}}, c.mig_enabled);
    w.Sample("gpuaas_fleet_gpus", {{"model", m}, {"mig", "disabled"}}, c.full);
  }
  w.Family("gpuaas_fleet_devices", "gauge", "Logical devices (full GPUs, MIG instances) by state.");
  for (const auto& [key, d] : s->logical) {
    w.Sample("gpuaas_fleet_devices", {{"model", key.first}, {"profile", key.second}, {"state", "allocated"}},
             d.allocated);
    w.Sample("gpuaas_fleet_devices", {{"model", key.first}, {"profile", key.second}, {"state", "free"}}, d.free());
  }
  w.Family("gpuaas_fleet_gpu_health", "gauge",
           "Physical GPUs by model and health (unhealthy ones are out of allocation).");
  for (const auto& [m, c] : s->by_model) {
    w.Sample("gpuaas_fleet_gpu_health", {{"model", m}, {"health", "healthy"}}, c.gpus - c.unhealthy);
    w.Sample("gpuaas_fleet_gpu_health", {{"model", m}, {"health", "unhealthy"}}, c.unhealthy);
  }
  w.Family("gpuaas_fleet_logical_devices", "gauge", "Logical devices over all models and profiles, by state.");
  w.Sample("gpuaas_fleet_logical_devices", {{"state", "allocated"}}, s->logical_total.allocated);
  w.Sample("gpuaas_fleet_logical_devices", {{"state", "free"}}, s->logical_total.free());
}

}  // namespace gpuaas::api::internal
