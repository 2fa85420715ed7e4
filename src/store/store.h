// The Store: gpuaas's one source of truth. Records are JSON documents keyed by (kind, namespace,
// name), versioned by a store-wide revision that grows with every committed write transaction
// (like etcd's): all writes of one transaction share that transaction's revision, and a record's
// resourceVersion is the revision of its last write. A change feed lists every write in revision
// order for watchers. Layer 4 of docs/architecture.md; backends are chosen by OpenStore().
//
// All methods are thread-safe.
#ifndef GPUAAS_STORE_STORE_H_
#define GPUAAS_STORE_STORE_H_

#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuaas::store {

struct Key {
  std::string kind;
  std::string ns;  // empty for cluster-scoped kinds
  std::string name;
  friend auto operator<=>(const Key&, const Key&) = default;
  std::string ToString() const;
};

struct Record {
  Key key;
  std::string uid;
  int64_t resource_version = 0;
  std::string data;  // the object's JSON
};

enum class ChangeType { kAdded, kModified, kDeleted };

struct Change {
  int64_t revision = 0;
  ChangeType type = ChangeType::kAdded;
  Record record;  // for kDeleted: the record as it was, with resource_version = revision
};

// Special values of `expected_rv` for Txn::Put.
inline constexpr int64_t kMustNotExist = 0;  // create: AlreadyExists if present
inline constexpr int64_t kAnyVersion = -1;   // unconditional upsert

// A read-write transaction. Valid only inside the Store::Transact callback that received it.
class Txn {
 public:
  virtual ~Txn() = default;
  // The revision this transaction's writes will carry if it commits.
  virtual int64_t revision() const = 0;
  virtual absl::StatusOr<std::optional<Record>> Get(const Key& key) = 0;
  // Records of `kind` in `ns` (all namespaces when empty), sorted by (namespace, name).
  virtual absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) = 0;
  // Writes a record. `expected_rv` > 0 must equal the stored resourceVersion, else Aborted
  // (a conflict: re-read and retry); NotFound when updating a missing record.
  virtual absl::Status Put(const Key& key, std::string_view uid, std::string_view data,
                           int64_t expected_rv) = 0;
  // Deletes a record; `expected_rv` as for Put (kAnyVersion skips the check). NotFound if absent.
  virtual absl::Status Delete(const Key& key, int64_t expected_rv) = 0;
  // The keys of `kind` written (created, updated or deleted) by transactions committed after
  // revision `after`, each once, in no particular order. A decision taken on a cached view at
  // revision R checks these before it commits (optimistic concurrency over a whole kind).
  // OutOfRange when the change feed after `after` was compacted away.
  virtual absl::StatusOr<std::vector<Key>> ChangedKeys(std::string_view kind, int64_t after) = 0;
  // Fencing: OK while lease `name` is held, unexpired, by `holder` in `epoch`; FailedPrecondition
  // (nothing of this transaction may commit) otherwise. The check holds the lease row until the
  // transaction ends, so a takeover waits for a write that already passed it.
  virtual absl::Status CheckLease(std::string_view name, std::string_view holder, int64_t epoch) = 0;
};

// A lease (leader election): at most one holder at a time, until its expiry by the store's
// clock (the database's, never a replica's). `epoch` grows by one with every grant to a new
// holder, and is the fencing token of that holder's writes (Txn::CheckLease).
struct Lease {
  std::string name;
  std::string holder;   // empty: free (never held, or released)
  std::string address;  // where the holder serves (its API URL), for the other replicas
  int64_t epoch = 0;
  std::chrono::milliseconds remaining{0};  // until it expires; 0 when it has
};

// A closed telemetry rollup bucket (telemetry/series.h): the mean and max of one series over
// one minute or one hour. Kept beside the objects, outside revisions and the change feed: they
// are history, not state, and arrive by the thousand a minute.
struct RollupRecord {
  std::string series;  // "<device>|<field>"
  int32_t step_s = 60;
  int64_t bucket = 0;  // unix seconds / step_s
  double mean = 0;
  double max = 0;
};

