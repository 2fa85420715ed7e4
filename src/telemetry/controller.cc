#include "telemetry/controller.h"

#include <chrono>

#include "common/status.h"
#include "common/strings.h"
#include "model/fleet.h"
#include "store/objects.h"

namespace gpuaas::telemetry {
namespace {

using model::Condition;
using model::ConditionStatus;

Condition ToCondition(std::string_view type, const ConditionVerdict& v, Time now) {
  return {std::string(type), v.active ? ConditionStatus::kTrue : ConditionStatus::kFalse, v.reason, v.message, now,
          0};
}

std::string SeriesKey(const RollupRow& r) { return r.device + "|" + std::string(Info(r.field).series); }

}  // namespace

absl::StatusOr<size_t> TelemetryController::Restore() {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  ASSIGN_OR_RETURN(std::vector<store::RollupRecord> rows, store_.LoadRollups(now - 30 * 86400));
  std::vector<RollupRow> back;
  back.reserve(rows.size());
  for (const store::RollupRecord& r : rows) {
    const size_t bar = r.series.rfind('|');
    if (bar == std::string::npos) continue;
    std::optional<Field> f = FieldFromSeries(std::string_view(r.series).substr(bar + 1));
    if (!f) continue;
    back.push_back({r.series.substr(0, bar), *f, r.step_s, r.bucket, static_cast<float>(r.mean),
                    static_cast<float>(r.max)});
  }
  hub_.series().LoadRollups(back);

  std::vector<model::GpuCapacity> gpus;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(gpus, store::ListObjects<model::GpuCapacity>(tx));
    return absl::OkStatus();
  }));
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch()).count();
  for (const model::GpuCapacity& g : gpus) {
    auto active = [&](std::string_view type) -> std::optional<ConditionVerdict> {
      const Condition* c = model::FindCondition(g.status.conditions, type);
      if (c == nullptr || c->status != ConditionStatus::kTrue) return std::nullopt;
      return ConditionVerdict{true, c->reason, c->message};
    };
    std::optional<ConditionVerdict> memory = active(model::kGpuMemoryErrors), reset = active(model::kGpuResetRequired);
    if (!memory && !reset) continue;
    hub_.RestoreHealth(g.spec.uuid, memory, reset, now_ms);
    tracked_.insert(g.spec.uuid);
  }
  return back.size();
}

absl::StatusOr<TelemetryPassStats> TelemetryController::RunOnce() {
  TelemetryPassStats stats;
  const Time now = clock_.Now();
  ++passes_;
  std::set<std::string> changed = hub_.TakeChangedHealth();
  const bool resync = passes_ % resync_ == 1 || resync_ <= 1;
  if (resync) changed.insert(tracked_.begin(), tracked_.end());
  // The known GPUs follow the inventory: listed again when the store moved on, at most every
  // tenth pass (they only say which pushed GPUs the inventory does not know), or at once while
  // none are known yet.
  const int64_t revision = store_.Revision();
  const bool relist = resync || known_revision_ < 0 ||
                      (revision != known_revision_ && passes_ - known_pass_ >= 10);

  changed.insert(retry_.begin(), retry_.end());
  retry_.clear();
  absl::Status written = store_.Transact([&](store::Txn& tx) -> absl::Status {
    stats.gpus_updated = 0;
    if (relist) {
      known_revision_ = revision;
      known_pass_ = passes_;
      ASSIGN_OR_RETURN(std::vector<model::GpuCapacity> all, store::ListObjects<model::GpuCapacity>(tx));
      std::set<std::string> uuids;
      for (const model::GpuCapacity& g : all) uuids.insert(g.spec.uuid);
      if (uuids.empty()) known_revision_ = -1;  // no inventory yet: look again next pass
      hub_.SetKnownGpus(std::move(uuids));
    }
    for (const std::string& uuid : changed) {
      ASSIGN_OR_RETURN(std::optional<model::GpuCapacity> g, store::GetObject<model::GpuCapacity>(tx, "", ToLower(uuid)));
      if (!g) continue;  // not in the inventory (yet): the verdict waits in the hub
      tracked_.insert(uuid);
      const GpuVerdict v = hub_.Verdict(uuid);
      bool dirty = false;
      dirty |= model::SetCondition(g->status.conditions, ToCondition(model::kGpuMemoryErrors, v.memory_errors, now));
      dirty |= model::SetCondition(g->status.conditions, ToCondition(model::kGpuResetRequired, v.reset_required, now));
      dirty |= model::SetCondition(g->status.conditions, ToCondition(model::kGpuOverheating, v.overheating, now));
      dirty |= model::SummarizeGpuHealth(*g, model::DriverReportedHealthy(*g), now);
      if (!dirty) continue;
      RETURN_IF_ERROR(store::UpdateObject(tx, *g));
      ++stats.gpus_updated;
    }
    return absl::OkStatus();
  });
  if (!written.ok()) {
    // A conflict with the inventory's write, say: the verdicts are written on the next pass.
    retry_ = std::move(changed);
    known_revision_ = -1;
    return written;
  }

  std::vector<RollupRow> closed = hub_.series().TakeClosedRollups();
  if (!closed.empty()) {
    std::vector<store::RollupRecord> rows;
    rows.reserve(closed.size());
    for (const RollupRow& r : closed) rows.push_back({SeriesKey(r), r.step_s, r.bucket, r.mean, r.max});
    RETURN_IF_ERROR(store_.AppendRollups(rows));
    stats.rollups_written = static_cast<int>(rows.size());
  }
  if (passes_ % 3600 == 1) {
    const int64_t secs = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    RETURN_IF_ERROR(store_.PruneRollups(60, secs - 86400));
    RETURN_IF_ERROR(store_.PruneRollups(3600, secs - 30 * 86400));
  }
  return stats;
}

}  // namespace gpuaas::telemetry
