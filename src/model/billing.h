// Billing objects. A RateCard prices devices per hour from a moment on; a UsageRecord is the
// meter of one approved pool, written by the pool controller alone (controller/pool_meter.h) in
// the store transaction of the pool change it bills (the allocations that bring it devices, the
// faults it credits, the release request it ends at), so that no crash or replica can lose or
// double a billed second. Invoices are computed from them (src/billing/) and kept, once their
// period has closed, as Invoice records.
#ifndef GPUAAS_MODEL_BILLING_H_
#define GPUAAS_MODEL_BILLING_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/object.h"
#include "model/pool.h"

namespace gpuaas::model {

struct RateCard {
  static constexpr std::string_view kKind = "RateCard";
  static constexpr std::string_view kPlural = "ratecards";
  static constexpr bool kNamespaced = false;

  // What a MIG instance costs when the card does not list its profile: compute (its compute
  // slices over the model's, times the full-GPU price), memory (its memory slices over the
  // model's) or explicit (only listed profiles are priced).
  enum class MigPricing { kCompute, kMemory, kExplicit };
  struct Price {
    std::string model;    // catalogue name
    std::string profile;  // "full" or a MIG profile of the model
    int64_t price_per_hour_micros = 0;  // per device-hour, in millionths of the currency
    friend bool operator==(const Price&, const Price&) = default;
  };
  struct Spec {
    std::string currency;  // ISO 4217: three capital letters
    Time effective_from{};
    std::vector<Price> prices;
    MigPricing mig_pricing = MigPricing::kCompute;
    // A borrowed device-hour (model::Loan), as a percentage of the device's price: charged to
    // the borrower and credited to the lender.
    int64_t preemptible_price_percent = 40;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const RateCard&, const RateCard&) = default;
};
std::string_view ToString(RateCard::MigPricing p);

// Names, currency, prices against the catalogue, no profile listed twice. InvalidArgument.
absl::Status ValidateRateCard(const RateCard& card);

struct UsageRecord {
  static constexpr std::string_view kKind = "UsageRecord";
  static constexpr std::string_view kPlural = "usagerecords";
  static constexpr bool kNamespaced = true;  // in the pool's project; named like the pool

  // A dedicated device out of service through a hardware fault, from when the pool controller
  // took it out of the pool until it was replaced (open while it is not).
  struct Credit {
    std::string gpu_uuid;
    std::string model;
    std::string profile;
    std::string reason;  // "Xid79", "MemoryErrors", ...
    Time start{};
    std::optional<Time> end;
    friend bool operator==(const Credit&, const Credit&) = default;
  };
  // Devices of one item the pool came to hold at `since`: the pool controller adds an entry, in
  // the transaction of the allocation, whenever the pool holds more devices of an item than the
  // entries before count. A device that fails keeps its entry (its time is credited until it is
  // replaced, see Credit), so its replacement adds none.
  struct Held {
    std::string model;
    std::string profile;
    int64_t count = 0;
    Time since{};
    // Which devices they were, for the GPU-hours they used: "GPU-<uuid>" for a whole GPU,
    // "GPU-<uuid>@<start>" for a MIG instance (HeldDeviceKey); a device that replaced a failed
    // one joins its item's last entry.
    std::vector<std::string> devices{};
    friend bool operator==(const Held&, const Held&) = default;
  };
  struct Spec {
    std::string pool;
    std::string pool_uid;
    std::string cluster;  // where its devices are (the pool's, or its first allocation's)
    std::vector<PoolItem> items;  // what the pool asked for
    Time start{};             // the approval
    std::optional<Time> end;  // the release request (spec.releaseRequested); open while the pool runs
    // What is billed: each device from the later of the approval and its allocation. Absent
    // only in a meter written before devices were metered from their allocation; such a meter
    // bills its items from `start` until the pool controller converts it (the devices the pool
    // then holds from `start`, the rest from their allocation).
    std::optional<std::vector<Held>> held;
    std::vector<Credit> credits;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const UsageRecord&, const UsageRecord&) = default;
};

// How a meter names a device it held (UsageRecord::Held::devices).
std::string HeldDeviceKey(const AllocatedDevice& d);

// The devices `meter` bills: its `held` entries, or, for a meter written before those, its items
// from its start.
std::vector<UsageRecord::Held> BilledDevices(const UsageRecord& meter);

// The name a meter keeps once its pool is deleted ("<pool>.<the pool's uid>"): a
// pool's live meter is named like the pool, and a deleted pool's name may be used again.
std::string RetiredMeterName(const UsageRecord& meter);

// A correction of a final invoice: money given back to a project, never an edit of the invoice.
// It appears on the invoice of the month it is issued in, as a credit line that names the month
// it corrects (FOCUS ChargeClass "Correction"). Named "<period corrected>-<n>".
struct CreditNote {
  static constexpr std::string_view kKind = "CreditNote";
  static constexpr std::string_view kPlural = "creditnotes";
  static constexpr bool kNamespaced = true;  // in the project

  struct Spec {
    std::string period;         // the month corrected, "2026-11"
    int64_t amount_micros = 0;  // given back (positive)
    std::string reason;
    Time issued{};
    std::string issued_by;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const CreditNote&, const CreditNote&) = default;
};

// The kind under which a closed period's invoice is kept (namespace: the project; name: the
// period, "2026-11"); its JSON is billing's invoice document.
inline constexpr std::string_view kInvoiceKind = "Invoice";

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_BILLING_H_
