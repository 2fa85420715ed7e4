#include "controller/health.h"

#include <chrono>
#include <set>
#include <thread>

#include "common/status.h"
#include "common/strings.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::Condition;
using model::ConditionStatus;

constexpr std::string_view kHubKey = "~hub";      // drain the hub's changed verdicts
constexpr std::string_view kKnownKey = "~known";  // tell the hub the inventory's GPUs
constexpr std::string_view kFlushKey = "flush";

Condition ToCondition(std::string_view type, const telemetry::ConditionVerdict& v, Time now) {
  return {std::string(type), v.active ? ConditionStatus::kTrue : ConditionStatus::kFalse, v.reason, v.message, now,
          0};
}

std::string SeriesKey(const telemetry::RollupRow& r) {
  return r.device + "|" + std::string(telemetry::Info(r.field).series);
}

// Not summed up by this controller yet: a GPU the inventory just created, or whose summary
// someone else removed.
bool Unjudged(const model::GpuCapacity& g) {
  return model::FindCondition(g.status.conditions, model::kGpuHealthy) == nullptr ||
         g.status.health == model::Health::kUnknown;
}

int64_t UnixSeconds(Time t) { return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count(); }

}  // namespace

HealthController::HealthController(store::Store& store, telemetry::Hub& hub, runtime::Manager& manager)
    : store_(store), hub_(hub), manager_(manager), gpus_(manager.informers().For<model::GpuCapacity>()) {
  runtime::WorkQueue& q = manager.Add("health", *this);
  queue_ = &q;
  gpus_.OnChange([this, &q](const model::GpuCapacity* before, const model::GpuCapacity* after) {
    unjudged_ += (after != nullptr && Unjudged(*after)) - (before != nullptr && Unjudged(*before));
    if (before == nullptr || after == nullptr) q.Add(std::string(kKnownKey));
    if (after == nullptr) return;
    // A new GPU, or one whose driver view changed, or whose health summary someone else changed.
    const Condition* was = before ? model::FindCondition(before->status.conditions, model::kGpuDriverHealthy) : nullptr;
    const Condition* is = model::FindCondition(after->status.conditions, model::kGpuDriverHealthy);
    const bool driver_changed = (was == nullptr) != (is == nullptr) || (was && is && was->status != is->status);
    if (before == nullptr || driver_changed || Unjudged(*after)) q.Add(after->metadata.name);
  });
  hub_.OnHealthChange([&q] { q.Add(std::string(kHubKey)); });
}

HealthController::~HealthController() { hub_.OnHealthChange(nullptr); }

bool HealthController::WaitJudged(Duration timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (unjudged_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

absl::StatusOr<size_t> HealthController::Restore() {
  std::vector<model::GpuCapacity> gpus;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(gpus, store::ListObjects<model::GpuCapacity>(tx));
    return absl::OkStatus();
  }));
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(manager_.clock().Now().time_since_epoch()).count();
  size_t restored = 0;
  for (const model::GpuCapacity& g : gpus) {
    auto active = [&](std::string_view type) -> std::optional<telemetry::ConditionVerdict> {
      const Condition* c = model::FindCondition(g.status.conditions, type);
      if (c == nullptr || c->status != ConditionStatus::kTrue) return std::nullopt;
      return telemetry::ConditionVerdict{true, c->reason, c->message};
    };
    std::optional<telemetry::ConditionVerdict> memory = active(model::kGpuMemoryErrors),
                                                reset = active(model::kGpuResetRequired);
    if (!memory && !reset) continue;
    hub_.RestoreHealth(g.spec.uuid, memory, reset, now_ms);
    ++restored;
  }
  return restored;
}

absl::StatusOr<runtime::Result> HealthController::Reconcile(const std::string& key) {
  return ReconcileBatch({key});
}

bool HealthController::Assess(model::GpuCapacity& g, Time now) const {
  const telemetry::GpuVerdict v = hub_.Verdict(g.spec.uuid);
  bool dirty = false;
  dirty |= model::SetCondition(g.status.conditions, ToCondition(model::kGpuMemoryErrors, v.memory_errors, now));
  dirty |= model::SetCondition(g.status.conditions, ToCondition(model::kGpuResetRequired, v.reset_required, now));
  dirty |= model::SetCondition(g.status.conditions, ToCondition(model::kGpuOverheating, v.overheating, now));
  dirty |= model::SummarizeGpuHealth(g, now);
  return dirty;
}

