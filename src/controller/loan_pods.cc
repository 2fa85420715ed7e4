#include "controller/loan_pods.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "controller/pod_runs.h"
#include "fmt/format.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

// Open loans by the devices' GPUs (lower-case UUIDs): who to look at when pods come and go.
constexpr std::string_view kOpenLoansByGpu = "open-loans-by-gpu";

// How often an ended loan's devices are looked at while the borrower's pods are still on them.
constexpr Duration kRecheck = std::chrono::seconds(5);
constexpr Duration kRecheckStuck = std::chrono::seconds(15);

bool InNamespace(const std::string& pod, const std::string& ns) {
  return pod.size() > ns.size() && pod.compare(0, ns.size(), ns) == 0 && pod[ns.size()] == '/';
}

}  // namespace

std::map<std::string, std::vector<std::string>> BorrowerPods(
    const model::Loan& loan, const std::function<const model::GpuCapacity*(const std::string&)>& gpu) {
  std::map<std::string, std::set<std::string>> found;
  for (const model::WorkloadDevice& d : loan.spec.devices) {
    const model::GpuCapacity* g = gpu(d.gpu_uuid);
    if (g == nullptr) continue;
    const std::vector<std::string>* holders = nullptr;
    if (d.instance_uuid.empty()) {
      holders = &g->status.pods;
    } else {
      for (const model::MigInstance& mi : g->status.mig_instances) {
        if (mi.uuid == d.instance_uuid) holders = &mi.pods;
      }
    }
    if (holders == nullptr) continue;
    for (const std::string& pod : *holders) {
      if (InNamespace(pod, loan.spec.borrower)) found[g->spec.cluster].insert(pod);
    }
  }
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [cluster, pods] : found) out[cluster].assign(pods.begin(), pods.end());
  return out;
}

LoanPodController::LoanPodController(store::Store& store, runtime::Manager& manager, cluster::Registry& registry,
                                     Duration stuck_after)
    : store_(store),
      registry_(registry),
      clock_(manager.clock()),
      stuck_after_(stuck_after),
      watched_for_(std::max(kLoanPodsWatchedFor, 2 * stuck_after)),
      loans_(manager.informers().For<model::Loan>()),
      workloads_(manager.informers().For<model::Workload>()),
      gpus_(manager.informers().For<model::GpuCapacity>()) {
  runtime::WorkQueue& q = manager.Add("loanpods", *this);
  loans_.AddIndex(std::string(kOpenLoansByGpu), [](const model::Loan& l) {
    std::vector<std::string> out;
    if (l.spec.end) return out;
    for (const model::WorkloadDevice& d : l.spec.devices) out.push_back(ToLower(d.gpu_uuid));
    return out;
  });
  // A loan that starts or ends (not its status, which is written here); of the loans already
  // there at start, those open or ended lately (receipts pile up).
  loans_.OnChange([this, &q](const model::Loan* before, const model::Loan* after) {
    if (after == nullptr || (before != nullptr && before->spec.end == after->spec.end)) return;
    if (after->spec.end && clock_.Now() >= *after->spec.end + watched_for_) return;
    q.Add(after->metadata.name);
  });
  // A borrower told of a reclaim: its loan's pods are told too.
  workloads_.OnChange([&q](const model::Workload* before, const model::Workload* after) {
    if (after == nullptr || !after->status.borrowed_from || !after->status.reclaim_deadline) return;
    if (before != nullptr && before->status.reclaim_deadline == after->status.reclaim_deadline) return;
    q.Add(fmt::format("{}.{}", after->metadata.ns, after->status.profile));
  });
  // Pods that come to an open loan's devices, or leave them.
  gpus_.OnChange([this, &q](const model::GpuCapacity* before, const model::GpuCapacity* after) {
    if (Holders(before) == Holders(after)) return;
    const model::GpuCapacity& g = after != nullptr ? *after : *before;
    for (const auto& l : loans_.ByIndex(std::string(kOpenLoansByGpu), ToLower(g.spec.uuid))) q.Add(l->metadata.name);
  });
}

