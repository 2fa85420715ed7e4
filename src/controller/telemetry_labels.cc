#include "controller/telemetry_labels.h"

#include <set>
#include <vector>

#include "common/strings.h"

namespace gpuaas::controller {
namespace {

constexpr std::string_view kByGpu = "gpu";  // lower-case GPU UUID

std::vector<std::string> GpusOf(const model::GpuCapacity& g) { return {ToLower(g.spec.uuid)}; }

std::vector<std::string> GpusOf(const model::GpuPool& p) {
  std::set<std::string> out;
  for (const model::AllocatedDevice& d : p.status.allocation) out.insert(ToLower(d.gpu_uuid));
  return {out.begin(), out.end()};
}

std::vector<std::string> GpusOf(const model::Workload& w) {
  std::set<std::string> out;
  if (w.status.phase != model::WorkloadPhase::kRunning) return {};
  for (const model::WorkloadDevice& d : w.status.devices) out.insert(ToLower(d.gpu_uuid));
  return {out.begin(), out.end()};
}

// Adds the keys of an object before and after a change: both its old and its new GPUs relabel.
template <typename T>
void Watch(runtime::Informer<T>& informer, runtime::WorkQueue& q) {
  informer.AddIndex(std::string(kByGpu), [](const T& obj) { return GpusOf(obj); });
  informer.OnChange([&q](const T* before, const T* after) {
    std::set<std::string> keys;
    if (before != nullptr) for (std::string& k : GpusOf(*before)) keys.insert(std::move(k));
    if (after != nullptr) for (std::string& k : GpusOf(*after)) keys.insert(std::move(k));
    for (const std::string& k : keys) q.Add(k);
  });
}

}  // namespace

TelemetryLabels::TelemetryLabels(telemetry::DeviceDirectory& directory, runtime::Manager& manager)
    : directory_(directory),
      gpus_(manager.informers().For<model::GpuCapacity>()),
      pools_(manager.informers().For<model::GpuPool>()),
      workloads_(manager.informers().For<model::Workload>()) {
  runtime::WorkQueue& q = manager.Add("telemetry-labels", *this);
  Watch(gpus_, q);
  Watch(pools_, q);
  Watch(workloads_, q);
}

telemetry::GpuLabels TelemetryLabels::LabelsOf(const model::GpuCapacity& gpu) const {
  telemetry::GpuLabels out{gpu.spec.cluster, gpu.spec.node, gpu.spec.model, {}, {}};
  for (const model::MigInstance& m : gpu.status.mig_instances) {
    out.instances.push_back({m.start, m.uuid, m.profile, {}});
  }
  const std::string key = ToLower(gpu.spec.uuid);
  for (const auto& pool : pools_.ByIndex(kByGpu, key)) {
    const telemetry::DeviceOwner owner{pool->metadata.ns, pool->metadata.name, ""};
    for (const model::AllocatedDevice& d : pool->status.allocation) {
      if (ToLower(d.gpu_uuid) != key) continue;
      if (d.profile == "full") {
        out.whole = owner;
        continue;
      }
      for (telemetry::GpuLabels::Instance& i : out.instances) {
        if ((!d.instance_uuid.empty() && i.uuid == d.instance_uuid) || (i.start == d.start && i.profile == d.profile)) {
          i.owner = owner;
        }
      }
    }
  }
  for (const auto& w : workloads_.ByIndex(kByGpu, key)) {
    for (const model::WorkloadDevice& d : w->status.devices) {
      if (ToLower(d.gpu_uuid) != key) continue;
      if (d.instance_uuid.empty()) {
        if (out.whole.project == w->metadata.ns && out.whole.pool == w->spec.pool) out.whole.workload = w->metadata.name;
        continue;
      }
      for (telemetry::GpuLabels::Instance& i : out.instances) {
        if (i.uuid == d.instance_uuid && i.owner.project == w->metadata.ns) i.owner.workload = w->metadata.name;
      }
    }
  }
  return out;
}

absl::StatusOr<runtime::Result> TelemetryLabels::Reconcile(const std::string& gpu_uuid) {
  const std::vector<std::shared_ptr<const model::GpuCapacity>> gpus = gpus_.ByIndex(kByGpu, gpu_uuid);
  if (gpus.empty()) {
    directory_.Remove(gpu_uuid);
  } else {
    directory_.Set(gpu_uuid, LabelsOf(*gpus.front()));
  }
  return runtime::Result::Done();
}

}  // namespace gpuaas::controller
