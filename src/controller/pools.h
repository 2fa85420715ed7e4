// The pool controller: takes an approved GpuPool (the key is "namespace/name") to Ready and a
// released one back to the fleet. Reconcile reads as its steps, all in one store transaction so
// that a pool's devices, its MigLayouts and its meter never disagree:
//   RetireStaleMeter  a deleted pool's meter keeps billing under a name of its own;
//   meter.Load        the meter opens from the approval (pool_meter.h);
//   then, for a pool whose release was asked for (spec.releaseRequested):
//   Release           its runs end, then its devices go back to the fleet and the meter ends;
//   otherwise:
//   ReplaceFailed     devices on failed GPUs leave the pool, credited until replaced;
//   Allocate          what the pool lacks is placed (pool_allocation.h) and billed from now;
//   Provision         once every device exists in the inventory the pool is Provisioned, Ready.
// A key DefragKey(name) is an operator's Defragmentation instead: Defragment makes its moves
// (pool_defrag.cc), on the same worker, so that they and the pools' allocations never interleave,
// and deletes the request kDefragRetention after it was made or failed.
// It owns a pool's status.allocation and its Allocated, Provisioned, Ready, Released and
// DevicesHealthy conditions, every UsageRecord, every MigLayout's spec (whose status the MIG
// controller owns) and every Defragmentation's status. docs/architecture.md lists every field's
// writer.
//
// Keys come from the pool's own changes, from its GPUs and layouts, from meters named like a pool
// that is gone, and, for pools waiting for capacity, from every change that may free capacity: a
// release, a GPU that recovers or is added, a changed MIG layout, a node that accepts work again.
// A waiting pool is otherwise looked at again after a backoff (5 s doubling to 5 min), never
// every second.
#ifndef GPUAAS_CONTROLLER_POOLS_H_
#define GPUAAS_CONTROLLER_POOLS_H_

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "allocator/allocator.h"
#include "controller/pool_allocation.h"
#include "controller/runtime/manager.h"
#include "model/billing.h"
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

// How long a made or failed Defragmentation is kept (as the record of what moved) before the pool
// controller deletes it; the audit log keeps the request.
inline constexpr Duration kDefragRetention = std::chrono::hours(24 * 7);

// The work-queue key of the Defragmentation `name` (no pool key has a ':').
std::string DefragKey(std::string_view name);

class PoolController final : public runtime::Reconciler {
 public:
  // Registers itself with `manager`.
  PoolController(store::Store& store, runtime::Manager& manager);

  absl::StatusOr<runtime::Result> Reconcile(const std::string& key) override;
  PoolStats stats() const;

 private:
  struct Cycle;  // one reconcile's pool, meter and outcome (pools.cc)
  // Whether `key` can be left alone without a transaction: the informers show nothing to do.
  bool Settled(const std::string& key, const model::GpuPool* pool) const;
  absl::Status Release(Cycle& c);
  absl::Status ReplaceFailed(Cycle& c);
  absl::Status Allocate(Cycle& c);
  void Provision(Cycle& c);
  absl::StatusOr<runtime::Result> Defragment(const std::string& name);
  void QueueWaiting();

  store::Store& store_;
  runtime::Manager& manager_;
  runtime::Informer<model::GpuPool>& pools_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  runtime::Informer<model::NodeCapacity>& nodes_;
  runtime::Informer<model::MigLayout>& layouts_;
  runtime::Informer<model::UsageRecord>& meters_;
  AllocationInformers allocation_;
  runtime::WorkQueue* queue_ = nullptr;
  std::shared_ptr<const allocator::Profile> profile_;
  mutable std::mutex mu_;
  PoolStats stats_ ABSL_GUARDED_BY(mu_);
  // Bumped whenever capacity may have been freed (the events that QueueWaiting).
  std::atomic<uint64_t> capacity_epoch_{0};
  // A pool that could not be placed, and when: it is tried again only once capacity or the pool
  // changed, so that the backoff timer alone costs no allocation over the whole fleet.
  struct Waiting {
    int attempts = 0;
    uint64_t epoch = 0;
    int64_t generation = 0;
  };
  std::map<std::string, Waiting> waits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_POOLS_H_