absl::StatusOr<runtime::Result> LoanPodController::Reconcile(const std::string& name) {
  const auto loan = loans_.Get("", name);
  if (loan == nullptr) return runtime::Result::Done();
  const Time now = clock_.Now();
  if (loan->spec.end && now >= *loan->spec.end + watched_for_) return runtime::Result::Done();

  std::vector<runtime::Informer<model::GpuCapacity>::Ptr> keep;  // the GPUs, while they are read
  auto gpu = [&](const std::string& uuid) {
    keep.push_back(gpus_.Get("", ToLower(uuid)));
    return keep.back().get();
  };
  std::map<std::string, std::vector<std::string>> pods = BorrowerPods(*loan, gpu);
  absl::Status first_error;
  auto failed = [&](const absl::Status& s) {
    if (first_error.ok()) first_error = s;
  };

  if (!loan->spec.end) {
    const auto w = workloads_.Get(loan->spec.borrower, loan->spec.workload);
    if (w == nullptr || !w->status.reclaim_deadline || fmt::format("{}.{}", w->metadata.ns, w->status.profile) != name) {
      return runtime::Result::Done();
    }
    for (const auto& [cluster, list] : pods) {
      const std::shared_ptr<cluster::ClusterDriver> driver = registry_.Get(cluster);
      if (driver == nullptr) continue;
      if (absl::Status s = driver->TellPodsOfReclaim(list, *w->status.reclaim_deadline); !s.ok()) {
        failed(s);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.told;
    }
    if (!first_error.ok()) return first_error;  // asked again with backoff
    return runtime::Result::Done();             // its end queues it again
  }

  // Ended: the borrower's pods go at once. A device lent to the same borrower again since is
  // its own again, and so are its pods there.
  const Time end = *loan->spec.end;
  std::set<std::string> lent_again;
  for (const model::WorkloadDevice& d : loan->spec.devices) {
    for (const auto& other : loans_.ByIndex(std::string(kOpenLoansByGpu), ToLower(d.gpu_uuid))) {
      if (other->spec.borrower != loan->spec.borrower) continue;
      for (const model::WorkloadDevice& o : other->spec.devices) {
        if (o == d) lent_again.insert(d.instance_uuid.empty() ? d.gpu_uuid : d.instance_uuid);
      }
    }
  }
  if (!lent_again.empty()) {
    model::Loan mine = *loan;
    std::erase_if(mine.spec.devices, [&](const model::WorkloadDevice& d) {
      return lent_again.contains(d.instance_uuid.empty() ? d.gpu_uuid : d.instance_uuid);
    });
    pods = BorrowerPods(mine, gpu);
  }
  std::set<std::string> here;
  for (const auto& [cluster, list] : pods) {
    here.insert(list.begin(), list.end());
    const std::shared_ptr<cluster::ClusterDriver> driver = registry_.Get(cluster);
    if (driver == nullptr) continue;
    if (absl::Status s = driver->RemovePods(list); !s.ok()) failed(s);
  }
  std::set<std::string> removed(loan->status.removed_pods.begin(), loan->status.removed_pods.end());
  removed.insert(here.begin(), here.end());
  const bool late = now >= end + stuck_after_;
  const std::vector<std::string> stuck = late ? std::vector<std::string>(here.begin(), here.end()) : std::vector<std::string>{};
  const std::vector<std::string> removed_list(removed.begin(), removed.end());
  if (removed_list != loan->status.removed_pods || stuck != loan->status.stuck_pods) {
    const size_t newly_removed = removed_list.size() - loan->status.removed_pods.size();
    RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
      ASSIGN_OR_RETURN(std::optional<model::Loan> l, store::GetObject<model::Loan>(tx, "", name));
      if (!l) return absl::OkStatus();
      l->status.removed_pods = removed_list;
      l->status.stuck_pods = stuck;
      return store::UpdateObject(tx, *l);
    }));
    std::lock_guard<std::mutex> lock(mu_);
    stats_.removed += static_cast<int64_t>(newly_removed);
    if (!stuck.empty() && loan->status.stuck_pods.empty()) {
      ++stats_.stuck;
      std::string names;
      for (const std::string& p : stuck) names += (names.empty() ? "" : ", ") + p;
      log::Warn("loan {}: {} pod(s) of {} still on the devices {} s after the loan ended ({}): {}", name, stuck.size(),
                loan->spec.borrower, std::chrono::duration_cast<std::chrono::seconds>(now - end).count(),
                loan->spec.end_reason, names);
    } else if (stuck.empty() && !loan->status.stuck_pods.empty()) {
      log::Info("loan {}: the stuck pods of {} are gone", name, loan->spec.borrower);
    }
  }
  if (!first_error.ok()) return first_error;
  if (here.empty()) return runtime::Result::Done();
  if (!late) return runtime::Result::After(std::min(kRecheck, end + stuck_after_ - now));
  return runtime::Result::After(std::min(kRecheckStuck, stuck_after_));
}

LoanPodStats LoanPodController::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace gpuaas::controller
