#include "controller/pool_meter.h"

#include <algorithm>

#include "billing/billing.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

Time Seconds(Time t) { return std::chrono::floor<std::chrono::seconds>(t); }

// What `pool` holds now, billed from `since`: one entry per item it holds devices of.
std::vector<model::UsageRecord::Held> HeldSince(const model::GpuPool& pool,
                                                const runtime::Informer<model::GpuCapacity>& gpus, Time since);

}  // namespace

bool OfItem(const model::PoolItem& item, std::string_view profile, const std::string& gpu_uuid,
            const runtime::Informer<model::GpuCapacity>& gpus) {
  if (profile != item.profile) return false;
  const std::shared_ptr<const model::GpuCapacity> g = gpus.Get("", ToLower(gpu_uuid));
  return g == nullptr || g->spec.model == item.model;
}

std::vector<std::string> HeldOf(const model::PoolItem& item, const std::vector<model::AllocatedDevice>& allocation,
                                const runtime::Informer<model::GpuCapacity>& gpus) {
  std::vector<std::string> out;
  for (const model::AllocatedDevice& d : allocation) {
    if (OfItem(item, d.profile, d.gpu_uuid, gpus)) out.push_back(model::HeldDeviceKey(d));
  }
  return out;
}

namespace {

std::vector<model::UsageRecord::Held> HeldSince(const model::GpuPool& pool,
                                                const runtime::Informer<model::GpuCapacity>& gpus, Time since) {
  std::vector<model::UsageRecord::Held> out;
  for (const model::PoolItem& i : pool.spec.items) {
    std::vector<std::string> devices = HeldOf(i, pool.status.allocation, gpus);
    const auto n = static_cast<int64_t>(devices.size());
    if (n > 0) out.push_back({i.model, i.profile, n, since, std::move(devices)});
  }
  return out;
}

}  // namespace

absl::StatusOr<Time> FirstOpenMoment(store::Txn& tx, const std::string& project, Time t, Time now) {
  for (billing::Period m = billing::MonthOf(t); m.end <= now; m = billing::MonthOf(m.end)) {
    ASSIGN_OR_RETURN(std::optional<store::Record> kept, tx.Get({std::string(model::kInvoiceKind), project, m.Name()}));
    if (!kept) break;
    t = m.end;
  }
  return t;
}

absl::StatusOr<bool> RetireStaleMeter(store::Txn& tx, const std::string& ns, const std::string& name,
                                      const model::GpuPool* pool, Time now) {
  ASSIGN_OR_RETURN(std::optional<model::UsageRecord> meter, store::GetObject<model::UsageRecord>(tx, ns, name));
  if (!meter || (pool != nullptr && meter->spec.pool_uid == pool->metadata.uid)) return false;
  RETURN_IF_ERROR(store::DeleteObject<model::UsageRecord>(tx, ns, name));
  meter->metadata.name = model::RetiredMeterName(*meter);
  log::Info("pools: the meter of deleted pool {}/{} is kept as {}", ns, name, meter->metadata.name);
  RETURN_IF_ERROR(store::CreateObject(tx, *meter, now));
  return true;
}

absl::Status PoolMeter::Load(store::Txn& tx, const model::GpuPool& pool,
                             const runtime::Informer<model::GpuCapacity>& gpus) {
  ASSIGN_OR_RETURN(meter_, store::GetObject<model::UsageRecord>(tx, pool.metadata.ns, pool.metadata.name));
  if (meter_) {
    ended_ = meter_->spec.end.has_value();
    if (!ended_ && !meter_->spec.held) {
      // A meter from before devices were billed from their allocation: what the pool holds now
      // stays billed from the approval, as it was; what it lacks is billed once it comes.
      meter_->spec.held = HeldSince(pool, gpus, meter_->spec.start);
      changed_ = true;
    }
    return absl::OkStatus();
  }
  model::UsageRecord& m = meter_.emplace();
  m.metadata.ns = pool.metadata.ns;
  m.metadata.name = pool.metadata.name;
  m.metadata.labels = {{"gpuaas.io/pool", pool.metadata.name}};
  m.spec.pool = pool.metadata.name;
  m.spec.pool_uid = pool.metadata.uid;
  m.spec.cluster = pool.spec.cluster.empty() && !pool.status.allocation.empty() ? pool.status.allocation.front().cluster
                                                                              : pool.spec.cluster;
  m.spec.items = pool.spec.items;
  // A reservation is billed from its start.
  m.spec.start = Seconds(std::max(pool.status.approval->time, pool.spec.start_time.value_or(Time{})));
  // Devices the pool already holds (a pool approved before this version kept meters) are billed
  // from the approval.
  m.spec.held = HeldSince(pool, gpus, m.spec.start);
  fresh_ = changed_ = true;
  log::Info("pools: opened the meter of pool {}/{} from its approval at {}", m.metadata.ns, m.metadata.name,
            FormatTime(m.spec.start));
  return absl::OkStatus();
}

