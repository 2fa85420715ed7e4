// The clusters gpuaas manages now, by name: a live set of drivers that the controllers consult at
// each reconcile. Clusters given when the server starts (simulated, --kubernetes) are fixed;
// clusters registered through the API (`gpuaas cluster add`) come and go while it runs.
// Controllers subscribe to learn of each cluster added or removed.
#ifndef GPUAAS_CLUSTER_REGISTRY_H_
#define GPUAAS_CLUSTER_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "cluster/driver.h"

namespace gpuaas::cluster {

enum class Source {
  kFixed,       // given at start; stays until the server stops
  kRegistered,  // registered through the API; can be removed
};

class Registry {
 public:
  Registry() = default;
  // `fixed` by cluster name, not owned (they must outlive the registry).
  explicit Registry(const std::map<std::string, ClusterDriver*>& fixed);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // AlreadyExists when a cluster of that name is managed.
  absl::Status Add(std::shared_ptr<ClusterDriver> driver, Source source);
  // Takes a registered cluster out and returns its driver (for the caller to stop); null when
  // there is none of that name. FailedPrecondition for a fixed cluster.
  absl::Status Remove(std::string_view name, std::shared_ptr<ClusterDriver>* removed = nullptr);

  // The driver of `name`, kept alive while the caller holds it; null when not managed.
  std::shared_ptr<ClusterDriver> Get(std::string_view name) const;
  std::optional<Source> SourceOf(std::string_view name) const;
  std::vector<std::pair<std::string, std::shared_ptr<ClusterDriver>>> All() const;
  std::vector<std::string> Names() const;
  size_t size() const;

  // `added` is the new driver, or null when `name` was removed. Called once for every cluster
  // managed when subscribing, then for each change, one at a time and in the order they happened.
  // It must be quick and must not change the registry.
  using Listener = std::function<void(const std::string& name, ClusterDriver* added)>;
  // Unsubscribes when destroyed (after which its listener is not called again): a controller
  // keeps it as its last member, so a control plane can come and go on one registry.
  class Subscription {
   public:
    Subscription() = default;
    Subscription(Registry* registry, int id) : registry_(registry), id_(id) {}
    Subscription(Subscription&& o) noexcept : registry_(std::exchange(o.registry_, nullptr)), id_(o.id_) {}
    Subscription& operator=(Subscription&& o) noexcept {
      if (this != &o) {
        Reset();
        registry_ = std::exchange(o.registry_, nullptr);
        id_ = o.id_;
      }
      return *this;
    }
    ~Subscription() { Reset(); }
    void Reset() {
      if (registry_ != nullptr) registry_->Unsubscribe(id_);
      registry_ = nullptr;
    }

   private:
    Registry* registry_ = nullptr;
    int id_ = 0;
  };
  [[nodiscard]] Subscription Subscribe(Listener listener);

 private:
  struct Entry {
    std::shared_ptr<ClusterDriver> driver;
    Source source;
  };
  std::mutex change_mu_;  // orders changes and their notifications; taken before mu_
  void Unsubscribe(int id);
  std::map<int, Listener> listeners_ ABSL_GUARDED_BY(change_mu_);
  int next_listener_ ABSL_GUARDED_BY(change_mu_) = 0;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> clusters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuaas::cluster

#endif  // GPUAAS_CLUSTER_REGISTRY_H_
