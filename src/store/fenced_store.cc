#include "store/fenced_store.h"

#include "common/log.h"
#include "fmt/format.h"

namespace gpuaas::store {

absl::Status FencedStore::Transact(const std::function<absl::Status(Txn&)>& fn) {
  const std::optional<FenceToken> token = token_();
  if (!token) {
    const uint64_t n = ++refused_;
    log::Warn("fenced write refused ({} so far): this replica holds no leader lease", n);
    return absl::FailedPreconditionError("fenced: this replica holds no leader lease; its write is refused");
  }
  bool fenced = false;
  absl::Status s = inner_.Transact([&](Txn& tx) {
    if (absl::Status held = tx.CheckLease(token->lease, token->holder, token->epoch); !held.ok()) {
      fenced = held.code() == absl::StatusCode::kFailedPrecondition;
      return held;
    }
    return fn(tx);
  });
  if (fenced) {
    const uint64_t n = ++refused_;
    log::Warn("fenced write refused ({} so far): {}", n, std::string(s.message()));
  }
  return s;
}

}  // namespace gpuaas::store