void HealthController::JudgeNew(model::GpuCapacity& gpu, Time now) const { Assess(gpu, now); }

std::optional<model::GpuCapacity> HealthController::Judge(const std::string& name, Time now) {
  std::shared_ptr<const model::GpuCapacity> cur = gpus_.Get("", name);
  if (!cur) return std::nullopt;  // not in the inventory (yet): the verdict waits in the hub
  model::GpuCapacity g = *cur;
  if (!Assess(g, now)) return std::nullopt;
  return g;
}

absl::StatusOr<runtime::Result> HealthController::ReconcileBatch(const std::vector<std::string>& keys) {
  const Time now = manager_.clock().Now();
  std::vector<model::GpuCapacity> updates;
  for (const std::string& key : keys) {
    if (key == kHubKey) {
      for (const std::string& uuid : hub_.TakeChangedHealth()) queue_->Add(ToLower(uuid));
    } else if (key == kKnownKey) {
      std::set<std::string> uuids;
      for (const auto& g : gpus_.List()) uuids.insert(g->spec.uuid);
      hub_.SetKnownGpus(std::move(uuids));
    } else if (std::optional<model::GpuCapacity> g = Judge(key, now)) {
      updates.push_back(std::move(*g));
    }
  }
  if (updates.empty()) return runtime::Result::Done();
  // Each at the version read: a conflict (the inventory wrote a GPU meanwhile) retries the batch
  // once the informers caught up.
  absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
    for (model::GpuCapacity& g : updates) RETURN_IF_ERROR(store::UpdateObject(tx, g));
    return absl::OkStatus();
  });
  if (absl::IsAborted(s)) manager_.AwaitRevision(store_.Revision());
  RETURN_IF_ERROR(s);
  writes_ += static_cast<int64_t>(updates.size());
  manager_.AwaitRevision(store_.Revision());
  return runtime::Result::Done();
}

RollupWriter::RollupWriter(store::Store& store, telemetry::Hub& hub, runtime::Manager& manager, Duration flush)
    : store_(store), hub_(hub), clock_(manager.clock()), flush_(flush) {
  manager.Add("rollups", *this).AddAfter(std::string(kFlushKey), flush_);
}

absl::StatusOr<size_t> RollupWriter::Restore() {
  ASSIGN_OR_RETURN(std::vector<store::RollupRecord> rows, store_.LoadRollups(UnixSeconds(clock_.Now()) - 30 * 86400));
  std::vector<telemetry::RollupRow> back;
  back.reserve(rows.size());
  for (const store::RollupRecord& r : rows) {
    const size_t bar = r.series.rfind('|');
    if (bar == std::string::npos) continue;
    std::optional<telemetry::Field> f = telemetry::FieldFromSeries(std::string_view(r.series).substr(bar + 1));
    if (!f) continue;
    back.push_back({r.series.substr(0, bar), *f, r.step_s, r.bucket, static_cast<float>(r.mean),
                    static_cast<float>(r.max)});
  }
  hub_.series().LoadRollups(back);
  return back.size();
}

absl::Status RollupWriter::Flush() {
  for (const telemetry::RollupRow& r : hub_.series().TakeClosedRollups()) {
    pending_.push_back({SeriesKey(r), r.step_s, r.bucket, r.mean, r.max});
  }
  if (pending_.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(store_.AppendRollups(pending_));  // kept for the retry when it fails
  written_ += static_cast<int64_t>(pending_.size());
  pending_.clear();
  return absl::OkStatus();
}

absl::StatusOr<runtime::Result> RollupWriter::Reconcile(const std::string&) {
  RETURN_IF_ERROR(Flush());
  const Time now = clock_.Now();
  if (now - last_prune_ >= std::chrono::hours(1)) {
    RETURN_IF_ERROR(store_.PruneRollups(60, UnixSeconds(now) - 86400));
    RETURN_IF_ERROR(store_.PruneRollups(3600, UnixSeconds(now) - 30 * 86400));
    last_prune_ = now;
  }
  return runtime::Result::After(flush_);
}

}  // namespace gpuaas::controller
