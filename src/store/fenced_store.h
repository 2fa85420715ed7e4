// FencedStore: the store as the elected controller manager writes to it. Every write transaction
// first checks, inside the same transaction, that this replica still holds the leader lease in
// the epoch it was granted (Txn::CheckLease): a deposed leader's late write (a process paused
// past its lease, a partition) is refused whole, and nothing of it lands. Reads, the change feed
// and rollups (history, not state) pass through. Thread-safe.
#ifndef GPUAAS_STORE_FENCED_STORE_H_
#define GPUAAS_STORE_FENCED_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "store/store.h"

namespace gpuaas::store {

// Who may write: the lease, its holder and the epoch of the grant.
struct FenceToken {
  std::string lease;
  std::string holder;
  int64_t epoch = 0;
};

class FencedStore final : public Store {
 public:
  // `token` says whom this replica writes as now; nullopt when it holds no lease (every write
  // is then refused without reaching the database). `inner` is not owned.
  FencedStore(Store& inner, std::function<std::optional<FenceToken>()> token)
      : inner_(inner), token_(std::move(token)) {}

  // FailedPrecondition ("fenced: ...") when the lease is not held as the token says; then
  // nothing of `fn` commits.
  absl::Status Transact(const std::function<absl::Status(Txn&)>& fn) override;
  // Write transactions refused by the fence so far.
  uint64_t refused() const { return refused_.load(); }

  absl::StatusOr<std::optional<Record>> Get(const Key& key) override { return inner_.Get(key); }
  absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) override {
    return inner_.List(kind, ns);
  }
  absl::StatusOr<std::vector<Record>> ListPage(std::string_view kind, std::string_view ns, std::string_view after_name,
                                               size_t limit) override {
    return inner_.ListPage(kind, ns, after_name, limit);
  }
  int64_t Revision() override { return inner_.Revision(); }
  absl::StatusOr<std::vector<Change>> Changes(int64_t after, size_t limit) override { return inner_.Changes(after, limit); }
  bool WaitForChange(int64_t after, std::chrono::milliseconds timeout) override {
    return inner_.WaitForChange(after, timeout);
  }
  int SchemaVersion() override { return inner_.SchemaVersion(); }
  absl::Status AppendRollups(const std::vector<RollupRecord>& rows) override { return inner_.AppendRollups(rows); }
  absl::StatusOr<std::vector<RollupRecord>> LoadRollups(int64_t since_unix_s) override {
    return inner_.LoadRollups(since_unix_s);
  }
  absl::Status PruneRollups(int32_t step_s, int64_t before_unix_s) override {
    return inner_.PruneRollups(step_s, before_unix_s);
  }
  absl::StatusOr<Lease> TryAcquireLease(std::string_view name, std::string_view holder, std::string_view address,
                                        std::chrono::milliseconds duration) override {
    return inner_.TryAcquireLease(name, holder, address, duration);
  }
  absl::Status ReleaseLease(std::string_view name, std::string_view holder) override {
    return inner_.ReleaseLease(name, holder);
  }
  absl::StatusOr<Lease> GetLease(std::string_view name) override { return inner_.GetLease(name); }
  absl::StatusOr<Snapshot> ReadSnapshot() override { return inner_.ReadSnapshot(); }
  absl::Status LoadSnapshot(const Snapshot& snapshot) override { return inner_.LoadSnapshot(snapshot); }

 private:
  Store& inner_;
  const std::function<std::optional<FenceToken>()> token_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_FENCED_STORE_H_
