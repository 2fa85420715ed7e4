// The pool controller: takes an approved GpuPool (the key is "namespace/name") to Ready and a
// released one back to the fleet, in clear steps, each persisted before the next acts:
//   1. release: a released pool's devices go back to the fleet;
//   2. replace: devices on failed GPUs leave the pool (DevicesHealthy=False);
//   3. allocate: what the pool lacks is asked of the allocator, on a snapshot built from the
//      informers (owners from every live pool, GPUs planned on their desired MIG layouts); the
//      allocation and the MigLayouts it needs are written in one transaction, which checks that
//      no pool changed since the snapshot took a device meanwhile (dedication);
//   4. provision: once every device exists in the inventory the pool is Provisioned and Ready.
// It owns a pool's status.allocation and its Allocated, Provisioned, Ready, Released and
// DevicesHealthy conditions, and creates MigLayouts (whose status the MIG controller owns).
//
// Keys come from the pool's own changes, from its GPUs and layouts, and, for pools waiting for
// capacity, from every change that may free capacity: a release, a GPU that recovers or is added,
// a changed MIG layout, a node that accepts work again. A waiting pool is otherwise looked at
// again after a backoff (5 s doubling to 5 min), never every second.
#ifndef GPUAAS_CONTROLLER_POOLS_H_
#define GPUAAS_CONTROLLER_POOLS_H_

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "allocator/allocator.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

// Totals since start, for tests and logs.
struct PoolStats {
  int64_t allocated = 0;
  int64_t ready = 0;
  int64_t released = 0;
  int64_t unschedulable = 0;
  int64_t replaced = 0;  // pools that lost devices on failed GPUs
};

class PoolController final : public runtime::Reconciler {
 public:
  // Registers itself with `manager`.
  PoolController(store::Store& store, runtime::Manager& manager);

  absl::StatusOr<runtime::Result> Reconcile(const std::string& key) override;
  PoolStats stats() const;

 private:
  absl::StatusOr<runtime::Result> Step(const model::GpuPool& listed);
  void QueueWaiting();

  store::Store& store_;
  runtime::Manager& manager_;
  runtime::Informer<model::GpuPool>& pools_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  runtime::Informer<model::NodeCapacity>& nodes_;
  runtime::Informer<model::MigLayout>& layouts_;
  runtime::WorkQueue* queue_ = nullptr;
  std::shared_ptr<const allocator::Profile> profile_;
  mutable std::mutex mu_;
  PoolStats stats_;  // guarded by mu_
  // Bumped whenever capacity may have been freed (the events that QueueWaiting).
  std::atomic<uint64_t> capacity_epoch_{0};
  // A pool that could not be placed, and when: it is tried again only once capacity or the pool
  // changed, so that the backoff timer alone costs no allocation over the whole fleet.
  struct Waiting {
    int attempts = 0;
    uint64_t epoch = 0;
    int64_t generation = 0;
  };
  std::map<std::string, Waiting> waits_;  // guarded by mu_
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_POOLS_H_
