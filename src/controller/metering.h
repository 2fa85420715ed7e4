// The metering controller: keeps the billing ledger whole. It reads the meters (UsageRecords,
// written by the pool controller only) and credit notes; each time a month closes it keeps every
// project's invoice of that month (kind Invoice, named by the period): final and never edited after; a
// correction is a credit note. Invoices of months that closed while the server was down are
// written when it starts.
#ifndef GPUAAS_CONTROLLER_METERING_H_
#define GPUAAS_CONTROLLER_METERING_H_

#include <atomic>
#include <string>

#include "common/clock.h"
#include "controller/runtime/manager.h"
#include "store/store.h"
#include "telemetry/hub.h"

namespace gpuaas::controller {

class MeteringController final : public runtime::Reconciler {
 public:
  MeteringController(store::Store& store, telemetry::Hub& hub, runtime::Manager& manager,
                     Duration period = std::chrono::minutes(1));
  absl::StatusOr<runtime::Result> Reconcile(const std::string& key) override;
  int64_t invoices_written() const { return invoices_written_.load(); }

 private:
  // Unavailable while an approved pool has no meter yet (the pool controller opens it): a month
  // is kept only once every meter that may bill it exists.
  absl::Status MetersOpened();
  // Keeps the final invoices of closed months for every project with usage or credit notes in
  // them: `all` of them since each project's first meter (at start), else the month just closed.
  absl::Status FinalizeClosedMonths(bool all);

  store::Store& store_;
  telemetry::Hub& hub_;
  const Clock& clock_;
  Duration period_;
  Time finalized_through_{};  // the end of the last month whose invoices are kept
  std::atomic<int64_t> invoices_written_{0};
};

}  // namespace gpuaas::controller

#endif  // GPUAAS_CONTROLLER_METERING_H_
