// DryRunStore: the store as a dry run (`?dryRun=All`) writes to it. Every write transaction runs
// whole, with each check, conflict and audit event it would have, and is then rolled back: the
// caller hears what the write would answer, and nothing is stored. Reads pass through
// (store/forwarding_store.h). Thread-safe.
#ifndef GPUAAS_STORE_DRY_RUN_STORE_H_
#define GPUAAS_STORE_DRY_RUN_STORE_H_

#include <functional>

#include "store/forwarding_store.h"
#include "store/store.h"

namespace gpuaas::store {

class DryRunStore final : public ForwardingStore {
 public:
  // `inner` is not owned.
  explicit DryRunStore(Store& inner) : ForwardingStore(inner) {}

  // `fn`'s outcome; what it wrote is rolled back either way.
  absl::Status Transact(const std::function<absl::Status(Txn&)>& fn) override;
};

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_DRY_RUN_STORE_H_
