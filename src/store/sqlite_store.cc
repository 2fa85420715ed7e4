#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "common/status.h"
#include "store/internal/errors.h"
#include "fmt/format.h"

namespace gpuaas::store {
namespace {

// Migration N brings the schema from version N-1 to N. Never edit a released migration: add one.
constexpr const char* kMigrations[] = {
    // 1: objects.
    R"sql(
      CREATE TABLE objects (
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        uid TEXT NOT NULL,
        resource_version INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (kind, namespace, name)
      ) WITHOUT ROWID;
    )sql",
    // 2: a store-wide revision counter and the change feed for watches.
    R"sql(
      CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
      INSERT INTO meta (key, value)
        SELECT 'revision', COALESCE(MAX(resource_version), 0) FROM objects;
      INSERT INTO meta (key, value)
        SELECT 'compacted', COALESCE(MAX(resource_version), 0) FROM objects;
      CREATE TABLE changes (
        revision INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        type INTEGER NOT NULL,
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        uid TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (revision, seq)
      ) WITHOUT ROWID;
    )sql",
    // 3: telemetry rollups (1-minute and 1-hour means and maxima), history kept across restarts.
    R"sql(
      CREATE TABLE rollups (
        series TEXT NOT NULL,
        step INTEGER NOT NULL,
        bucket INTEGER NOT NULL,
        mean REAL NOT NULL,
        max REAL NOT NULL,
        PRIMARY KEY (series, step, bucket)
      ) WITHOUT ROWID;
      CREATE INDEX rollups_by_time ON rollups (step, bucket);
    )sql",
    // 4: objects and changes as rowid tables. Their rows (an object's JSON, about 1 KB) are too
    // large for WITHOUT ROWID, whose B-tree then holds few rows per page: writing 100,000 GPUs
    // took three times as long.
    R"sql(
      CREATE TABLE objects_v4 (
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        uid TEXT NOT NULL,
        resource_version INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (kind, namespace, name)
      );
      INSERT INTO objects_v4 SELECT kind, namespace, name, uid, resource_version, data FROM objects;
      DROP TABLE objects;
      ALTER TABLE objects_v4 RENAME TO objects;
      CREATE TABLE changes_v4 (
        revision INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        type INTEGER NOT NULL,
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        uid TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (revision, seq)
      );
      INSERT INTO changes_v4 SELECT revision, seq, type, kind, namespace, name, uid, data FROM changes;
      DROP TABLE changes;
      ALTER TABLE changes_v4 RENAME TO changes;
    )sql",
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
static_assert(std::size(kMigrations) == kSqliteSchemaVersion);

absl::Status SqlError(sqlite3* db, std::string_view what) {
  int code = sqlite3_extended_errcode(db);
  std::string msg = fmt::format("sqlite: {}: {}", what, sqlite3_errmsg(db));
  if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
    return absl::UnavailableError(msg);
  }
  return absl::InternalError(msg);
}

// A prepared statement, reset on destruction so that it can be reused.
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  ~Stmt() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& BindReal(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  double Real(int i) { return sqlite3_column_double(s_, i); }
  // SQLITE_ROW -> true, SQLITE_DONE -> false.
  absl::StatusOr<bool> Step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqlError(db_, "step");
  }
  absl::Status Run() {
    absl::StatusOr<bool> r = Step();
    return r.status();
  }
  std::string Text(int i) {
    const unsigned char* t = sqlite3_column_text(s_, i);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s_, i)) : "";
  }
  int64_t Int(int i) { return sqlite3_column_int64(s_, i); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_;
};

class SqliteStore;

