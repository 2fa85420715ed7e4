#include "controller/control_plane.h"

#include "common/log.h"
#include "common/status.h"
#include "model/billing.h"

namespace gpuaas::controller {

std::vector<std::string> ControlPlaneKinds() {
  return {std::string(model::Cluster::kKind),   std::string(model::NodeCapacity::kKind),
          std::string(model::GpuCapacity::kKind), std::string(model::SpecAndCount::kKind),
          std::string(model::GpuPool::kKind),   std::string(model::MigLayout::kKind),
          std::string(model::Workload::kKind),  std::string(model::ClusterRegistration::kKind),
          std::string(model::Profile::kKind),   std::string(model::UsageRecord::kKind),
          std::string(model::Defragmentation::kKind), std::string(model::Loan::kKind),
          std::string(model::Project::kKind)};
}

ControlPlane::ControlPlane(store::Store& store, store::ObjectCache& cache, const Clock& clock,
                           std::map<std::string, cluster::ClusterDriver*> drivers, telemetry::Hub& hub,
                           ControlPlaneOptions options)
    : ControlPlane(store, cache, clock, std::make_unique<cluster::Registry>(drivers), nullptr, hub, std::move(options)) {}

ControlPlane::ControlPlane(store::Store& store, store::ObjectCache& cache, const Clock& clock,
                           cluster::Registry& registry, telemetry::Hub& hub, ControlPlaneOptions options)
    : ControlPlane(store, cache, clock, nullptr, &registry, hub, std::move(options)) {}

ControlPlane::ControlPlane(store::Store& store, store::ObjectCache& cache, const Clock& clock,
                           std::unique_ptr<cluster::Registry> owned, cluster::Registry* registry, telemetry::Hub& hub,
                           ControlPlaneOptions options)
    : owned_registry_(std::move(owned)),
      registry_(registry != nullptr ? *registry : *owned_registry_),
      manager_(clock, cache),
      inventory_(store, manager_, registry_, options.inventory_resync),
      health_(store, hub, manager_),
      pools_(store, manager_),
      miglayouts_(store, manager_, registry_, options.mig_poll),
      workloads_(store, manager_),
      lending_(store, manager_),
      pod_runs_(store, manager_, registry_),
      loan_pods_(store, manager_, registry_, options.stuck_after),
      rollups_(store, hub, manager_, options.rollup_flush),
      metering_(store, hub, manager_),
      quotas_(manager_, registry_),
      fencing_(manager_, registry_),
      connections_(manager_, registry_, std::move(options.connect)) {
  // A new GPU is created with its health judged: written once, not created Unknown and again.
  inventory_.JudgeNewGpusWith([this](model::GpuCapacity& gpu, Time now) { health_.JudgeNew(gpu, now); });
}

// Registered clusters' drivers call into the controllers' queues: they stop first. Then the
// informers stop hearing from the cache (which outlives this control plane), before the
// controllers whose handlers they call go.
ControlPlane::~ControlPlane() {
  connections_.StopAll();
  manager_.Stop();
  manager_.informers().Stop();
}

absl::Status ObserveOnce(store::Store& store, const std::vector<cluster::ClusterDriver*>& drivers, const Clock& clock) {
  store::ObjectCache cache(store);
  RETURN_IF_ERROR(cache.Load(ControlPlaneKinds()));
  std::map<std::string, cluster::ClusterDriver*> by_name;
  for (cluster::ClusterDriver* d : drivers) by_name[std::string(d->ClusterName())] = d;
  telemetry::Hub hub;
  ControlPlane cp(store, cache, clock, by_name, hub);
  cp.RunUntilIdle();
  return absl::OkStatus();
}

void ControlPlane::Stop() {
  manager_.Stop();
  connections_.StopAll();
  if (absl::Status s = rollups_.Flush(); !s.ok()) log::Error("telemetry rollups not written: {}", s.ToString());
}

absl::Status ControlPlane::Restore() {
  absl::StatusOr<size_t> buckets = rollups_.Restore();
  if (!buckets.ok()) return buckets.status();
  if (*buckets > 0) log::Info("telemetry: {} rollup buckets restored", *buckets);
  absl::StatusOr<size_t> gpus = health_.Restore();
  if (!gpus.ok()) return gpus.status();
  if (*gpus > 0) log::Info("health: verdicts of {} failed GPU(s) restored", *gpus);
  return absl::OkStatus();
}

}  // namespace gpuaas::controller
