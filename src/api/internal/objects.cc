#include "api/internal/objects.h"

#include "catalog/catalog.h"

namespace gpuaas::api::internal {

telemetry::AssessedDevice DeviceOf(const telemetry::Hub& hub, const model::AllocatedDevice& d,
                                   const std::map<std::string, model::GpuCapacity>& gpus) {
  auto g = gpus.find(d.gpu_uuid);
  const std::string model = g == gpus.end() ? "" : g->second.spec.model;
  telemetry::DeviceRef ref{d.gpu_uuid, -1, catalog::GpuShare(model, d.profile)};
  if (d.profile != "full") {
    // An instance no reading has named yet (gi -2) counts as allocated, without readings.
    ref.gi = hub.FindInstance(d.gpu_uuid, static_cast<int>(d.start), d.instance_uuid).value_or(-2);
  }
  return {ref, model, d.profile};
}

std::vector<telemetry::AssessedDevice> PoolDevices(const telemetry::Hub& hub, const model::GpuPool& pool,
                                                   const std::map<std::string, model::GpuCapacity>& gpus) {
  std::vector<telemetry::AssessedDevice> out;
  for (const model::AllocatedDevice& d : pool.status.allocation) out.push_back(DeviceOf(hub, d, gpus));
  return out;
}

std::map<std::string, model::GpuCapacity> GpusByUuid(store::ObjectCache& cache) {
  std::map<std::string, model::GpuCapacity> out;
  for (model::GpuCapacity& g : DecodeAll<model::GpuCapacity>(cache)) out.emplace(g.spec.uuid, std::move(g));
  return out;
}

}  // namespace gpuaas::api::internal