class SqliteTxn final : public Txn {
 public:
  SqliteTxn(SqliteStore& store, int64_t revision) : store_(store), revision_(revision) {}
  int64_t revision() const override { return revision_; }
  absl::StatusOr<std::optional<Record>> Get(const Key& key) override;
  absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) override;
  absl::Status Put(const Key& key, std::string_view uid, std::string_view data,
                   int64_t expected_rv) override;
  absl::Status Delete(const Key& key, int64_t expected_rv) override;
  absl::StatusOr<std::vector<Key>> ChangedKeys(std::string_view kind, int64_t after) override;
  absl::Status CheckLease(std::string_view name, std::string_view holder, int64_t epoch) override;
  int writes() const { return seq_; }

 private:
  absl::Status Log(ChangeType type, const Key& key, std::string_view uid, std::string_view data);
  SqliteStore& store_;
  int64_t revision_;
  int seq_ = 0;
};

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(SqliteOptions options) : options_(std::move(options)) {}
  ~SqliteStore() override {
    for (auto& [sql, s] : stmts_) sqlite3_finalize(s);
    if (db_) sqlite3_close(db_);
  }

  absl::Status Open() {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(options_.path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      absl::Status s = absl::UnavailableError(
          fmt::format("cannot open database {}: {}", options_.path,
                      db_ ? sqlite3_errmsg(db_) : "out of memory"));
      return s;
    }
    sqlite3_busy_timeout(db_, 5000);
    RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
    RETURN_IF_ERROR(Migrate());
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(revision_, MetaLocked("revision"));
    return absl::OkStatus();
  }

  absl::Status Transact(const std::function<absl::Status(Txn&)>& fn) override {
    std::unique_lock<std::mutex> lock(mu_);
    RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    SqliteTxn txn(*this, revision_ + 1);
    absl::Status s;
    try {
      s = fn(txn);
    } catch (...) {
      // Nothing of the callback's may stay: the connection would be left inside a transaction
      // and every later write would fail.
      (void)Exec("ROLLBACK");
      throw;
    }
    if (s.ok() && txn.writes() > 0) {
      Stmt up = Prepare("UPDATE meta SET value = ?1 WHERE key = 'revision'");
      s = up.Bind(1, txn.revision()).Run();
      if (s.ok()) s = MaybeCompactLocked(txn.revision());
    }
    RETURN_IF_ERROR(EndLocked(s));
    if (txn.writes() > 0) {
      revision_ = txn.revision();
      lock.unlock();
      changed_.notify_all();
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<Record>> Get(const Key& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return GetLocked(key);
  }
  absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    return ListLocked(kind, ns);
  }
  absl::StatusOr<std::vector<Record>> ListPage(std::string_view kind, std::string_view ns, std::string_view after_name,
                                               size_t limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s = Prepare(
        "SELECT namespace, name, uid, resource_version, data FROM objects "
        "WHERE kind = ?1 AND namespace = ?2 AND name > ?3 ORDER BY name LIMIT ?4");
    s.Bind(1, kind).Bind(2, ns).Bind(3, after_name).Bind(4, static_cast<int64_t>(limit));
    return ReadRecords(s, kind);
  }
  int64_t Revision() override {
    std::lock_guard<std::mutex> lock(mu_);
    return revision_;
  }

  absl::StatusOr<std::vector<Change>> Changes(int64_t after, size_t limit) override {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(int64_t compacted, MetaLocked("compacted"));
    if (after < compacted) {
      return internal::Compacted(after, compacted);
    }
    Stmt s = Prepare(
        "SELECT revision, type, kind, namespace, name, uid, data FROM changes "
        "WHERE revision > ?1 ORDER BY revision, seq LIMIT ?2");
    s.Bind(1, after).Bind(2, static_cast<int64_t>(limit));
    std::vector<Change> out;
    RETURN_IF_ERROR(ReadChanges(s, out));
    if (out.size() == limit && limit > 0) {
      // Finish the last transaction: a watcher that resumes after revision R must have seen all
      // of R's writes, however many there were.
      Stmt rest = Prepare(
          "SELECT revision, type, kind, namespace, name, uid, data FROM changes "
          "WHERE revision = ?1 ORDER BY seq LIMIT -1 OFFSET ?2");
      const int64_t last = out.back().revision;
      int64_t have = 0;
      for (const Change& c : out) have += c.revision == last ? 1 : 0;
      rest.Bind(1, last).Bind(2, have);
      RETURN_IF_ERROR(ReadChanges(rest, out));
    }
    return out;
  }

  static absl::Status ReadChanges(Stmt& s, std::vector<Change>& out) {
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return absl::OkStatus();
      Change c;
      c.revision = s.Int(0);
      c.type = static_cast<ChangeType>(s.Int(1));
      c.record = {{s.Text(2), s.Text(3), s.Text(4)}, s.Text(5), c.revision, s.Text(6)};
      out.push_back(std::move(c));
    }
  }

  bool WaitForChange(int64_t after, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return revision_ > after; });
  }

  int SchemaVersion() override {
    std::lock_guard<std::mutex> lock(mu_);
    return UserVersionLocked();
  }

  absl::Status AppendRollups(const std::vector<RollupRecord>& rows) override {
    if (rows.empty()) return absl::OkStatus();
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    return EndLocked(PutRollupsLocked(rows));
  }

  absl::StatusOr<std::vector<RollupRecord>> LoadRollups(int64_t since_unix_s) override {
    std::lock_guard<std::mutex> lock(mu_);
    return RollupsLocked(since_unix_s);
  }

  absl::Status PruneRollups(int32_t step_s, int64_t before_unix_s) override {
    std::lock_guard<std::mutex> lock(mu_);
    Stmt s = Prepare("DELETE FROM rollups WHERE step = ?1 AND bucket < ?2");
    return s.Bind(1, int64_t{step_s}).Bind(2, before_unix_s / step_s).Run();
  }

  // Leases live in this process's memory: a SQLite store serves one process (it keeps the
  // revision in memory too), so a lease of an earlier process is gone with it, and a restart
  // after a crash does not wait for it to expire. Under their own mutex: a renewal never waits
  // for a long transaction.
  absl::StatusOr<Lease> TryAcquireLease(std::string_view name, std::string_view holder, std::string_view address,
                                        std::chrono::milliseconds duration) override {
    std::lock_guard<std::mutex> lock(lease_mu_);
    Lease have = LeaseLocked(name);
    if (have.holder != holder && have.remaining.count() > 0) return have;
    MemoryLease& l = leases_[std::string(name)];
    if (l.holder != holder) ++l.epoch;
    l.holder = holder;
    l.address = address;
    l.expires_ms = NowMs() + duration.count();
    return Lease{std::string(name), l.holder, l.address, l.epoch, duration};
  }

  absl::Status ReleaseLease(std::string_view name, std::string_view holder) override {
    std::lock_guard<std::mutex> lock(lease_mu_);
    auto it = leases_.find(name);
    if (it != leases_.end() && it->second.holder == holder) {
      it->second.holder.clear();
      it->second.address.clear();
      it->second.expires_ms = NowMs();
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Lease> GetLease(std::string_view name) override {
    std::lock_guard<std::mutex> lock(lease_mu_);
    return LeaseLocked(name);
  }

  absl::StatusOr<Snapshot> ReadSnapshot() override {
    std::lock_guard<std::mutex> lock(mu_);
    // One read transaction: another process (a running server) may write the file meanwhile.
    RETURN_IF_ERROR(Exec("BEGIN"));
    absl::StatusOr<Snapshot> out = ReadSnapshotLocked();
    (void)Exec(out.ok() ? "COMMIT" : "ROLLBACK");
    return out;
  }

  absl::StatusOr<Snapshot> ReadSnapshotLocked() {
    Snapshot out;
    ASSIGN_OR_RETURN(out.revision, MetaLocked("revision"));
    Stmt s = Prepare("SELECT kind, namespace, name, uid, resource_version, data FROM objects ORDER BY kind, namespace, name");
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.records.push_back({{s.Text(0), s.Text(1), s.Text(2)}, s.Text(3), s.Int(4), s.Text(5)});
    }
    ASSIGN_OR_RETURN(out.rollups, RollupsLocked(0));
    return out;
  }

  absl::Status LoadSnapshot(const Snapshot& snap) override {
    std::unique_lock<std::mutex> lock(mu_);
    RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    absl::Status s = [&]() -> absl::Status {
      Stmt any = Prepare("SELECT (SELECT COUNT(*) FROM objects) + (SELECT COUNT(*) FROM changes)");
      ASSIGN_OR_RETURN(bool row, any.Step());
      if (!row || any.Int(0) != 0 || revision_ != 0) {
        return absl::FailedPreconditionError(fmt::format(
            "{} is not empty (revision {}): a backup is restored into an empty store only", options_.path, revision_));
      }
      for (const Record& rec : snap.records) {
        Stmt put = Prepare(
            "INSERT INTO objects (kind, namespace, name, uid, resource_version, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        RETURN_IF_ERROR(put.Bind(1, rec.key.kind).Bind(2, rec.key.ns).Bind(3, rec.key.name).Bind(4, rec.uid)
                            .Bind(5, rec.resource_version).Bind(6, rec.data).Run());
      }
      RETURN_IF_ERROR(PutRollupsLocked(snap.rollups));
      Stmt rev = Prepare("UPDATE meta SET value = ?1 WHERE key IN ('revision', 'compacted')");
      return rev.Bind(1, snap.revision).Run();
    }();
    RETURN_IF_ERROR(EndLocked(s));
    revision_ = snap.revision;
    lock.unlock();
    changed_.notify_all();
    return absl::OkStatus();
  }

  // --- used by SqliteTxn, with mu_ held ---

  Lease LeaseOf(std::string_view name) {
    std::lock_guard<std::mutex> lock(lease_mu_);
    return LeaseLocked(name);
  }
  Lease LeaseLocked(std::string_view name) {  // lease_mu_ held
    auto it = leases_.find(name);
    if (it == leases_.end()) return Lease{std::string(name), "", "", 0, std::chrono::milliseconds(0)};
    const MemoryLease& l = it->second;
    return Lease{std::string(name), l.holder, l.address, l.epoch,
                 std::chrono::milliseconds(std::max<int64_t>(0, l.expires_ms - NowMs()))};
  }


  Stmt Prepare(const char* sql) {
    auto it = stmts_.find(sql);
    if (it == stmts_.end()) {
      sqlite3_stmt* s = nullptr;
      if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
        // Statements are constants of this file: failing to prepare one is a programming error.
        std::fprintf(stderr, "sqlite prepare failed: %s: %s\n", sql, sqlite3_errmsg(db_));
        std::abort();
      }
      it = stmts_.emplace(sql, s).first;
    }
    return Stmt(db_, it->second);
  }

  absl::StatusOr<std::optional<Record>> GetLocked(const Key& key) {
    Stmt s = Prepare(
        "SELECT uid, resource_version, data FROM objects "
        "WHERE kind = ?1 AND namespace = ?2 AND name = ?3");
    s.Bind(1, key.kind).Bind(2, key.ns).Bind(3, key.name);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<Record>();
    return std::optional<Record>(Record{key, s.Text(0), s.Int(1), s.Text(2)});
  }

  // The stored resourceVersion of `key`, without its data; nullopt when it does not exist.
  absl::StatusOr<std::optional<int64_t>> VersionLocked(const Key& key) {
    Stmt s = Prepare("SELECT resource_version FROM objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3");
    s.Bind(1, key.kind).Bind(2, key.ns).Bind(3, key.name);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<int64_t>();
    return std::optional<int64_t>(s.Int(0));
  }

  absl::StatusOr<std::vector<Record>> ListLocked(std::string_view kind, std::string_view ns) {
    Stmt s = Prepare(
        "SELECT namespace, name, uid, resource_version, data FROM objects "
        "WHERE kind = ?1 AND (?2 = '' OR namespace = ?2) ORDER BY namespace, name");
    s.Bind(1, kind).Bind(2, ns);
    return ReadRecords(s, kind);
  }

  // The rows of a statement selecting namespace, name, uid, resource_version, data of `kind`.
  absl::StatusOr<std::vector<Record>> ReadRecords(Stmt& s, std::string_view kind) {
    std::vector<Record> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({{std::string(kind), s.Text(0), s.Text(1)}, s.Text(2), s.Int(3), s.Text(4)});
    }
    return out;
  }

  absl::StatusOr<int64_t> MetaLocked(const char* key) {
    Stmt s = Prepare("SELECT value FROM meta WHERE key = ?1");
    s.Bind(1, std::string_view(key));
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::DataLossError(fmt::format("meta key {} missing", key));
    return s.Int(0);
  }

 private:
  absl::Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return absl::InternalError(fmt::format("sqlite: {}: {}", sql, msg));
    }
    return absl::OkStatus();
  }

  int UserVersionLocked() {
    Stmt s = Prepare("PRAGMA user_version");
    absl::StatusOr<bool> row = s.Step();
    return row.ok() && *row ? static_cast<int>(s.Int(0)) : -1;
  }

  absl::Status Migrate() {
    std::lock_guard<std::mutex> lock(mu_);
    int version = UserVersionLocked();
    if (version > kSqliteSchemaVersion) {
      return absl::FailedPreconditionError(fmt::format(
          "database {} has schema version {}, newer than this gpuaas supports ({}); "
          "run a newer gpuaas",
          options_.path, version, kSqliteSchemaVersion));
    }
    for (int v = version; v < kSqliteSchemaVersion; ++v) {
      RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
      absl::Status s = Exec(kMigrations[v]);
      if (s.ok()) s = Exec(fmt::format("PRAGMA user_version = {}", v + 1).c_str());
      if (s.ok()) s = Exec("COMMIT");
      if (!s.ok()) {
        (void)Exec("ROLLBACK");
        return absl::InternalError(
            fmt::format("migrating {} to schema version {}: {}", options_.path, v + 1, s.message()));
      }
    }
    return absl::OkStatus();
  }


  // Ends the open transaction: COMMIT when `s` is OK, else (or when COMMIT fails) ROLLBACK;
  // returns what failed.
  absl::Status EndLocked(absl::Status s) {
    if (s.ok()) s = Exec("COMMIT");
    if (!s.ok()) (void)Exec("ROLLBACK");
    return s;
  }

  // Rollups written (a bucket written twice keeps the last), and read from `since_unix_s` on.
  absl::Status PutRollupsLocked(const std::vector<RollupRecord>& rows) {
    for (const RollupRecord& r : rows) {
      Stmt s = Prepare("INSERT OR REPLACE INTO rollups (series, step, bucket, mean, max) VALUES (?1, ?2, ?3, ?4, ?5)");
      RETURN_IF_ERROR(
          s.Bind(1, r.series).Bind(2, int64_t{r.step_s}).Bind(3, r.bucket).BindReal(4, r.mean).BindReal(5, r.max).Run());
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<RollupRecord>> RollupsLocked(int64_t since_unix_s) {
    Stmt s = Prepare(
        "SELECT series, step, bucket, mean, max FROM rollups WHERE bucket * step >= ?1 ORDER BY step, bucket, series");
    s.Bind(1, since_unix_s);
    std::vector<RollupRecord> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Text(0), static_cast<int32_t>(s.Int(1)), s.Int(2), s.Real(3), s.Real(4)});
    }
    return out;
  }

  absl::Status MaybeCompactLocked(int64_t revision) {
    // Trim the change feed every 1,000 revisions; watchers further behind must relist.
    if (revision % 1000 != 0 || revision <= options_.change_retention) return absl::OkStatus();
    const int64_t keep_after = revision - options_.change_retention;
    Stmt del = Prepare("DELETE FROM changes WHERE revision <= ?1");
    RETURN_IF_ERROR(del.Bind(1, keep_after).Run());
    Stmt up = Prepare("UPDATE meta SET value = ?1 WHERE key = 'compacted'");
    return up.Bind(1, keep_after).Run();
  }

  SqliteOptions options_;
  sqlite3* db_ = nullptr;
  std::mutex mu_;  // guards db_, stmts_ and revision_
  std::condition_variable changed_;
  std::map<std::string, sqlite3_stmt*> stmts_;
  int64_t revision_ = 0;
  struct MemoryLease {
    std::string holder;
    std::string address;
    int64_t epoch = 0;
    int64_t expires_ms = 0;
  };
  std::mutex lease_mu_;  // taken after mu_, never before it
  std::map<std::string, MemoryLease, std::less<>> leases_;  // guarded by lease_mu_
};

