// What every backend of the store answers alike (private to src/store/).
#ifndef GPUAAS_STORE_INTERNAL_ERRORS_H_
#define GPUAAS_STORE_INTERNAL_ERRORS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "store/store.h"

namespace gpuaas::store::internal {

// A write at resourceVersion `expected` of a record stored at `actual`: Aborted (read again, retry).
absl::Status Conflict(const Key& key, int64_t expected, int64_t actual);

// Changes after `after` asked of a feed compacted through `compacted`: OutOfRange (list afresh).
absl::Status Compacted(int64_t after, int64_t compacted);

// A fenced write (Txn::CheckLease) by `holder` in `epoch` of lease `name`, now held by
// `actual_holder` in `actual_epoch` (or expired): FailedPrecondition.
absl::Status Fenced(std::string_view name, std::string_view holder, int64_t epoch, std::string_view actual_holder,
                    int64_t actual_epoch);

}  // namespace gpuaas::store::internal

#endif  // GPUAAS_STORE_INTERNAL_ERRORS_H_
