#include "controller/clusters.h"

#include "common/log.h"
#include "common/status.h"

namespace gpuaas::controller {

ClusterConnectionController::ClusterConnectionController(runtime::Manager& manager, cluster::Registry& registry,
                                                         ClusterConnector connect)
    : registry_(registry),
      connect_(std::move(connect)),
      registrations_(manager.informers().For<model::ClusterRegistration>()) {
  runtime::WorkQueue& q = manager.Add("clusters", *this);
  registrations_.OnChange([&q](const model::ClusterRegistration* before, const model::ClusterRegistration* after) {
    q.Add((after ? after : before)->metadata.name);
  });
}

absl::StatusOr<runtime::Result> ClusterConnectionController::Reconcile(const std::string& name) {
  const std::shared_ptr<const model::ClusterRegistration> reg = registrations_.Get("", name);
  std::string uid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = connected_.find(name); it != connected_.end()) uid = it->second;
  }
  // Gone, or registered anew under the same name: the old driver goes.
  if (!uid.empty() && (!reg || reg->metadata.uid != uid)) {
    std::shared_ptr<cluster::ClusterDriver> removed;
    if (absl::Status s = registry_.Remove(name, &removed); !s.ok()) return s;
    if (removed) removed->Stop();
    std::lock_guard<std::mutex> lock(mu_);
    connected_.erase(name);
    log::Info("cluster {}: unregistered, no longer managed", name);
  }
  if (!reg) return runtime::Result::Done();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connected_.contains(name)) return runtime::Result::Done();
  }
  if (!connect_) {
    log::Warn("cluster {}: registered, but this server cannot connect {} clusters", name, reg->spec.driver);
    return runtime::Result::Done();
  }
  if (registry_.SourceOf(name) == cluster::Source::kFixed) {
    log::Warn("cluster {}: registered, but a cluster of that name was given at start; the registration waits", name);
    return runtime::Result::Done();
  }
  absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>> driver = connect_(*reg);
  if (!driver.ok()) {
    log::Warn("cluster {}: cannot connect: {}", name, driver.status().message());
    return driver.status();  // retried with backoff
  }
  RETURN_IF_ERROR(registry_.Add(*driver, cluster::Source::kRegistered));
  (*driver)->Start();
  std::lock_guard<std::mutex> lock(mu_);
  connected_[name] = reg->metadata.uid;
  log::Info("cluster {}: registered by {}, connected", name, reg->spec.registered_by);
  return runtime::Result::Done();
}

void ClusterConnectionController::StopAll() {
  std::map<std::string, std::string> connected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connected = connected_;
  }
  for (const auto& [name, uid] : connected) {
    if (std::shared_ptr<cluster::ClusterDriver> d = registry_.Get(name)) d->Stop();
  }
}

}  // namespace gpuaas::controller