absl::StatusOr<std::optional<Record>> SqliteTxn::Get(const Key& key) {
  return store_.GetLocked(key);
}

absl::StatusOr<std::vector<Record>> SqliteTxn::List(std::string_view kind, std::string_view ns) {
  return store_.ListLocked(kind, ns);
}

absl::StatusOr<std::vector<Key>> SqliteTxn::ChangedKeys(std::string_view kind, int64_t after) {
  ASSIGN_OR_RETURN(int64_t compacted, store_.MetaLocked("compacted"));
  if (after < compacted) {
    return internal::Compacted(after, compacted);
  }
  // Only this transaction's own writes are missing from the table: they are the caller's.
  Stmt s = store_.Prepare(
      "SELECT DISTINCT namespace, name FROM changes WHERE revision > ?1 AND revision < ?2 AND kind = ?3");
  s.Bind(1, after).Bind(2, revision_).Bind(3, kind);
  std::vector<Key> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back(Key{std::string(kind), s.Text(0), s.Text(1)});
  }
}

absl::Status SqliteTxn::CheckLease(std::string_view name, std::string_view holder, int64_t epoch) {
  const Lease have = store_.LeaseOf(name);
  if (have.holder == holder && have.epoch == epoch && have.remaining.count() > 0) return absl::OkStatus();
  return internal::Fenced(name, holder, epoch, have.holder, have.epoch);
}

