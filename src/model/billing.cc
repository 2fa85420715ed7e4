#include "model/billing.h"

#include <algorithm>
#include <set>

#include "catalog/catalog.h"
#include "fmt/format.h"

namespace gpuaas::model {

absl::Status ValidateRateCard(const RateCard& c) {
  if (absl::Status s = ValidateName(c.metadata.name); !s.ok()) return s;
  if (absl::Status s = ValidateAnnotations(c.metadata.annotations); !s.ok()) return s;
  if (absl::Status s = ValidateLabels(c.metadata.labels); !s.ok()) return s;
  const std::string& cur = c.spec.currency;
  if (cur.size() != 3 || !std::all_of(cur.begin(), cur.end(), [](char ch) { return ch >= 'A' && ch <= 'Z'; })) {
    return absl::InvalidArgumentError(
        fmt::format("spec.currency: \"{}\" is not an ISO 4217 code (three capital letters, such as USD)", cur));
  }
  if (c.spec.prices.empty()) return absl::InvalidArgumentError("spec.prices: at least one price is required");
  if (c.spec.preemptible_price_percent < 0 || c.spec.preemptible_price_percent > 100) {
    return absl::InvalidArgumentError("spec.preemptiblePricePercent: must be between 0 and 100");
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < c.spec.prices.size(); ++i) {
    const RateCard::Price& p = c.spec.prices[i];
    const std::string where = fmt::format("spec.prices[{}]", i);
    const catalog::GpuModel* m = catalog::FindModel(p.model);
    if (m == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{}.model: unknown GPU model \"{}\" (see gpuaas catalog models)", where, p.model));
    }
    if (p.profile != catalog::kFullProfile && catalog::FindProfile(*m, p.profile) == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{}.profile: {} has no MIG profile \"{}\"", where, m->name, p.profile));
    }
    // A million currency units an hour is far beyond any GPU; it keeps every product of prices,
    // quantities and seconds well inside 128 bits and every amount inside 64.
    if (p.price_per_hour_micros < 0 || p.price_per_hour_micros > 1'000'000'000'000) {
      return absl::InvalidArgumentError(
          fmt::format("{}.pricePerHourMicros: must be 0 to 10^12 (a million currency units an hour)", where));
    }
    if (!seen.insert({std::string(m->name), p.profile}).second) {
      return absl::InvalidArgumentError(fmt::format("{}: {}/{} is priced twice", where, m->name, p.profile));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpuaas::model

namespace gpuaas::model {

std::vector<UsageRecord::Held> BilledDevices(const UsageRecord& meter) {
  if (meter.spec.held) return *meter.spec.held;
  std::vector<UsageRecord::Held> out;
  for (const PoolItem& i : meter.spec.items) out.push_back({i.model, i.profile, i.count, meter.spec.start});
  return out;
}

std::string HeldDeviceKey(const AllocatedDevice& d) {
  return d.profile == catalog::kFullProfile ? d.gpu_uuid : fmt::format("{}@{}", d.gpu_uuid, d.start);
}

std::string RetiredMeterName(const UsageRecord& meter) {
  return fmt::format("{}.{}", meter.spec.pool, meter.spec.pool_uid);
}

}  // namespace gpuaas::model
