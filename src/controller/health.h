// The health controller: the one writer of a GpuCapacity's health. For each GPU (the key is the
// GpuCapacity's name) it sets the conditions MemoryErrors, ResetRequired and Overheating from
// the telemetry hub's verdicts (telemetry/health.h), sums them up with the driver's own view
// (DriverHealthy, which the inventory owns) into Healthy and status.health, and writes the
// object when that changed. A failed GPU so leaves allocation (the allocator's health filter)
// and its pool replaces it (controller/pools.h). A new GPU is created already judged: the
// control plane hands JudgeNew to the inventory, as an admission default, so that a new fleet's
// GPUs are each written once.
//
// Keys come from GpuCapacity changes (a new GPU, a changed DriverHealthy) and from the hub after
// an ingest that changed a verdict; nothing is polled. It also tells the hub which GPUs the
// inventory knows, for matching readings.
//
// The rollup writer persists closed telemetry rollups every `flush` and prunes those past
// retention (a day of minutes, 30 days of hours).
#ifndef GPUAAS_CONTROLLER_HEALTH_H_
#define GPUAAS_CONTROLLER_HEALTH_H_

#include <cstdint>
#include <optional>
#include <vector>
#include <string>

#include "absl/status/statusor.h"
#include "controller/runtime/manager.h"
#include "model/fleet.h"
#include "store/store.h"
#include "telemetry/hub.h"

namespace gpuaas::controller {

class HealthController final : public runtime::Reconciler {
 public:
  // Registers itself with `manager` and with the hub's change notice.
  HealthController(store::Store& store, telemetry::Hub& hub, runtime::Manager& manager);
  // Unhooks from the hub, which outlives it (a server makes a control plane per term it leads).
  ~HealthController() override;

  // Call once, at start, before the manager runs: loads the verdicts a previous run wrote, so
  // that GPUs with MemoryErrors or ResetRequired True stay failed until a reset is seen.
  // Returns the GPUs restored.
  absl::StatusOr<size_t> Restore();

  absl::StatusOr<runtime::Result> Reconcile(const std::string& key) override;
  // Up to 500 GPUs at once, written in one transaction: a new fleet of 10,000 GPUs is judged in
  // 20 commits rather than 10,000.
  size_t MaxBatch() const override { return 500; }
  absl::StatusOr<runtime::Result> ReconcileBatch(const std::vector<std::string>& keys) override;

  // Sets the health of a GPU the inventory is about to create, as this controller would judge it
  // (the hub's verdicts and the driver's view), so that a new GPU is written once. Thread-safe.
  void JudgeNew(model::GpuCapacity& gpu, Time now) const;

  // GpuCapacity writes made (for tests).
  int64_t writes() const { return writes_.load(); }

  // Waits until every GPU the informers hold has been judged (status.health no longer Unknown);
  // false when `timeout` passed first. A server is ready only then. (New GPUs are created judged;
  // those a store kept Unknown, from before JudgeNew, are written once.)
  bool WaitJudged(Duration timeout) const;

 private:
  // The GPU with its health as it should be, when that differs from what is stored.
  std::optional<model::GpuCapacity> Judge(const std::string& name, Time now);
  // Sets `g`'s health from the hub's verdicts and the driver's view; whether anything changed.
  bool Assess(model::GpuCapacity& g, Time now) const;

  store::Store& store_;
  telemetry::Hub& hub_;
  runtime::Manager& manager_;
  runtime::Informer<model::GpuCapacity>& gpus_;
  runtime::WorkQueue* queue_ = nullptr;
  std::atomic<int64_t> writes_{0};
  std::atomic<int64_t> unjudged_{0};  // GPUs in the informers whose health is not summed up yet
};

class RollupWriter final : public runtime::Reconciler {
 public:
  RollupWriter(store::Store& store, telemetry::Hub& hub, runtime::Manager& manager,
               Duration flush = std::chrono::seconds(10));
  // Loads the persisted rollups of the retention window into the hub; returns the buckets.
  absl::StatusOr<size_t> Restore();
  absl::StatusOr<runtime::Result> Reconcile(const std::string& key) override;
  // Writes the closed buckets now (the manager stopped: a graceful stop).
  absl::Status Flush();
  int64_t written() const { return written_.load(); }

 private:
  store::Store& store_;
  telemetry::Hub& hub_;
  const Clock& clock_;
  Duration flush_;
  Time last_prune_{};
  std::vector<store::RollupRecord> pending_;  // closed buckets not yet written
  std::atomic<int64_t> written_{0};
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_HEALTH_H_
