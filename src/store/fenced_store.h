// FencedStore: the store as the elected controller manager writes to it. Every write transaction
// first checks, inside the same transaction, that this replica still holds the leader lease in
// the epoch it was granted (Txn::CheckLease): a deposed leader's late write (a process paused
// past its lease, a partition) is refused whole, and nothing of it lands. Reads, the change feed
// and rollups (history, not state) pass through (store/forwarding_store.h). Thread-safe.
#ifndef GPUAAS_STORE_FENCED_STORE_H_
#define GPUAAS_STORE_FENCED_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "store/forwarding_store.h"
#include "store/store.h"

namespace gpuaas::store {

// Who may write: the lease, its holder and the epoch of the grant.
struct FenceToken {
  std::string lease;
  std::string holder;
  int64_t epoch = 0;
};

class FencedStore final : public ForwardingStore {
 public:
  // `token` says whom this replica writes as now; nullopt when it holds no lease (every write
  // is then refused without reaching the database). `inner` is not owned.
  FencedStore(Store& inner, std::function<std::optional<FenceToken>()> token)
      : ForwardingStore(inner), token_(std::move(token)) {}

  // FailedPrecondition ("fenced: ...") when the lease is not held as the token says; then
  // nothing of `fn` commits.
  absl::Status Transact(const std::function<absl::Status(Txn&)>& fn) override;
  // Write transactions refused by the fence so far.
  uint64_t refused() const { return refused_.load(); }

 private:
  const std::function<std::optional<FenceToken>()> token_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_FENCED_STORE_H_
