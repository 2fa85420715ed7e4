// The MIG controller: brings each GPU to the MIG layout gpuaas asked for (a MigLayout, named
// like the GpuCapacity of its GPU; the key is that name) through the cluster's driver, as the
// GPU Operator's MIG manager applies a node's mig-parted config. It owns MigLayout status:
//   Pending -> Applying (asked of the driver) -> Applied (the inventory shows the layout);
//   Failed (the driver refused or the MIG manager failed) -> retried with exponential backoff
//   (2^attempts s, at most a minute), or at once for a newer generation.
// A layout already Applied is checked again whenever its GPU changes: a GPU that lost its layout
// (a node reboot, a driver reload) gets it again. A layout still Applying when the MIG manager
// reports the node done but the GPU lacks it was lost on the way (a restart) and is asked again. The driver refuses to change a GPU with running
// workloads, so gpuaas never reconfigures work away.
#ifndef GPUAAS_CONTROLLER_PROVISIONING_H_
#define GPUAAS_CONTROLLER_PROVISIONING_H_

#include <atomic>
#include <map>
#include <optional>
#include <vector>
#include <string>

#include "absl/status/statusor.h"
#include "cluster/driver.h"
#include "cluster/registry.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

class MigLayoutController final : public runtime::Reconciler {
 public:
  // Asks the drivers of `registry` (not owned). Registers itself with `manager`. While a layout
  // is being applied, the driver's MIG state is looked at every `poll`.
  MigLayoutController(store::Store& store, runtime::Manager& manager, cluster::Registry& registry,
                      Duration poll = std::chrono::seconds(1));

  absl::StatusOr<runtime::Result> Reconcile(const std::string& name) override;
  // Many layouts at once (a large pool reconfigures hundreds of GPUs): the drivers are asked
  // for each, their statuses written in one transaction.
  size_t MaxBatch() const override { return 200; }
  absl::StatusOr<runtime::Result> ReconcileBatch(const std::vector<std::string>& names) override;

  int64_t applied() const { return applied_.load(); }  // layouts asked of a driver
  int64_t failed() const { return failed_.load(); }

 private:
  // Decides one layout (asking the driver when due); its new status joins `updates`. Returns
  // when to look again.
  std::optional<Duration> Step(const std::string& name, std::vector<model::MigLayout>& updates);

  store::Store& store_;
  runtime::Manager& manager_;
  cluster::Registry& registry_;
  Duration poll_;
  runtime::Informer<model::MigLayout>& layouts_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  std::atomic<int64_t> applied_{0};
  std::atomic<int64_t> failed_{0};
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_PROVISIONING_H_