absl::Status SqliteTxn::Log(ChangeType type, const Key& key, std::string_view uid,
                            std::string_view data) {
  Stmt s = store_.Prepare(
      "INSERT INTO changes (revision, seq, type, kind, namespace, name, uid, data) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  s.Bind(1, revision_).Bind(2, int64_t{seq_++}).Bind(3, static_cast<int64_t>(type));
  s.Bind(4, key.kind).Bind(5, key.ns).Bind(6, key.name).Bind(7, uid).Bind(8, data);
  return s.Run();
}

absl::Status SqliteTxn::Put(const Key& key, std::string_view uid, std::string_view data,
                            int64_t expected_rv) {
  ASSIGN_OR_RETURN(std::optional<int64_t> cur, store_.VersionLocked(key));
  if (expected_rv == kMustNotExist && cur) {
    return absl::AlreadyExistsError(fmt::format("{} already exists", key.ToString()));
  }
  if (expected_rv > 0) {
    if (!cur) return absl::NotFoundError(fmt::format("{} not found", key.ToString()));
    if (*cur != expected_rv) return internal::Conflict(key, expected_rv, *cur);
  }
  Stmt s = store_.Prepare(
      "INSERT INTO objects (kind, namespace, name, uid, resource_version, data) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
      "ON CONFLICT (kind, namespace, name) DO UPDATE SET "
      "uid = excluded.uid, resource_version = excluded.resource_version, data = excluded.data");
  s.Bind(1, key.kind).Bind(2, key.ns).Bind(3, key.name).Bind(4, uid).Bind(5, revision_).Bind(6, data);
  RETURN_IF_ERROR(s.Run());
  return Log(cur ? ChangeType::kModified : ChangeType::kAdded, key, uid, data);
}

absl::Status SqliteTxn::Delete(const Key& key, int64_t expected_rv) {
  ASSIGN_OR_RETURN(std::optional<Record> cur, Get(key));
  if (!cur) return absl::NotFoundError(fmt::format("{} not found", key.ToString()));
  if (expected_rv > 0 && cur->resource_version != expected_rv) {
    return internal::Conflict(key, expected_rv, cur->resource_version);
  }
  Stmt s = store_.Prepare("DELETE FROM objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3");
  s.Bind(1, key.kind).Bind(2, key.ns).Bind(3, key.name);
  RETURN_IF_ERROR(s.Run());
  return Log(ChangeType::kDeleted, key, cur->uid, cur->data);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options) {
  auto store = std::make_unique<SqliteStore>(options);
  RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace gpuaas::store
