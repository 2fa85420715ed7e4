#include "store/dry_run_store.h"

namespace gpuaas::store {

absl::Status DryRunStore::Transact(const std::function<absl::Status(Txn&)>& fn) {
  bool done = false;  // fn succeeded, and the error below only rolls it back
  absl::Status s = inner_.Transact([&](Txn& tx) -> absl::Status {
    done = false;
    if (absl::Status out = fn(tx); !out.ok()) return out;
    done = true;
    return absl::CancelledError("dry run: rolled back");
  });
  return done && absl::IsCancelled(s) ? absl::OkStatus() : s;
}

}  // namespace gpuaas::store
