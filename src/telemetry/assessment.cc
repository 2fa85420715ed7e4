#include "telemetry/assessment.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "catalog/catalog.h"
#include "common/status.h"
#include "fmt/format.h"

namespace gpuaas::telemetry {
namespace {

std::string DeviceName(const DeviceRef& d) {
  return d.gi < 0 ? d.gpu_uuid : fmt::format("{}/{}", d.gpu_uuid, d.gi);
}

}  // namespace

absl::StatusOr<PoolAssessment> AssessPool(const Hub& hub, const PoolUsage& pool, int64_t from, int64_t to, int64_t now,
                          const AssessmentOptions& options) {
  PoolAssessment a;
  a.ns = pool.ns;
  a.name = pool.name;
  // GPU-hours as the pool's invoice counts them: allocated from its meter, used by the devices
  // it billed, to the second (UsedGpuHours).
  a.allocated_gpu_hours = pool.allocated_gpu_hours;
  ASSIGN_OR_RETURN(const std::optional<GpuHoursUsed> used, UsedGpuHours(hub, pool.metered, from, to, now));
  if (used) {
    a.used_gpu_hours = used->used;
    a.covered_gpu_hours = used->measured;
  }
  a.utilization = a.covered_gpu_hours > 0 ? a.used_gpu_hours / a.covered_gpu_hours : 0;
  const int64_t step = to - from <= 86400 ? 60 : 3600;
  from = std::max(from, pool.allocated_since - pool.allocated_since % step);
  std::vector<DeviceRef> refs;
  for (const AssessedDevice& d : pool.devices) {
    refs.push_back(d.ref);
    a.allocated_gpus += d.ref.weight;
  }
  if (to <= from || refs.empty()) return a;
  ASSIGN_OR_RETURN(const std::vector<UtilizationPoint> points, hub.Utilization(refs, from, to, step, now));
  int64_t idle_run = 0;
  bool any_data = false;
  for (const UtilizationPoint& p : points) {
    if (p.covered_gpus <= 0) continue;  // no readings: neither idle nor busy
    any_data = true;
    idle_run = p.utilization() < options.idle_below ? idle_run + step : 0;
  }
  a.idle_seconds = idle_run;
  a.idle = any_data && idle_run >= options.idle_for_s;

  // Right-size: peaks per device, against the smaller profiles of the same model.
  std::string model, profile;
  bool uniform = true;
  for (const AssessedDevice& d : pool.devices) {
    const std::string dev = DeviceName(d.ref);
    ASSIGN_OR_RETURN(const std::vector<Bucket> fb, hub.Query(dev, Field::kFbUsedMib, from, to, to - from, now));
    for (const Bucket& b : fb) {
      if (b.count > 0) a.peak_fb_used_mib = std::max(a.peak_fb_used_mib, b.max);
    }
    for (Field f : {Field::kSmActive, Field::kGrEngineActive}) {
      ASSIGN_OR_RETURN(const std::vector<Bucket> q, hub.Query(dev, f, from, to, to - from, now));
      if (q.empty()) continue;
      for (const Bucket& b : q) {
        if (b.count > 0) a.peak_sm_gpu_fraction = std::max(a.peak_sm_gpu_fraction, std::min(1.0, b.max) * d.ref.weight);
      }
      break;
    }
    if (model.empty()) {
      model = d.model;
      profile = d.profile;
    }
    uniform &= d.model == model && d.profile == profile;
  }
  const catalog::GpuModel* m = catalog::FindModel(model);
  if (!uniform || m == nullptr || !m->mig_capable || !any_data) return a;
  const double have_weight = catalog::GpuShare(model, profile);
  const catalog::MigProfile* best = nullptr;
  for (const catalog::MigProfile& p : m->profiles) {
    if (p.media_extensions()) continue;
    const double mem_mib = p.memory_mib > 0 ? p.memory_mib : p.memory_gb * 1e9 / (1 << 20);  // GB as NVIDIA names them
    const double weight = static_cast<double>(p.compute_slices) / m->compute_slices;
    if (mem_mib < a.peak_fb_used_mib * 1.1 || weight < a.peak_sm_gpu_fraction || weight >= have_weight) continue;
    if (best == nullptr || p.compute_slices < best->compute_slices ||
        (p.compute_slices == best->compute_slices && p.memory_slices < best->memory_slices)) {
      best = &p;
    }
  }
  if (best != nullptr) {
    a.suggestion = fmt::format(
        "{} x {} never used more than {:.0f} MiB of memory and {:.0f}% of a GPU's SMs: {} would hold it "
        "({:.2f} instead of {:.2f} GPU each)",
        pool.devices.size(), profile, a.peak_fb_used_mib, 100 * a.peak_sm_gpu_fraction, best->name,
        static_cast<double>(best->compute_slices) / m->compute_slices, have_weight);
    a.suggestion_code = "RightSize";
    a.suggestion_params = {
        {"devices", std::to_string(pool.devices.size())},
        {"profile", profile},
        {"peakFbUsedMiB", fmt::format("{:.0f}", a.peak_fb_used_mib)},
        {"peakSmPercent", fmt::format("{:.0f}", 100 * a.peak_sm_gpu_fraction)},
        {"suggested", std::string(best->name)},
        {"suggestedShare", fmt::format("{:.2f}", static_cast<double>(best->compute_slices) / m->compute_slices)},
        {"share", fmt::format("{:.2f}", have_weight)}};
  }
  return a;
}

GpuLookup LookupIn(const std::map<std::string, model::GpuCapacity>& gpus) {
  return [&gpus](const std::string& uuid) -> const model::GpuCapacity* {
    auto g = gpus.find(uuid);
    return g == gpus.end() ? nullptr : &g->second;
  };
}

DeviceRef WorkloadDeviceRef(const Hub& hub, const model::WorkloadDevice& d, const GpuLookup& gpus) {
  DeviceRef ref{d.gpu_uuid, -1, 1};
  if (d.instance_uuid.empty()) return ref;
  ref.gi = hub.FindInstance(d.gpu_uuid, -1, d.instance_uuid).value_or(-2);
  if (const model::GpuCapacity* g = gpus(d.gpu_uuid)) {
    for (const model::MigInstance& m : g->status.mig_instances) {
      if (m.uuid != d.instance_uuid) continue;
      ref.weight = catalog::GpuShare(g->spec.model, m.profile);
      if (ref.gi < -1) ref.gi = hub.FindInstance(d.gpu_uuid, static_cast<int>(m.start), m.uuid).value_or(-2);
    }
  }
  return ref;
}

absl::StatusOr<std::optional<GpuHoursUsed>> UsedGpuHours(const Hub& hub, const std::vector<DeviceRef>& devices, int64_t from,
                                         int64_t to, int64_t now) {
  if (to <= from || devices.empty()) return std::nullopt;
  // Minute steps as the rollups hold them (coarser for long spans, at most about 2,000 steps),
  // aligned to them; a step counts for the part of it inside [from, to) and the device's window.
  const int64_t step = std::max<int64_t>(60, (to - from) / 2000 / 60 * 60);
  const int64_t first = from - ((from % step) + step) % step;
  GpuHoursUsed total;
  bool covered = false;
  for (const DeviceRef& d : devices) {
    const int64_t a = std::max(from, d.from_s), b = std::min(to, d.to_s);
    if (b <= a) continue;
    ASSIGN_OR_RETURN(const std::vector<UtilizationPoint> points, hub.Utilization({d}, first, to, step, now));
    for (const UtilizationPoint& p : points) {
      if (p.covered_gpus <= 0) continue;
      const int64_t inside = std::min(p.t + step, b) - std::max(p.t, a);
      if (inside <= 0) continue;
      covered = true;
      total.used += p.used_gpus * static_cast<double>(inside) / 3600.0;
      total.measured += p.covered_gpus * static_cast<double>(inside) / 3600.0;
    }
  }
  if (!covered) return std::nullopt;
  return total;
}

std::vector<DeviceRef> MeteredDevices(const Hub& hub, const std::vector<model::UsageRecord>& meters, std::string_view pool,
                                      std::string_view model, std::string_view profile, int64_t open_until) {
  auto seconds = [](Time t) { return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count(); };
  std::vector<DeviceRef> out;
  for (const model::UsageRecord& m : meters) {
    if (m.spec.pool != pool || !m.spec.held) continue;
    const int64_t end = m.spec.end ? seconds(*m.spec.end) : open_until;
    for (const model::UsageRecord::Held& h : *m.spec.held) {
      if ((!model.empty() && h.model != model) || (!profile.empty() && h.profile != profile)) continue;
      for (const std::string& key : h.devices) {
        const size_t at = key.find('@');
        DeviceRef ref{key.substr(0, at), -1, catalog::GpuShare(h.model, h.profile)};
        if (at != std::string::npos) {
          // A MIG instance by its GPU and start; -2 until a reading names it.
          ref.gi = hub.FindInstance(ref.gpu_uuid, std::atoi(key.c_str() + at + 1), "").value_or(-2);
        }
        ref.from_s = std::max(seconds(m.spec.start), seconds(h.since));
        ref.to_s = end;
        out.push_back(std::move(ref));
      }
    }
  }
  return out;
}

}  // namespace gpuaas::telemetry
