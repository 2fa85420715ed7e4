#include "controller/provisioning.h"

#include <algorithm>

#include "common/status.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

using model::MigLayout;

// Does the observed GPU already have the layout?
bool Matches(const model::GpuCapacity& g, const MigLayout& l) {
  const bool enabled = g.status.mig_mode == model::MigMode::kEnabled;
  if (enabled != l.spec.mig_enabled) return false;
  if (!enabled) return true;
  if (g.status.mig_instances.size() != l.spec.instances.size()) return false;
  return std::all_of(l.spec.instances.begin(), l.spec.instances.end(), [&](const MigLayout::Instance& want) {
    return std::any_of(g.status.mig_instances.begin(), g.status.mig_instances.end(),
                       [&](const model::MigInstance& have) { return have.profile == want.profile && have.start == want.start; });
  });
}

// The MIG manager says it is done with the node, a poll after we asked, yet the GPU does not
// have the layout: the request was lost (the node, its MIG manager or gpuaas restarted) and is
// made again.
bool ApplyLostAfter(cluster::ClusterDriver& d, const std::string& node, Duration since, Duration poll) {
  return since >= poll && d.NodeMigState(node).state == "success";
}

Duration Backoff(int64_t attempts) {
  return std::chrono::seconds(std::min<int64_t>(60, int64_t{1} << std::min<int64_t>(attempts, 6)));
}

}  // namespace

MigLayoutController::MigLayoutController(store::Store& store, runtime::Manager& manager,
                                         cluster::Registry& registry, Duration poll)
    : store_(store),
      manager_(manager),
      registry_(registry),
      poll_(poll),
      layouts_(manager.informers().For<MigLayout>()),
      gpus_(manager.informers().For<model::GpuCapacity>()) {
  runtime::WorkQueue& q = manager.Add("miglayouts", *this);
  layouts_.OnChange([&q](const MigLayout* before, const MigLayout* after) {
    q.Add((after ? after : before)->metadata.name);
  });
  gpus_.OnChange([this, &q](const model::GpuCapacity* before, const model::GpuCapacity* after) {
    const model::GpuCapacity& g = after ? *after : *before;
    if (layouts_.Get("", g.metadata.name)) q.Add(g.metadata.name);
  });
}

absl::StatusOr<runtime::Result> MigLayoutController::Reconcile(const std::string& name) {
  return ReconcileBatch({name});
}

absl::StatusOr<runtime::Result> MigLayoutController::ReconcileBatch(const std::vector<std::string>& names) {
  std::vector<MigLayout> updates;
  std::optional<Duration> again;
  for (const std::string& name : names) {
    std::optional<Duration> a = Step(name, updates);
    if (a && (!again || *a < *again)) again = a;
  }
  if (!updates.empty()) {
    absl::Status s = store_.Transact([&](store::Txn& tx) -> absl::Status {
      for (MigLayout& l : updates) RETURN_IF_ERROR(store::UpdateObject(tx, l));
      return absl::OkStatus();
    });
    if (absl::IsAborted(s)) manager_.AwaitRevision(store_.Revision());
    RETURN_IF_ERROR(s);
    manager_.AwaitRevision(store_.Revision());
  }
  return again ? runtime::Result::After(*again) : runtime::Result::Done();
}

std::optional<Duration> MigLayoutController::Step(const std::string& name, std::vector<MigLayout>& updates) {
  std::shared_ptr<const MigLayout> cur = layouts_.Get("", name);
  if (!cur) return std::nullopt;
  const MigLayout& l = *cur;
  std::shared_ptr<const model::GpuCapacity> g = gpus_.Get("", name);
  const Time now = manager_.clock().Now();
  auto ApplyLost = [this](cluster::ClusterDriver& d, const std::string& n, Duration since) {
    return ApplyLostAfter(d, n, since, poll_);
  };
  MigLayout::Status next = l.status;
  std::optional<Duration> again;
  // Drivers speak the cluster's node names; NodeCapacity names are "cluster.node".
  const std::string node = l.spec.node.substr(l.spec.node.find('.') + 1);
  if (g && Matches(*g, l)) {
    next = {MigLayout::State::kApplied, "", l.status.attempts, l.status.last_attempt, l.metadata.generation};
  } else if (const std::shared_ptr<cluster::ClusterDriver> d = registry_.Get(l.spec.cluster); d == nullptr) {
    next.state = MigLayout::State::kFailed;
    next.message = fmt::format("no driver for cluster {}", l.spec.cluster);
  } else if (l.status.state == MigLayout::State::kApplying && l.status.observed_generation == l.metadata.generation &&
             !ApplyLost(*d, node, now - l.status.last_attempt)) {
    cluster::ClusterDriver::MigState ms = d->NodeMigState(node);
    if (ms.state == "failed") {
      next.state = MigLayout::State::kFailed;
      next.message = ms.message;
      ++failed_;
    } else {
      again = poll_;  // still applying: the inventory will show it, or the MIG manager fail
    }
  } else {
    // Pending, failed (retry after backoff), or a newer generation to apply.
    const Duration backoff = Backoff(l.status.attempts);
    const bool newer = l.status.observed_generation != l.metadata.generation;
    const Duration waited = now - l.status.last_attempt;
    if (l.status.state == MigLayout::State::kFailed && !newer && waited < backoff) {
      again = backoff - waited;
    } else {
      std::vector<cluster::ObservedMigInstance> insts;
      for (const MigLayout::Instance& i : l.spec.instances) insts.push_back({i.profile, static_cast<int>(i.start), 0, "", false});
      absl::Status s = d->ApplyMigLayout(node, l.spec.gpu_uuid, l.spec.mig_enabled, insts);
      next.attempts = (newer ? 0 : l.status.attempts) + 1;  // a new generation starts its own count
      next.last_attempt = now;
      next.observed_generation = l.metadata.generation;
      ++applied_;
      if (s.ok()) {
        next.state = MigLayout::State::kApplying;
        next.message = "";
        again = poll_;
      } else {
        next.state = MigLayout::State::kFailed;
        next.message = std::string(s.message());
        ++failed_;
      }
    }
  }
  if (next.state == MigLayout::State::kFailed && !again) again = Backoff(next.attempts);
  if (next != l.status) {
    MigLayout updated = l;
    updated.status = next;
    updates.push_back(std::move(updated));
  }
  return again;
}

}  // namespace gpuaas::controller
