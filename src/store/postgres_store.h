// The PostgreSQL backend of Store: the production store, one database shared by every gpuaas
// replica. It keeps the Store contract (store.h) across processes:
//
// - Revisions grow in commit order with no gaps: every read-write transaction first locks the
//   one row that holds the store's revision (SELECT ... FOR UPDATE), so write transactions run
//   one at a time in the database, and the next one takes its revision only after this one has
//   committed. A reader of the change feed therefore never sees revision N+1 before N (the "gap"
//   that kine fills with placeholder rows cannot happen).
// - A resourceVersion conflict is Aborted, a compacted feed OutOfRange, a lost or read-only
//   connection (a database failover) Unavailable: retry.
// - WaitForChange works across processes: each commit NOTIFYs its revision, and a listener
//   connection wakes waiters; it also reads the revision once a second, so a lost notification
//   delays a waiter by at most that (the table is the truth, NOTIFY only a wake-up).
// - Migrations run at open, forward only, one transaction each, under an advisory lock (two
//   replicas starting together migrate once); a database newer than this binary is refused.
//
// The connection string is libpq's: a URI (postgresql://USER@HOST:PORT/DB?sslmode=verify-full)
// or key=value pairs, with several hosts and target_session_attrs=read-write so that a failover
// of the database (Patroni) needs no proxy. TLS is libpq's (sslmode, sslrootcert, ...).
#ifndef GPUAAS_STORE_POSTGRES_STORE_H_
#define GPUAAS_STORE_POSTGRES_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "store/store.h"

namespace gpuaas::store {

struct PostgresOptions {
  std::string conninfo;                // libpq connection string or URI
  int64_t change_retention = 100000;   // revisions of change feed kept before compaction
  int max_connections = 8;             // the pool's size (each Transact holds one)
};

// The current schema version; OpenPostgresStore migrates older databases up to it.
inline constexpr int kPostgresSchemaVersion = 2;

// Connects, migrates and starts the listener. Unavailable when the database cannot be reached;
// FailedPrecondition when its schema is newer than this binary's.
absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const PostgresOptions& options);

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_POSTGRES_STORE_H_
