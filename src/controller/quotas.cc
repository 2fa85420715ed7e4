#include "controller/quotas.h"

#include <set>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "fmt/format.h"

namespace gpuaas::controller {

QuotaController::QuotaController(runtime::Manager& manager, cluster::Registry& registry)
    : registry_(registry),
      clock_(manager.clock()),
      pools_(manager.informers().For<model::GpuPool>()),
      loans_(manager.informers().For<model::Loan>()) {
  pools_.AddIndex("project", [](const model::GpuPool& p) { return std::vector<std::string>{p.metadata.ns}; });
  // Open loans, by both their projects: a loan moves its devices from the lender to the borrower.
  loans_.AddIndex(std::string(kOpenLoansByProject), [](const model::Loan& l) {
    return l.spec.end ? std::vector<std::string>{} : std::vector<std::string>{l.spec.borrower, l.spec.lender};
  });
  runtime::WorkQueue& q = manager.Add("quotas", *this);
  pools_.OnChange([&q](const model::GpuPool* before, const model::GpuPool* after) {
    q.Add((after ? after : before)->metadata.ns);
  });
  loans_.OnChange([&q](const model::Loan* before, const model::Loan* after) {
    const model::Loan& l = after ? *after : *before;
    q.Add(l.spec.borrower);
    q.Add(l.spec.lender);
  });
  subscription_ = registry_.Subscribe([this, &q](const std::string& name, cluster::ClusterDriver* added) {
    if (added == nullptr) {
      // A cluster no longer managed holds nobody to anything; one added again starts afresh.
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [project, by_cluster] : enforced_) by_cluster.erase(name);
      for (auto& [project, by_cluster] : devices_enforced_) by_cluster.erase(name);
      return;
    }
    for (const std::string& project : pools_.IndexValues("project")) q.Add(project);
    for (const std::string& project : loans_.IndexValues(std::string(kOpenLoansByProject))) q.Add(project);
  });
}

absl::StatusOr<runtime::Result> QuotaController::Reconcile(const std::string& project) {
  std::vector<model::GpuPool> pools;
  for (const auto& p : pools_.ByIndex("project", project)) pools.push_back(*p);
  std::vector<model::Loan> loans;
  for (const auto& l : loans_.ByIndex(std::string(kOpenLoansByProject), project)) loans.push_back(*l);
  std::vector<std::shared_ptr<const model::GpuPool>> keep;  // the lenders' pools, while they are read
  const Time now = clock_.Now();
  pools = model::PoolsWithLoans(
      project, std::move(pools), loans,
      [&](std::string_view ns, std::string_view name) {
        keep.push_back(pools_.Get(ns, name));
        return keep.back().get();
      },
      now);
  // A reservation's devices become its project's at its start (the pool controller then writes
  // Ready, which queues the project again).
  const std::map<std::string, std::map<std::string, int64_t>> want = model::DevicesByCluster(pools);
  std::map<std::string, std::set<std::string>> uuids;  // cluster -> the devices the pools hold there
  for (const model::GpuPool& p : pools) {
    if (!model::PoolIsLive(p)) continue;
    for (const model::AllocatedDevice& d : p.status.allocation) {
      if (const std::string& uuid = model::DeviceUuid(d); !uuid.empty()) uuids[d.cluster].insert(uuid);
    }
  }
  absl::Status first_error;
  for (const auto& [cluster, driver] : registry_.All()) {
    const std::set<std::string>& mine = uuids[cluster];
    bool told;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& done = devices_enforced_[project];
      auto d = done.find(cluster);
      told = d != done.end() ? d->second == mine : mine.empty();
    }
    if (!told) {
      if (absl::Status s = driver->EnforceProjectDevices(project, mine); !s.ok()) {
        log::Warn("project {}: devices on cluster {} not fenced: {}", project, cluster, s.ToString());
        if (first_error.ok()) first_error = s;
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        devices_enforced_[project][cluster] = mine;
      }
    }
    auto w = want.find(cluster);
    const std::map<std::string, int64_t> devices = w == want.end() ? std::map<std::string, int64_t>{} : w->second;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& done = enforced_[project];
      auto d = done.find(cluster);
      // Nothing held now and nothing enforced before: nothing to tell this cluster.
      if (devices.empty() && d == done.end()) continue;
      if (d != done.end() && d->second == devices) continue;
    }
    absl::Status s = driver->EnforceProjectQuota(project, devices);
    if (!s.ok()) {
      log::Warn("project {}: quota on cluster {} not enforced: {}", project, cluster, s.ToString());
      if (first_error.ok()) first_error = s;
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    enforced_[project][cluster] = devices;
  }
  if (!first_error.ok()) return first_error;  // requeued with backoff
  return runtime::Result::Done();
}

std::map<std::string, std::map<std::string, int64_t>> QuotaController::enforced(const std::string& project) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = enforced_.find(project);
  return it == enforced_.end() ? std::map<std::string, std::map<std::string, int64_t>>{} : it->second;
}

}  // namespace gpuaas::controller
