// The SQLite backend of Store: one database file in WAL mode, synchronous=FULL, so that a commit
// survives a crash of the process (and of the machine) once Transact returns. Schema migrations
// run at open, in order, each in its own transaction, and upgrade an older file in place.
// One process at a time: leases (Store::TryAcquireLease) live in its memory.
#ifndef GPUAAS_STORE_SQLITE_STORE_H_
#define GPUAAS_STORE_SQLITE_STORE_H_

#include <memory>
#include <string>

#include "store/store.h"

namespace gpuaas::store {

struct SqliteOptions {
  std::string path;               // file path or ":memory:"
  int64_t change_retention = 100000;  // revisions of change feed kept before compaction
};

// The current schema version; OpenSqliteStore migrates older files up to it.
inline constexpr int kSqliteSchemaVersion = 4;

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options);

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_SQLITE_STORE_H_