void PoolMeter::AddPlaced(const model::GpuPool& pool, const std::vector<allocator::Placement>& placements,
                          const runtime::Informer<model::GpuCapacity>& gpus, Time now) {
  if (!meter_ || ended_ || placements.empty()) return;
  model::UsageRecord::Spec& spec = meter_->spec;
  if (spec.cluster.empty()) {
    spec.cluster = placements.front().cluster;  // revenue by cluster (the pool asked for any)
    changed_ = true;
  }
  // Billing of the new devices starts now; a replacement takes a failed device's entry.
  const Time since = Seconds(std::max(now, pool.spec.start_time.value_or(now)));
  for (const model::PoolItem& i : pool.spec.items) {
    std::vector<std::string> placed;  // this item's new devices
    for (const allocator::Placement& p : placements) {
      if (OfItem(i, p.profile, p.gpu_uuid, gpus)) {
        placed.push_back(model::HeldDeviceKey({p.cluster, p.node, p.gpu_uuid, p.profile, p.start, ""}));
      }
    }
    if (placed.empty()) continue;
    int64_t billed = 0;
    model::UsageRecord::Held* last = nullptr;
    for (model::UsageRecord::Held& h : *spec.held) {
      if (h.model != i.model || h.profile != i.profile) continue;
      billed += h.count;
      last = &h;
    }
    if (const auto have = static_cast<int64_t>(HeldOf(i, pool.status.allocation, gpus).size()); have > billed) {
      spec.held->push_back({i.model, i.profile, have - billed, since, std::move(placed)});
    } else if (last != nullptr) {
      last->devices.insert(last->devices.end(), placed.begin(), placed.end());
    }
    changed_ = true;
  }
}

absl::Status PoolMeter::Credit(store::Txn& tx, const std::string& project,
                               std::vector<model::UsageRecord::Credit> credits, Time now) {
  if (!meter_ || ended_) return absl::OkStatus();
  for (model::UsageRecord::Credit& c : credits) {
    ASSIGN_OR_RETURN(c.start, FirstOpenMoment(tx, project, c.start, now));
    c.start = std::max(c.start, meter_->spec.start);
    meter_->spec.credits.push_back(std::move(c));
    changed_ = true;
  }
  return absl::OkStatus();
}

void PoolMeter::EndCredits(Time now) {
  if (!meter_ || ended_) return;
  for (model::UsageRecord::Credit& c : meter_->spec.credits) {
    if (!c.end) {
      c.end = std::max(c.start, now);
      changed_ = true;
    }
  }
}

absl::Status PoolMeter::End(store::Txn& tx, const model::GpuPool& pool, Time now) {
  const std::optional<Time> end = model::PoolEnd(pool);  // the release request or the reservation's end
  if (!meter_ || ended_ || !end) return absl::OkStatus();
  const Time asked = std::max(meter_->spec.start, Seconds(*end));
  ASSIGN_OR_RETURN(meter_->spec.end, FirstOpenMoment(tx, pool.metadata.ns, asked, now));
  ended_ = changed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> PoolMeter::Save(store::Txn& tx, Time now) {
  if (!meter_ || !changed_) return false;
  RETURN_IF_ERROR(fresh_ ? store::CreateObject(tx, *meter_, now) : store::UpdateObject(tx, *meter_));
  fresh_ = changed_ = false;
  return true;
}

}  // namespace gpuaas::controller
