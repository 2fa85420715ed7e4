#include "controller/runtime/leader_election.h"

#include <unistd.h>

#include <random>

#include "common/log.h"
#include "common/metrics_text.h"
#include "fmt/format.h"

namespace gpuaas::controller::runtime {

absl::Status LeaderElectionOptions::Validate() const {
  if (identity.empty()) return absl::InvalidArgumentError("leader election: the replica's identity is empty");
  if (retry_period.count() <= 0 || renew_deadline.count() * 10 <= retry_period.count() * 12 ||
      lease_duration <= renew_deadline) {
    return absl::InvalidArgumentError(fmt::format(
        "leader election: the lease duration ({} ms) must exceed the renew deadline ({} ms), which must exceed 1.2 "
        "times the retry period ({} ms)",
        lease_duration.count(), renew_deadline.count(), retry_period.count()));
  }
  return absl::OkStatus();
}

std::string UniqueIdentity(std::string_view name) {
  char host[256] = {};
  if (name.empty() && (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')) {
    std::snprintf(host, sizeof(host), "gpuaas");
  }
  std::random_device rd;
  return fmt::format("{}_{:08x}", name.empty() ? std::string_view(host) : name, rd());
}

LeaderElector::LeaderElector(store::Store& store, LeaderElectionOptions options, std::function<void()> on_started,
                             std::function<void()> on_stopped)
    : store_(store),
      options_(std::move(options)),
      on_started_(std::move(on_started)),
      on_stopped_(std::move(on_stopped)) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  if (loop_.joinable()) return;
  loop_ = std::thread([this] { Loop(); });
}

void LeaderElector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_.exchange(true)) return;
  }
  wake_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (leading_.load()) {
    StopLeading("this replica is stopping", /*graceful=*/true);
    if (absl::Status s = store_.ReleaseLease(options_.lease, options_.identity); !s.ok()) {
      log::Warn("leader election: lease {} not released ({}); another replica takes over when it expires",
                options_.lease, std::string(s.message()));
    } else {
      log::Info("leader election: lease {} released", options_.lease);
    }
  }
  if (term_.joinable()) term_.join();
}

std::optional<store::FenceToken> LeaderElector::token() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!leading_.load() || std::chrono::steady_clock::now() - renewed_ > options_.renew_deadline) return std::nullopt;
  return store::FenceToken{options_.lease, options_.identity, epoch_};
}

store::Lease LeaderElector::observed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_;
}

std::chrono::milliseconds LeaderElector::Jittered() const {
  thread_local std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(1.0, 1.2);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(options_.retry_period.count()) * jitter(rng)));
}

void LeaderElector::StopLeading(std::string_view why, bool graceful) {
  leading_ = false;
  if (graceful) {
    log::Info("leader election: {} stops leading ({})", options_.identity, why);
  } else {
    log::Warn("leader election: {} stopped leading ({})", options_.identity, why);
  }
  if (term_.joinable()) term_.join();  // the term's start has finished before it is stopped
  if (on_stopped_) on_stopped_();
}

void LeaderElector::Loop() {
  std::string last_holder;
  while (!stop_.load()) {
    const auto attempt = std::chrono::steady_clock::now();
    absl::StatusOr<store::Lease> got =
        store_.TryAcquireLease(options_.lease, options_.identity, options_.address, options_.lease_duration);
    if (stop_.load()) break;
    if (got.ok()) {
      const bool mine = got->holder == options_.identity;
      enum { kKept, kStarted, kLost } what = kKept;
      {
        std::lock_guard<std::mutex> lock(mu_);
        observed_ = *got;
        if (mine && !leading_.load()) {
          epoch_ = got->epoch;
          renewed_ = attempt;
          leading_ = true;
          what = kStarted;
        } else if (mine && got->epoch == epoch_) {
          renewed_ = attempt;
        } else if (leading_.load()) {
          what = kLost;  // another holds it, or it was granted again in between
        }
      }
      if (what == kLost) {
        StopLeading(fmt::format("lease {} is held by {} in epoch {}", options_.lease,
                                got->holder.empty() ? "nobody" : got->holder, got->epoch));
        continue;  // a candidate again, at once
      }
      if (what == kStarted) {
        log::Info("leader election: {} leads (lease {}, epoch {})", options_.identity, options_.lease, got->epoch);
        if (term_.joinable()) term_.join();
        if (on_started_) term_ = std::thread(on_started_);
      } else if (!mine && got->holder != last_holder) {
        log::Info("leader election: the leader is {} (epoch {}{})", got->holder.empty() ? "nobody" : got->holder,
                  got->epoch, got->address.empty() ? "" : ", at " + got->address);
      }
      last_holder = got->holder;
    } else if (leading_.load()) {
      std::chrono::steady_clock::time_point renewed;
      {
        std::lock_guard<std::mutex> lock(mu_);
        renewed = renewed_;
      }
      if (std::chrono::steady_clock::now() - renewed > options_.renew_deadline) {
        StopLeading(fmt::format("no renewal for {} ms: {}", options_.renew_deadline.count(), std::string(got.status().message())));
      } else {
        log::Warn("leader election: renewal failed, retrying: {}", std::string(got.status().message()));
      }
    } else {
      log::Debug("leader election: lease {} not read: {}", options_.lease, std::string(got.status().message()));
    }
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, Jittered(), [&] { return stop_.load(); });
  }
}

void LeaderElector::AppendMetrics(std::string& out) const {
  const store::Lease seen = observed();
  MetricsText w(out);
  w.Family("gpuaas_leader_election_master_status", "gauge",
           "1 while this replica leads (runs the controllers), 0 otherwise.");
  w.Sample("gpuaas_leader_election_master_status", {{"name", options_.lease}}, leading() ? 1 : 0);
  w.Family("gpuaas_leader_election_epoch", "gauge",
           "The epoch of the lease as this replica last read it (grows with every grant).");
  w.Sample("gpuaas_leader_election_epoch", {{"name", options_.lease}}, seen.epoch);
}

}  // namespace gpuaas::controller::runtime
