#include "api/internal/summary_api.h"

#include <utility>

#include "common/metrics_text.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {

SummaryApi::SummaryApi(store::ObjectCache& cache) : cache_(cache) {
  listener_ = cache_.AddListener([this](const std::vector<store::CacheEvent>& events, int64_t) { Note(events); });
}

SummaryApi::~SummaryApi() { cache_.RemoveListener(listener_); }

void SummaryApi::Note(const std::vector<store::CacheEvent>& events) {
  std::lock_guard<std::mutex> lock(noted_mu_);
  for (const store::CacheEvent& e : events) {
    const bool gpu = e.kind == model::GpuCapacity::kKind;
    if (!gpu && e.kind != model::GpuPool::kKind) continue;
    const store::CachedObject& any = e.after != nullptr ? *e.after : *e.before;
    if (gpu) {
      noted_gpus_[any.name] = e.after;
    } else {
      noted_pools_[any.ns + "/" + any.name] = e.after;
    }
  }
}

// Devices whose holders change from none to some or back have their GPUs' parts made again.
void SummaryApi::ApplyPools(const Changed& pools, std::set<std::string>& reheld) {
  for (const auto& [key, obj] : pools) {
    std::vector<Device> now;
    if (obj != nullptr) {
      absl::StatusOr<model::GpuPool> pool = model::Decode<model::GpuPool>(obj->json);
      if (pool.ok() && model::PoolIsLive(*pool)) {
        for (const model::AllocatedDevice& d : pool->status.allocation) {
          now.emplace_back(d.gpu_uuid, d.profile == "full" ? -1 : d.start);
        }
      }
    }
    auto before = held_by_pool_.find(key);
    if (before != held_by_pool_.end()) {
      for (const Device& d : before->second) {
        auto h = holders_.find(d);
        if (--h->second == 0) {
          holders_.erase(h);
          held_.erase(d);
          reheld.insert(d.first);
        }
      }
      held_by_pool_.erase(before);
    }
    for (const Device& d : now) {
      if (holders_[d]++ == 0) {
        held_.insert(d);
        reheld.insert(d.first);
      }
    }
    if (!now.empty()) held_by_pool_.emplace(key, std::move(now));
  }
}

void SummaryApi::ApplyGpus(const Changed& gpus) {
  for (const auto& [name, obj] : gpus) {
    if (auto was = parts_.find(name); was != parts_.end()) {
      tally_.Remove(was->second);
      if (auto u = name_of_uuid_.find(was->second.uuid); u != name_of_uuid_.end() && u->second == name) {
        name_of_uuid_.erase(u);
      }
      parts_.erase(was);
    }
    if (obj == nullptr) continue;
    absl::StatusOr<model::GpuCapacity> gpu = model::Decode<model::GpuCapacity>(obj->json);
    if (!gpu.ok()) continue;  // as the fleet's other views, a GPU that does not decode is left out
    model::GpuPart part = model::PartOf(*gpu, held_);
    tally_.Add(part);
    name_of_uuid_[part.uuid] = name;
    parts_.emplace(name, std::move(part));
  }
}

std::shared_ptr<const model::FleetSummary> SummaryApi::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  Changed gpus, pools;
  {
    std::lock_guard<std::mutex> noted(noted_mu_);
    gpus.swap(noted_gpus_);
    pools.swap(noted_pools_);
  }
  if (summary_ != nullptr && gpus.empty() && pools.empty()) return summary_;
  // Pools first: the GPUs that changed are then added with the devices held now.
  std::set<std::string> reheld;  // GPU UUIDs
  ApplyPools(pools, reheld);
  ApplyGpus(gpus);
  for (const std::string& uuid : reheld) {
    auto name = name_of_uuid_.find(uuid);
    if (name == name_of_uuid_.end()) continue;
    model::GpuPart& part = parts_.at(name->second);
    model::GpuPart now = part;
    if (!model::Rehold(now, held_)) continue;
    tally_.Remove(part);
    tally_.Add(now);
    part = std::move(now);
  }
  summary_ = std::make_shared<model::FleetSummary>(tally_.summary());
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