// Every object of a store at one revision, and its telemetry rollups: a backup.
struct Snapshot {
  int64_t revision = 0;
  std::vector<Record> records;  // sorted by key
  std::vector<RollupRecord> rollups;
};

class Store {
 public:
  virtual ~Store() = default;

  // Runs `fn` in one serialisable transaction. Commits when `fn` returns OK (durably, before
  // returning), rolls back otherwise and returns fn's status. Transactions run one at a time.
  virtual absl::Status Transact(const std::function<absl::Status(Txn&)>& fn) = 0;

  virtual absl::StatusOr<std::optional<Record>> Get(const Key& key) = 0;
  virtual absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) = 0;
  // A page of a large kind (the audit log): at most `limit` records of `kind` in namespace `ns`
  // (exactly: "" is the cluster scope) whose names sort after `after_name`, sorted by name. The
  // next page starts after the last name returned; fewer than `limit` means there is no more.
  virtual absl::StatusOr<std::vector<Record>> ListPage(std::string_view kind, std::string_view ns,
                                                       std::string_view after_name, size_t limit) = 0;

  // The revision of the last committed write transaction (0 for an empty store).
  virtual int64_t Revision() = 0;

  // Changes with revision > `after`, oldest first: about `limit` of them, but always whole
  // transactions (all writes of the last revision returned), so that resuming after the last
  // revision seen misses nothing. OutOfRange when changes after `after` were compacted away:
  // the caller must list afresh.
  virtual absl::StatusOr<std::vector<Change>> Changes(int64_t after, size_t limit) = 0;

  // Blocks until Revision() > after or `timeout` passes; returns whether it moved.
  virtual bool WaitForChange(int64_t after, std::chrono::milliseconds timeout) = 0;

  // The schema version of the open database.
  virtual int SchemaVersion() = 0;

  // Telemetry rollups: appended in one durable transaction (a bucket written twice keeps the
  // last), read back oldest first for buckets starting at or after `since_unix_s`, and pruned per
  // step below `before_unix_s`.
  virtual absl::Status AppendRollups(const std::vector<RollupRecord>& rows) = 0;
  virtual absl::StatusOr<std::vector<RollupRecord>> LoadRollups(int64_t since_unix_s) = 0;
  virtual absl::Status PruneRollups(int32_t step_s, int64_t before_unix_s) = 0;

  // Leases. TryAcquireLease renews `name` for `duration` when `holder` holds it, takes it (a new
  // epoch) when it is free or expired, and otherwise leaves it: the lease as it is afterwards, so
  // the caller holds it when its holder is `holder`. ReleaseLease frees it at once when `holder`
  // holds it (the epoch stays; the next grant adds one) and does nothing otherwise. GetLease: a
  // lease never taken is one with no holder and epoch 0.
  virtual absl::StatusOr<Lease> TryAcquireLease(std::string_view name, std::string_view holder,
                                                std::string_view address, std::chrono::milliseconds duration) = 0;
  virtual absl::Status ReleaseLease(std::string_view name, std::string_view holder) = 0;
  virtual absl::StatusOr<Lease> GetLease(std::string_view name) = 0;

  // Backup and restore. ReadSnapshot reads every object at one revision (a consistent view;
  // writers go on meanwhile). LoadSnapshot fills an empty store with one: the same objects at the
  // same resourceVersions and the store at the snapshot's revision, its change feed starting
  // there (a watcher from before must list afresh). FailedPrecondition when the store holds
  // anything; nothing is written then. Leases are not part of a snapshot.
  virtual absl::StatusOr<Snapshot> ReadSnapshot() = 0;
  virtual absl::Status LoadSnapshot(const Snapshot& snapshot) = 0;
};

// Opens a store by URL: "sqlite:PATH" (created if missing, migrated to the current schema),
// "sqlite::memory:", or "postgresql://..." (libpq's URI; store/postgres_store.h). InvalidArgument for an unknown scheme; Unavailable/FailedPrecondition when the
// database cannot be opened or is newer than this binary.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(std::string_view url);

// `url` as a log or an error may show it: a password in it (postgresql://USER:PASSWORD@...,
// password=...) replaced by "***".
std::string RedactedUrl(std::string_view url);

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_STORE_H_
