// The telemetry labeller: keeps the remote-write device directory (telemetry/remote_write.h)
// current, so that every series gpuaas sends names its GPU's cluster, node and model, and the
// project, pool and workload holding the device. For each GPU (the key is its UUID) it reads:
//   - the GpuCapacity: cluster, node, model and the MIG instances (placement start, UUID, profile);
//   - the GpuPools whose allocation lists the GPU: the owner of the whole GPU or of an instance
//     (matched by MIG UUID, else by placement start);
//   - the Running Workloads whose devices are on the GPU: the workload's name.
// Keys come from changes of those three kinds; nothing is polled. It writes nothing to the
// store, so it runs on every replica (each sends what its own hub ingests), on a manager of its
// own rather than the leader's control plane.
#ifndef GPUAAS_CONTROLLER_TELEMETRY_LABELS_H_
#define GPUAAS_CONTROLLER_TELEMETRY_LABELS_H_

#include <string>

#include "absl/status/statusor.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "telemetry/remote_write.h"

namespace gpuaas::controller {

class TelemetryLabels final : public runtime::Reconciler {
 public:
  // Registers itself and its informers' indexes with `manager` (before it starts).
  TelemetryLabels(telemetry::DeviceDirectory& directory, runtime::Manager& manager);
  absl::StatusOr<runtime::Result> Reconcile(const std::string& gpu_uuid) override;

  // What the directory is told of a GPU (exposed for tests).
  telemetry::GpuLabels LabelsOf(const model::GpuCapacity& gpu) const;

 private:
  telemetry::DeviceDirectory& directory_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  runtime::Informer<model::GpuPool>& pools_;
  runtime::Informer<model::Workload>& workloads_;
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_TELEMETRY_LABELS_H_
