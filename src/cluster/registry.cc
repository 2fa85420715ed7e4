#include "cluster/registry.h"

#include "fmt/format.h"

namespace gpuaas::cluster {

Registry::Registry(const std::map<std::string, ClusterDriver*>& fixed) {
  for (const auto& [name, driver] : fixed) {
    // Borrowed: the caller owns fixed drivers.
    clusters_[name] = Entry{std::shared_ptr<ClusterDriver>(driver, [](ClusterDriver*) {}), Source::kFixed};
  }
}

absl::Status Registry::Add(std::shared_ptr<ClusterDriver> driver, Source source) {
  std::lock_guard<std::mutex> change(change_mu_);
  const std::string name(driver->ClusterName());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (clusters_.contains(name)) {
      return absl::AlreadyExistsError(fmt::format("cluster \"{}\" is already managed", name));
    }
    clusters_[name] = Entry{driver, source};
  }
  for (const auto& [id, l] : listeners_) l(name, driver.get());
  return absl::OkStatus();
}

absl::Status Registry::Remove(std::string_view name, std::shared_ptr<ClusterDriver>* removed) {
  std::lock_guard<std::mutex> change(change_mu_);
  std::shared_ptr<ClusterDriver> driver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = clusters_.find(name);
    if (it == clusters_.end()) return absl::OkStatus();
    if (it->second.source == Source::kFixed) {
      return absl::FailedPreconditionError(
          fmt::format("cluster \"{}\" was given when the server started; restart the server without it", name));
    }
    driver = std::move(it->second.driver);
    clusters_.erase(it);
  }
  for (const auto& [id, l] : listeners_) l(std::string(name), nullptr);
  if (removed != nullptr) *removed = std::move(driver);
  return absl::OkStatus();
}

std::shared_ptr<ClusterDriver> Registry::Get(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clusters_.find(name);
  return it == clusters_.end() ? nullptr : it->second.driver;
}

std::optional<Source> Registry::SourceOf(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clusters_.find(name);
  if (it == clusters_.end()) return std::nullopt;
  return it->second.source;
}

std::vector<std::pair<std::string, std::shared_ptr<ClusterDriver>>> Registry::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::shared_ptr<ClusterDriver>>> out;
  out.reserve(clusters_.size());
  for (const auto& [name, e] : clusters_) out.emplace_back(name, e.driver);
  return out;
}

std::vector<std::string> Registry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, e] : clusters_) out.push_back(name);
  return out;
}

size_t Registry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return clusters_.size();
}

Registry::Subscription Registry::Subscribe(Listener listener) {
  std::lock_guard<std::mutex> change(change_mu_);
  for (const auto& [name, driver] : All()) listener(name, driver.get());
  const int id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return Subscription(this, id);
}

void Registry::Unsubscribe(int id) {
  std::lock_guard<std::mutex> change(change_mu_);
  listeners_.erase(id);
}

}  // namespace gpuaas::cluster
