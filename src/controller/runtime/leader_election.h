// Leader election among gpuaas replicas, as client-go's leaderelection does for Kubernetes
// controllers, on a lease row in the shared store (Store::TryAcquireLease) timed by the
// database's clock. Exactly one replica runs the controller manager, the cluster drivers and
// metering; the others serve the API and stand by.
//
// A candidate tries to take the lease every `retry_period` (jittered by up to 20%). The leader
// renews it as often; when a renewal has not succeeded for `renew_deadline`, or the lease is
// found held by another, it stops leading at once: `on_stopped` runs, and the fence token is
// withdrawn. The lease itself outlives the deadline by lease_duration - renew_deadline (5 s by
// default), the margin in which a deposed leader stops before anyone may take over. Its late
// writes are refused besides by the fence (store/fenced_store.h): every controller write checks
// the epoch of the grant in its own transaction.
//
// A graceful Stop runs `on_stopped`, then releases the lease, so another replica takes over
// within one retry period rather than a lease duration.
#ifndef GPUAAS_CONTROLLER_RUNTIME_LEADER_ELECTION_H_
#define GPUAAS_CONTROLLER_RUNTIME_LEADER_ELECTION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "store/fenced_store.h"
#include "store/store.h"

namespace gpuaas::controller::runtime {

struct LeaderElectionOptions {
  std::string lease = "gpuaas-controller-manager";
  std::string identity;  // unique per process (host name and a random suffix)
  std::string address;   // this replica's API URL, for the others (forwarded telemetry)
  // client-go's defaults for core components.
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  // InvalidArgument unless lease_duration > renew_deadline > 1.2 x retry_period > 0 and the
  // identity is set.
  absl::Status Validate() const;
};

// "NAME_XXXXXXXX": `name` (the host name when empty) and 8 random hex digits, as
// kube-controller-manager names its holders: two processes never share an identity, so a
// restarted replica is a new holder in a new epoch.
std::string UniqueIdentity(std::string_view name = "");

class LeaderElector {
 public:
  // `on_started` runs on a thread of its own when this replica becomes the leader (it may take
  // long: renewals go on meanwhile); `on_stopped` when it stops leading, after `on_started` has
  // returned. Both may run several times in a process's life. `store` is not owned.
  LeaderElector(store::Store& store, LeaderElectionOptions options, std::function<void()> on_started,
                std::function<void()> on_stopped);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Where this replica serves, when known only once its API listens (port 0); before Start.
  void SetAddress(std::string address) { options_.address = std::move(address); }
  void Start();
  // Stops campaigning; a leader stops leading (on_stopped) and releases the lease. Idempotent.
  void Stop();

  bool leading() const { return leading_.load(); }
  // Whom this replica writes as while it leads (and its last renewal is within the renew
  // deadline); nullopt otherwise. For store::FencedStore.
  std::optional<store::FenceToken> token() const;
  // The lease as last read: the current leader and where it serves.
  store::Lease observed() const;
  const LeaderElectionOptions& options() const { return options_; }

  // gpuaas_leader_election_master_status (1 on the leader, 0 elsewhere), as client-go's
  // leader_election_master_status, and the epochs seen, in Prometheus text.
  void AppendMetrics(std::string& out) const;

 private:
  void Loop();
  void StopLeading(std::string_view why, bool graceful = false);
  std::chrono::milliseconds Jittered() const;

  store::Store& store_;
  LeaderElectionOptions options_;  // fixed once started
  const std::function<void()> on_started_;
  const std::function<void()> on_stopped_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point renewed_ ABSL_GUARDED_BY(mu_);
  store::Lease observed_ ABSL_GUARDED_BY(mu_);
  std::thread loop_;
  std::thread term_;  // runs on_started_; joined before on_stopped_
};

}  // namespace gpuaas::controller::runtime

#endif  // GPUAAS_CONTROLLER_RUNTIME_LEADER_ELECTION_H_
