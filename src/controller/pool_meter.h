// A pool's meter (model::UsageRecord) as the pool controller keeps it: the pool controller is
// the only writer of UsageRecords, and writes each in the store transaction of the pool change it
// bills, so that no crash or replica can lose or double a billed second.
//   - opened from the approval, the first time the controller sees the pool approved;
//   - `held`: each device from its allocation (AddPlaced), in the allocation's transaction;
//   - `credits`: a device on a failed GPU from the fault until it is replaced;
//   - `end`: the release request's time (spec.releaseRequested), never inside a month whose
//     invoice is already kept (final): then from the start of the first month still open;
//   - renamed model::RetiredMeterName once its pool is deleted, so that the name can be used
//     again while the meter keeps billing its months.
// Not thread-safe: one reconcile uses one PoolMeter.
#ifndef GPUAAS_CONTROLLER_POOL_METER_H_
#define GPUAAS_CONTROLLER_POOL_METER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "allocator/allocator.h"
#include "controller/runtime/informer.h"
#include "model/billing.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "store/store.h"

namespace gpuaas::controller {

// Whether a device of `profile` on GPU `gpu_uuid` is one of `item` (a device whose GPU left the
// inventory counts for the item of its profile).
bool OfItem(const model::PoolItem& item, std::string_view profile, const std::string& gpu_uuid,
            const runtime::Informer<model::GpuCapacity>& gpus);
// The devices of `item` the allocation holds, as its meter names them (model::HeldDeviceKey).
std::vector<std::string> HeldOf(const model::PoolItem& item, const std::vector<model::AllocatedDevice>& allocation,
                                const runtime::Informer<model::GpuCapacity>& gpus);

// The first moment at or after `t` outside every month of `project` whose invoice is kept:
// what is dated there still reaches an invoice. Reads the Invoice records in `tx`.
absl::StatusOr<Time> FirstOpenMoment(store::Txn& tx, const std::string& project, Time t, Time now);

// Renames the meter named like pool `ns/name` to model::RetiredMeterName when that pool is gone
// (`pool` null) or is another pool of the same name. Returns whether it renamed one.
absl::StatusOr<bool> RetireStaleMeter(store::Txn& tx, const std::string& ns, const std::string& name,
                                      const model::GpuPool* pool, Time now);

class PoolMeter {
 public:
  // Reads the meter of the approved `pool`, or opens one from its approval. A meter written
  // before devices were billed from their allocation is converted: what the pool holds then
  // stays billed from the approval. A meter already ended is kept but never changed.
  absl::Status Load(store::Txn& tx, const model::GpuPool& pool, const runtime::Informer<model::GpuCapacity>& gpus);

  // The devices of `placements` join the pool at `now` (the item entries they bill), and the
  // meter names their cluster if it had none. `pool.status.allocation` already holds them.
  void AddPlaced(const model::GpuPool& pool, const std::vector<allocator::Placement>& placements,
                 const runtime::Informer<model::GpuCapacity>& gpus, Time now);
  // Devices on failed GPUs, credited from their fault (moved out of kept months in `tx`).
  absl::Status Credit(store::Txn& tx, const std::string& project, std::vector<model::UsageRecord::Credit> credits,
                      Time now);
  // The failed devices were replaced: every open credit ends at `now`.
  void EndCredits(Time now);
  // Ends billing at the release request (moved out of kept months in `tx`). Idempotent.
  absl::Status End(store::Txn& tx, const model::GpuPool& pool, Time now);

  // Writes what changed in `tx`; returns whether anything was written.
  absl::StatusOr<bool> Save(store::Txn& tx, Time now);

 private:
  std::optional<model::UsageRecord> meter_;
  bool fresh_ = false;    // opened in this reconcile: created, not updated
  bool changed_ = false;  // to be written
  bool ended_ = false;    // ended before this reconcile: read only
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_POOL_METER_H_
