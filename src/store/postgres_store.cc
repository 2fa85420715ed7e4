#include "store/postgres_store.h"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/status.h"
#include "store/internal/errors.h"
#include "fmt/format.h"

namespace gpuaas::store {
namespace {

// Migration N brings the schema from version N-1 to N. Never edit a released migration: add one.
constexpr const char* kMigrations[] = {
    // 1: objects, the revision and the change feed, telemetry rollups (as the SQLite schema 4).
    R"sql(
      CREATE TABLE gpuaas_meta (key text PRIMARY KEY, value bigint NOT NULL);
      INSERT INTO gpuaas_meta (key, value) VALUES ('revision', 0), ('compacted', 0);
      CREATE TABLE gpuaas_objects (
        kind text NOT NULL,
        namespace text NOT NULL,
        name text NOT NULL,
        uid text NOT NULL,
        resource_version bigint NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (kind, namespace, name)
      );
      CREATE TABLE gpuaas_changes (
        revision bigint NOT NULL,
        seq integer NOT NULL,
        type smallint NOT NULL,
        kind text NOT NULL,
        namespace text NOT NULL,
        name text NOT NULL,
        uid text NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (revision, seq)
      );
      CREATE INDEX gpuaas_changes_by_kind ON gpuaas_changes (kind, revision);
      CREATE TABLE gpuaas_rollups (
        series text NOT NULL,
        step integer NOT NULL,
        bucket bigint NOT NULL,
        mean double precision NOT NULL,
        max double precision NOT NULL,
        PRIMARY KEY (series, step, bucket)
      );
      CREATE INDEX gpuaas_rollups_by_time ON gpuaas_rollups (step, bucket);
    )sql",
    // 2: leases (leader election), timed by the database's clock.
    R"sql(
      CREATE TABLE gpuaas_leases (
        name text PRIMARY KEY,
        holder text NOT NULL,
        address text NOT NULL,
        epoch bigint NOT NULL,
        expires_at timestamptz NOT NULL
      );
    )sql",
};
static_assert(std::size(kMigrations) == kPostgresSchemaVersion);

// The channel commits notify with their revision.
constexpr std::string_view kChannel = "gpuaas_revision";

using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

// A failed statement as a Status whose code says what to do: Unavailable (the connection or
// the database is gone, or read-only after a failover: retry), Aborted (a serialization failure
// or deadlock: retry the transaction), AlreadyExists (a unique key), Internal otherwise.
absl::Status PgError(PGconn* c, const PGresult* r, std::string_view what) {
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string sqlstate = state != nullptr ? state : "";
  std::string msg = r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(c);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  const std::string text = fmt::format("postgresql: {}: {}", what, msg);
  if (PQstatus(c) == CONNECTION_BAD || sqlstate.starts_with("08") || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03" || sqlstate == "25006" || sqlstate == "53300") {
    return absl::UnavailableError(text);
  }
  if (sqlstate == "40001" || sqlstate == "40P01") return absl::AbortedError(text);
  if (sqlstate == "23505") return absl::AlreadyExistsError(text);
  return absl::InternalError(text);
}

// One statement with text parameters; the result when it succeeded.
absl::StatusOr<Result> Exec(PGconn* c, const char* sql, const std::vector<std::string>& params = {}) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const std::string& p : params) values.push_back(p.c_str());
  Result r(PQexecParams(c, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0), &PQclear);
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return PgError(c, r.get(), sql);
  return r;
}

// Several statements (migrations): the simple query protocol.
absl::Status ExecScript(PGconn* c, const char* sql) {
  Result r(PQexec(c, sql), &PQclear);
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return PgError(c, r.get(), "script");
  return absl::OkStatus();
}

int64_t Int(const PGresult* r, int row, int col) {
  const char* v = PQgetvalue(r, row, col);
  int64_t out = 0;
  std::from_chars(v, v + std::strlen(v), out);
  return out;
}
double Real(const PGresult* r, int row, int col) { return std::strtod(PQgetvalue(r, row, col), nullptr); }
std::string Text(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col)));
}

absl::StatusOr<PGconn*> Connect(const std::string& conninfo) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (c == nullptr) return absl::UnavailableError("postgresql: out of memory");
  if (PQstatus(c) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    PQfinish(c);
    return absl::UnavailableError(fmt::format("postgresql: cannot connect: {}", msg));
  }
  // A client that stops inside a transaction (a paused or partitioned replica) would hold the
  // revision lock, and so every writer, for ever: the server ends such a session after 5 s,
  // rolling its transaction back.
  if (absl::Status s = Exec(c, "SET idle_in_transaction_session_timeout = '5s'").status(); !s.ok()) {
    PQfinish(c);
    return s;
  }
  return c;
}

// Connections, opened as needed up to a limit; a connection that broke is closed on return,
// and the next caller opens a fresh one (so a database failover costs one failed call).
class Pool {
 public:
  Pool(std::string conninfo, int max) : conninfo_(std::move(conninfo)), max_(max) {}
  ~Pool() {
    for (PGconn* c : idle_) PQfinish(c);
  }

  class Lease {
   public:
    Lease(Pool& pool, PGconn* c) : pool_(pool), c_(c) {}
    ~Lease() { pool_.Return(c_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    PGconn* get() const { return c_; }

   private:
    Pool& pool_;
    PGconn* c_;
  };

  // A connection: an idle one, a new one while fewer than the limit are open, else (with
  // `wait`) the next returned. Without `wait`, nullptr when none is free now.
  absl::StatusOr<std::unique_ptr<Lease>> Take(bool wait = true) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!wait && idle_.empty() && open_ >= max_) return std::unique_ptr<Lease>();
    cv_.wait(lock, [&] { return !idle_.empty() || open_ < max_; });
    if (!idle_.empty()) {
      PGconn* c = idle_.back();
      idle_.pop_back();
      return std::make_unique<Lease>(*this, c);
    }
    ++open_;
    lock.unlock();
    absl::StatusOr<PGconn*> c = Connect(conninfo_);
    if (!c.ok()) {
      lock.lock();
      --open_;
      cv_.notify_one();
      return c.status();
    }
    return std::make_unique<Lease>(*this, *c);
  }

 private:
  void Return(PGconn* c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) == PQTRANS_IDLE) {
      idle_.push_back(c);
    } else {
      PQfinish(c);
      --open_;
    }
    cv_.notify_one();
  }

  const std::string conninfo_;
  const int max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PGconn*> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

// The rows of a query selecting namespace, name, uid, resource_version, data of `kind`.
std::vector<Record> RecordsOf(const Result& r, std::string_view kind) {
  std::vector<Record> out;
  out.reserve(static_cast<size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    out.push_back({{std::string(kind), Text(r.get(), i, 0), Text(r.get(), i, 1)}, Text(r.get(), i, 2),
                   Int(r.get(), i, 3), Text(r.get(), i, 4)});
  }
  return out;
}

absl::StatusOr<std::vector<Record>> ListOn(PGconn* c, std::string_view kind, std::string_view ns) {
  ASSIGN_OR_RETURN(Result r, Exec(c,
                                  "SELECT namespace, name, uid, resource_version, data FROM gpuaas_objects "
                                  "WHERE kind = $1 AND ($2 = '' OR namespace = $2) ORDER BY namespace, name",
                                  {std::string(kind), std::string(ns)}));
  return RecordsOf(r, kind);
}

absl::StatusOr<std::optional<Record>> GetOn(PGconn* c, const Key& key) {
  ASSIGN_OR_RETURN(Result r, Exec(c,
                                  "SELECT uid, resource_version, data FROM gpuaas_objects "
                                  "WHERE kind = $1 AND namespace = $2 AND name = $3",
                                  {key.kind, key.ns, key.name}));
  if (PQntuples(r.get()) == 0) return std::optional<Record>();
  return std::optional<Record>(Record{key, Text(r.get(), 0, 0), Int(r.get(), 0, 1), Text(r.get(), 0, 2)});
}

// Rollups written (a bucket written twice keeps the last), and read from `since_unix_s` on.
absl::Status PutRollupsOn(PGconn* c, const std::vector<RollupRecord>& rows) {
  for (const RollupRecord& r : rows) {
    RETURN_IF_ERROR(Exec(c,
                         "INSERT INTO gpuaas_rollups (series, step, bucket, mean, max) VALUES ($1, $2, $3, $4, $5) "
                         "ON CONFLICT (series, step, bucket) DO UPDATE SET mean = excluded.mean, max = excluded.max",
                         {r.series, std::to_string(r.step_s), std::to_string(r.bucket), fmt::format("{}", r.mean),
                          fmt::format("{}", r.max)})
                        .status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RollupRecord>> RollupsOn(PGconn* c, int64_t since_unix_s) {
  ASSIGN_OR_RETURN(Result r, Exec(c,
                                  "SELECT series, step, bucket, mean, max FROM gpuaas_rollups "
                                  "WHERE bucket * step >= $1 ORDER BY step, bucket, series",
                                  {std::to_string(since_unix_s)}));
  std::vector<RollupRecord> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    out.push_back({Text(r.get(), i, 0), static_cast<int32_t>(Int(r.get(), i, 1)), Int(r.get(), i, 2),
                   Real(r.get(), i, 3), Real(r.get(), i, 4)});
  }
  return out;
}

absl::StatusOr<int64_t> MetaOn(PGconn* c, const char* key) {
  ASSIGN_OR_RETURN(Result r, Exec(c, "SELECT value FROM gpuaas_meta WHERE key = $1", {key}));
  if (PQntuples(r.get()) == 0) return absl::DataLossError(fmt::format("postgresql: meta key {} missing", key));
  return Int(r.get(), 0, 0);
}

class PgTxn final : public Txn {
 public:
  PgTxn(PGconn* c, int64_t revision) : c_(c), revision_(revision) {}
  int64_t revision() const override { return revision_; }
  absl::StatusOr<std::optional<Record>> Get(const Key& key) override { return GetOn(c_, key); }
  absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) override {
    return ListOn(c_, kind, ns);
  }
  // One statement (one round trip) in the usual case: the write and its change-feed row
  // together, the check of `expected_rv` in the write's WHERE. Only a refused write reads again,
  // to say why.
  absl::Status Put(const Key& key, std::string_view uid, std::string_view data, int64_t expected_rv) override {
    // $1-$3 key, $4 uid, $5 revision, $6 data, $7 seq, and for an update $8 the expected
    // resourceVersion.
    std::vector<std::string> params = {key.kind,          key.ns,           key.name,
                                       std::string(uid),  std::to_string(revision_), std::string(data),
                                       std::to_string(seq_)};
    constexpr const char* kLog =
        "INSERT INTO gpuaas_changes (revision, seq, type, kind, namespace, name, uid, data) "
        "SELECT $5, $7, w.type, $1, $2, $3, $4, $6 FROM w RETURNING 1";
    const std::string added = std::to_string(static_cast<int>(ChangeType::kAdded));
    const std::string modified = std::to_string(static_cast<int>(ChangeType::kModified));
    std::string sql;
    if (expected_rv == kMustNotExist) {
      sql = "WITH w AS (INSERT INTO gpuaas_objects (kind, namespace, name, uid, resource_version, data) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, namespace, name) DO NOTHING "
            "RETURNING " + added + " AS type) " + kLog;
    } else if (expected_rv > 0) {
      params.push_back(std::to_string(expected_rv));
      sql = "WITH w AS (UPDATE gpuaas_objects SET uid = $4, resource_version = $5, data = $6 "
            "WHERE kind = $1 AND namespace = $2 AND name = $3 AND resource_version = $8 "
            "RETURNING " + modified + " AS type) " + kLog;
    } else {
      // xmax is 0 on a row the upsert inserted, the updating transaction's id on one it updated.
      sql = "WITH w AS (INSERT INTO gpuaas_objects (kind, namespace, name, uid, resource_version, data) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, namespace, name) DO UPDATE SET "
            "uid = excluded.uid, resource_version = excluded.resource_version, data = excluded.data "
            "RETURNING CASE WHEN xmax = 0 THEN " + added + " ELSE " + modified + " END AS type) " + kLog;
    }
    ASSIGN_OR_RETURN(Result r, Exec(c_, sql.c_str(), params));
    if (PQntuples(r.get()) == 1) {
      ++seq_;
      return absl::OkStatus();
    }
    // Refused: say why.
    if (expected_rv == kMustNotExist) return absl::AlreadyExistsError(fmt::format("{} already exists", key.ToString()));
    ASSIGN_OR_RETURN(Result cur, Exec(c_,
                                      "SELECT resource_version FROM gpuaas_objects "
                                      "WHERE kind = $1 AND namespace = $2 AND name = $3",
                                      {key.kind, key.ns, key.name}));
    if (PQntuples(cur.get()) == 0) return absl::NotFoundError(fmt::format("{} not found", key.ToString()));
    return internal::Conflict(key, expected_rv, Int(cur.get(), 0, 0));
  }
  absl::Status Delete(const Key& key, int64_t expected_rv) override {
    ASSIGN_OR_RETURN(std::optional<Record> cur, Get(key));
    if (!cur) return absl::NotFoundError(fmt::format("{} not found", key.ToString()));
    if (expected_rv > 0 && cur->resource_version != expected_rv) {
      return internal::Conflict(key, expected_rv, cur->resource_version);
    }
    RETURN_IF_ERROR(
        Exec(c_, "DELETE FROM gpuaas_objects WHERE kind = $1 AND namespace = $2 AND name = $3", {key.kind, key.ns, key.name})
            .status());
    return Log(ChangeType::kDeleted, key, cur->uid, cur->data);
  }
  absl::StatusOr<std::vector<Key>> ChangedKeys(std::string_view kind, int64_t after) override {
    ASSIGN_OR_RETURN(int64_t compacted, MetaOn(c_, "compacted"));
    if (after < compacted) {
      return internal::Compacted(after, compacted);
    }
    // This transaction holds the revision lock: every earlier revision has committed, and only
    // its own writes (the caller's) are left out.
    ASSIGN_OR_RETURN(Result r, Exec(c_,
                                    "SELECT DISTINCT namespace, name FROM gpuaas_changes "
                                    "WHERE kind = $1 AND revision > $2 AND revision < $3",
                                    {std::string(kind), std::to_string(after), std::to_string(revision_)}));
    std::vector<Key> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back({std::string(kind), Text(r.get(), i, 0), Text(r.get(), i, 1)});
    return out;
  }
  absl::Status CheckLease(std::string_view name, std::string_view holder, int64_t epoch) override {
    // FOR KEY SHARE: a takeover (which locks the row FOR UPDATE first) waits until this
    // transaction has ended; the holder's own renewal does not.
    ASSIGN_OR_RETURN(Result r, Exec(c_,
                                    "SELECT holder, epoch, expires_at > clock_timestamp() FROM gpuaas_leases "
                                    "WHERE name = $1 FOR KEY SHARE",
                                    {std::string(name)}));
    if (PQntuples(r.get()) == 1 && Text(r.get(), 0, 0) == holder && Int(r.get(), 0, 1) == epoch &&
        Text(r.get(), 0, 2) == "t") {
      return absl::OkStatus();
    }
    return internal::Fenced(name, holder, epoch,
                            PQntuples(r.get()) == 1 ? Text(r.get(), 0, 0) : "", PQntuples(r.get()) == 1 ? Int(r.get(), 0, 1) : 0);
  }
  int writes() const { return seq_; }

 private:
  absl::Status Log(ChangeType type, const Key& key, std::string_view uid, std::string_view data) {
    return Exec(c_,
                "INSERT INTO gpuaas_changes (revision, seq, type, kind, namespace, name, uid, data) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                {std::to_string(revision_), std::to_string(seq_++), std::to_string(static_cast<int>(type)), key.kind,
                 key.ns, key.name, std::string(uid), std::string(data)})
        .status();
  }
  PGconn* c_;
  int64_t revision_;
  int seq_ = 0;
};

class PostgresStore final : public Store {
 public:
  explicit PostgresStore(PostgresOptions o) : options_(std::move(o)), pool_(options_.conninfo, options_.max_connections) {}
  ~PostgresStore() override {
    stop_ = true;
    if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
    if (listener_.joinable()) listener_.join();
    for (int fd : wake_) {
      if (fd >= 0) close(fd);
    }
    if (lease_conn_ != nullptr) PQfinish(lease_conn_);
  }

  absl::Status Open() {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> c, pool_.Take());
    RETURN_IF_ERROR(Migrate(c->get()));
    ASSIGN_OR_RETURN(int64_t rev, MetaOn(c->get(), "revision"));
    Seen(rev);
    if (pipe(wake_) != 0) return absl::InternalError("postgresql: cannot make the listener's wake-up pipe");
    listener_ = std::thread([this] { Listen(); });
    return absl::OkStatus();
  }

  absl::Status Transact(const std::function<absl::Status(Txn&)>& fn) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> lease, pool_.Take());
    PGconn* c = lease->get();
    RETURN_IF_ERROR(Exec(c, "BEGIN").status());
    auto rollback = [&] { (void)Exec(c, "ROLLBACK"); };
    // The revision row's lock: write transactions run one at a time, in revision order.
    absl::StatusOr<Result> locked = Exec(c, "SELECT value FROM gpuaas_meta WHERE key = 'revision' FOR UPDATE");
    if (!locked.ok()) {
      rollback();
      return locked.status();
    }
    PgTxn txn(c, Int(locked->get(), 0, 0) + 1);
    absl::Status s;
    try {
      s = fn(txn);
    } catch (...) {
      rollback();  // the connection must not go back to the pool inside a transaction
      throw;
    }
    if (s.ok() && txn.writes() > 0) {
      s = Exec(c, "UPDATE gpuaas_meta SET value = $1 WHERE key = 'revision'", {std::to_string(txn.revision())}).status();
      if (s.ok()) s = MaybeCompact(c, txn.revision());
      // Delivered at commit, to every replica's listener: a wake-up, never the truth.
      if (s.ok()) {
        s = Exec(c, "SELECT pg_notify($1, $2)", {std::string(kChannel), std::to_string(txn.revision())}).status();
      }
    }
    if (!s.ok()) {
      rollback();
      return s;
    }
    absl::StatusOr<Result> committed = Exec(c, "COMMIT");
    if (!committed.ok()) {
      rollback();
      return absl::UnavailableError(fmt::format(
          "{} (the transaction may or may not have committed: read again before retrying)", committed.status().message()));
    }
    if (txn.writes() > 0) Seen(txn.revision());
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<Record>> Get(const Key& key) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> c, pool_.Take());
    return GetOn(c->get(), key);
  }
  absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> c, pool_.Take());
    return ListOn(c->get(), kind, ns);
  }
  absl::StatusOr<std::vector<Record>> ListPage(std::string_view kind, std::string_view ns, std::string_view after_name,
                                               size_t limit) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> c, pool_.Take());
    // COLLATE "C": names compare byte by byte, as SQLite compares them.
    ASSIGN_OR_RETURN(Result r, Exec(c->get(),
                                    "SELECT namespace, name, uid, resource_version, data FROM gpuaas_objects "
                                    "WHERE kind = $1 AND namespace = $2 AND name > $3 COLLATE \"C\" "
                                    "ORDER BY name COLLATE \"C\" LIMIT $4",
                                    {std::string(kind), std::string(ns), std::string(after_name), std::to_string(limit)}));
    return RecordsOf(r, kind);
  }

  int64_t Revision() override {
    // The database's (another replica may have written); the last one known when it cannot be
    // reached.
    // (Never waiting for a connection: a caller may hold the others.)
    if (absl::StatusOr<std::unique_ptr<Pool::Lease>> c = pool_.Take(/*wait=*/false); c.ok() && *c != nullptr) {
      if (absl::StatusOr<int64_t> rev = MetaOn((*c)->get(), "revision"); rev.ok()) Seen(*rev);
    }
    return known_.load();
  }

  absl::StatusOr<std::vector<Change>> Changes(int64_t after, size_t limit) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> lease, pool_.Take());
    PGconn* c = lease->get();
    // One snapshot for the compaction check and the rows: a compaction between them could
    // otherwise hide changes without the OutOfRange that says so.
    RETURN_IF_ERROR(Exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    absl::StatusOr<std::vector<Change>> out = ChangesIn(c, after, limit);
    (void)Exec(c, out.ok() ? "COMMIT" : "ROLLBACK");
    return out;
  }

  bool WaitForChange(int64_t after, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return known_.load() > after; });
  }

  int SchemaVersion() override {
    absl::StatusOr<std::unique_ptr<Pool::Lease>> c = pool_.Take();
    if (!c.ok()) return -1;
    absl::StatusOr<int> v = VersionOn((*c)->get());
    return v.ok() ? *v : -1;
  }

  absl::Status AppendRollups(const std::vector<RollupRecord>& rows) override {
    if (rows.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> lease, pool_.Take());
    PGconn* c = lease->get();
    RETURN_IF_ERROR(Exec(c, "BEGIN").status());
    absl::Status s = PutRollupsOn(c, rows);
    if (s.ok()) s = Exec(c, "COMMIT").status();
    if (!s.ok()) (void)Exec(c, "ROLLBACK");
    return s;
  }

  // Leases go over a connection of their own, never queued behind the pool's transactions: a
  // leader's renewal must not wait for its own controllers' writes.
  absl::StatusOr<Lease> TryAcquireLease(std::string_view name, std::string_view holder, std::string_view address,
                                        std::chrono::milliseconds duration) override {
    return WithLeaseConnection([&](PGconn* c) -> absl::StatusOr<Lease> {
      RETURN_IF_ERROR(Exec(c, "BEGIN").status());
      absl::StatusOr<Lease> out = AcquireIn(c, name, holder, address, duration);
      if (!out.ok()) {
        (void)Exec(c, "ROLLBACK");
        return out;
      }
      RETURN_IF_ERROR(Exec(c, "COMMIT").status());
      return out;
    });
  }

  absl::Status ReleaseLease(std::string_view name, std::string_view holder) override {
    return WithLeaseConnection([&](PGconn* c) -> absl::StatusOr<Lease> {
             RETURN_IF_ERROR(Exec(c,
                                  "UPDATE gpuaas_leases SET holder = '', address = '', expires_at = clock_timestamp() "
                                  "WHERE name = $1 AND holder = $2",
                                  {std::string(name), std::string(holder)})
                                 .status());
             return Lease{};
           })
        .status();
  }

  absl::StatusOr<Lease> GetLease(std::string_view name) override {
    return WithLeaseConnection([&](PGconn* c) -> absl::StatusOr<Lease> {
      ASSIGN_OR_RETURN(Result r, Exec(c, "SELECT holder, address, epoch, expires_at FROM gpuaas_leases WHERE name = $1",
                                      {std::string(name)}));
      if (PQntuples(r.get()) == 0) return Lease{std::string(name), "", "", 0, std::chrono::milliseconds(0)};
      return LeaseFrom(c, name, r.get());
    });
  }

  absl::StatusOr<Snapshot> ReadSnapshot() override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> lease, pool_.Take());
    PGconn* c = lease->get();
    // One snapshot of the database: the revision and every row as of the same instant.
    RETURN_IF_ERROR(Exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    absl::StatusOr<Snapshot> out = [&]() -> absl::StatusOr<Snapshot> {
      Snapshot snap;
      ASSIGN_OR_RETURN(snap.revision, MetaOn(c, "revision"));
      ASSIGN_OR_RETURN(Result r, Exec(c,
                                      "SELECT kind, namespace, name, uid, resource_version, data FROM gpuaas_objects "
                                      "ORDER BY kind, namespace, name"));
      snap.records.reserve(static_cast<size_t>(PQntuples(r.get())));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        snap.records.push_back({{Text(r.get(), i, 0), Text(r.get(), i, 1), Text(r.get(), i, 2)}, Text(r.get(), i, 3),
                                Int(r.get(), i, 4), Text(r.get(), i, 5)});
      }
      ASSIGN_OR_RETURN(snap.rollups, RollupsOn(c, 0));
      return snap;
    }();
    (void)Exec(c, out.ok() ? "COMMIT" : "ROLLBACK");
    return out;
  }

  absl::Status LoadSnapshot(const Snapshot& snap) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> lease, pool_.Take());
    PGconn* c = lease->get();
    RETURN_IF_ERROR(Exec(c, "BEGIN").status());
    absl::Status s = [&]() -> absl::Status {
      // The revision lock: no writer runs meanwhile, and two restores cannot both find it empty.
      ASSIGN_OR_RETURN(Result rev, Exec(c, "SELECT value FROM gpuaas_meta WHERE key = 'revision' FOR UPDATE"));
      ASSIGN_OR_RETURN(Result any, Exec(c, "SELECT EXISTS (SELECT 1 FROM gpuaas_objects) OR EXISTS (SELECT 1 FROM gpuaas_changes)"));
      if (Int(rev.get(), 0, 0) != 0 || Text(any.get(), 0, 0) == "t") {
        return absl::FailedPreconditionError(fmt::format(
            "the database is not empty (revision {}): a backup is restored into an empty store only", Int(rev.get(), 0, 0)));
      }
      for (const Record& rec : snap.records) {
        RETURN_IF_ERROR(Exec(c,
                             "INSERT INTO gpuaas_objects (kind, namespace, name, uid, resource_version, data) "
                             "VALUES ($1, $2, $3, $4, $5, $6)",
                             {rec.key.kind, rec.key.ns, rec.key.name, rec.uid, std::to_string(rec.resource_version), rec.data})
                            .status());
      }
      RETURN_IF_ERROR(PutRollupsOn(c, snap.rollups));
      RETURN_IF_ERROR(Exec(c, "UPDATE gpuaas_meta SET value = $1 WHERE key IN ('revision', 'compacted')",
                           {std::to_string(snap.revision)})
                          .status());
      return Exec(c, "SELECT pg_notify($1, $2)", {std::string(kChannel), std::to_string(snap.revision)}).status();
    }();
    if (!s.ok()) {
      (void)Exec(c, "ROLLBACK");
      return s;
    }
    RETURN_IF_ERROR(Exec(c, "COMMIT").status());
    Seen(snap.revision);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<RollupRecord>> LoadRollups(int64_t since_unix_s) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> c, pool_.Take());
    return RollupsOn(c->get(), since_unix_s);
  }

  absl::Status PruneRollups(int32_t step_s, int64_t before_unix_s) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Pool::Lease> c, pool_.Take());
    return Exec(c->get(), "DELETE FROM gpuaas_rollups WHERE step = $1 AND bucket < $2",
                {std::to_string(step_s), std::to_string(before_unix_s / step_s)})
        .status();
  }

 private:
  static absl::StatusOr<int> VersionOn(PGconn* c) {
    ASSIGN_OR_RETURN(Result t, Exec(c, "SELECT to_regclass('gpuaas_schema') IS NOT NULL"));
    if (Text(t.get(), 0, 0) != "t") return 0;
    ASSIGN_OR_RETURN(Result r, Exec(c, "SELECT COALESCE(MAX(version), 0) FROM gpuaas_schema"));
    return static_cast<int>(Int(r.get(), 0, 0));
  }

  absl::Status Migrate(PGconn* c) {
    RETURN_IF_ERROR(Exec(c, "BEGIN").status());
    auto fail = [&](absl::Status s) {
      (void)Exec(c, "ROLLBACK");
      return s;
    };
    // One replica migrates; the others wait here, then find the schema current.
    if (absl::Status s = Exec(c, "SELECT pg_advisory_xact_lock(hashtext('gpuaas-schema'))").status(); !s.ok()) {
      return fail(s);
    }
    if (absl::Status s = ExecScript(c, "CREATE TABLE IF NOT EXISTS gpuaas_schema (version integer NOT NULL)"); !s.ok()) {
      return fail(s);
    }
    absl::StatusOr<int> version = VersionOn(c);
    if (!version.ok()) return fail(version.status());
    if (*version > kPostgresSchemaVersion) {
      return fail(absl::FailedPreconditionError(fmt::format(
          "the database has gpuaas schema version {}, newer than this gpuaas supports ({}); run a newer gpuaas",
          *version, kPostgresSchemaVersion)));
    }
    for (int v = *version; v < kPostgresSchemaVersion; ++v) {
      absl::Status s = ExecScript(c, kMigrations[v]);
      if (s.ok()) s = Exec(c, "INSERT INTO gpuaas_schema (version) VALUES ($1)", {std::to_string(v + 1)}).status();
      if (!s.ok()) {
        return fail(absl::InternalError(fmt::format("migrating to schema version {}: {}", v + 1, s.message())));
      }
    }
    return Exec(c, "COMMIT").status();
  }

  // Inside a transaction on `c`: renews the lease for its holder, or takes it over when it is
  // free or expired. Fenced writes hold the row FOR KEY SHARE (Txn::CheckLease), which the
  // holder's renewal (an UPDATE of no key) does not wait for; a takeover first locks the row
  // FOR UPDATE, and so waits until every fenced write in flight has ended.
  static absl::StatusOr<Lease> AcquireIn(PGconn* c, std::string_view name, std::string_view holder,
                                         std::string_view address, std::chrono::milliseconds duration) {
    ASSIGN_OR_RETURN(Result cur, Exec(c, "SELECT holder FROM gpuaas_leases WHERE name = $1", {std::string(name)}));
    if (PQntuples(cur.get()) == 1 && Text(cur.get(), 0, 0) != holder) {
      RETURN_IF_ERROR(Exec(c, "SELECT 1 FROM gpuaas_leases WHERE name = $1 FOR UPDATE", {std::string(name)}).status());
    }
    // The upsert takes the lease when it is ours or has expired; the second branch reads it as
    // it is when the upsert did nothing (someone else holds it).
    ASSIGN_OR_RETURN(
        Result r,
        Exec(c,
             "WITH taken AS ("
             "  INSERT INTO gpuaas_leases AS l (name, holder, address, epoch, expires_at) "
             "  VALUES ($1, $2, $3, 1, clock_timestamp() + $4 * interval '1 millisecond') "
             "  ON CONFLICT (name) DO UPDATE SET "
             "    epoch = CASE WHEN l.holder = excluded.holder THEN l.epoch ELSE l.epoch + 1 END, "
             "    holder = excluded.holder, address = excluded.address, expires_at = excluded.expires_at "
             "  WHERE l.holder = excluded.holder OR l.expires_at <= clock_timestamp() "
             "  RETURNING holder, address, epoch, expires_at) "
             "SELECT holder, address, epoch, expires_at FROM taken "
             "UNION ALL SELECT holder, address, epoch, expires_at FROM gpuaas_leases "
             "  WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM taken)",
             {std::string(name), std::string(holder), std::string(address), std::to_string(duration.count())}));
    if (PQntuples(r.get()) == 1) return LeaseFrom(c, name, r.get());
    // Another replica created the row in the same instant: the statement's snapshot predates
    // it. Read it afresh.
    ASSIGN_OR_RETURN(Result again, Exec(c, "SELECT holder, address, epoch, expires_at FROM gpuaas_leases WHERE name = $1",
                                        {std::string(name)}));
    if (PQntuples(again.get()) != 1) return absl::InternalError(fmt::format("postgresql: lease {} not read back", name));
    return LeaseFrom(c, name, again.get());
  }

  // Runs `fn` on the lease connection (one at a time), connecting first when needed; a broken
  // connection is dropped, and the next call connects afresh.
  absl::StatusOr<Lease> WithLeaseConnection(const std::function<absl::StatusOr<Lease>(PGconn*)>& fn) {
    std::lock_guard<std::mutex> lock(lease_mu_);
    if (lease_conn_ != nullptr && PQstatus(lease_conn_) != CONNECTION_OK) {
      PQfinish(lease_conn_);
      lease_conn_ = nullptr;
    }
    if (lease_conn_ == nullptr) {
      ASSIGN_OR_RETURN(lease_conn_, Connect(options_.conninfo));
    }
    absl::StatusOr<Lease> out = fn(lease_conn_);
    if (PQstatus(lease_conn_) != CONNECTION_OK || PQtransactionStatus(lease_conn_) != PQTRANS_IDLE) {
      PQfinish(lease_conn_);
      lease_conn_ = nullptr;
    }
    return out;
  }

  // A lease row (holder, address, epoch, expires_at) as a Lease; the time left by the
  // database's clock.
  static absl::StatusOr<Lease> LeaseFrom(PGconn* c, std::string_view name, const PGresult* row) {
    ASSIGN_OR_RETURN(Result left, Exec(c,
                                       "SELECT GREATEST(0, CEIL(EXTRACT(EPOCH FROM ($1::timestamptz - clock_timestamp())) "
                                       "* 1000))::bigint",
                                       {Text(row, 0, 3)}));
    return Lease{std::string(name), Text(row, 0, 0), Text(row, 0, 1), Int(row, 0, 2),
                 std::chrono::milliseconds(Int(left.get(), 0, 0))};
  }

  absl::Status MaybeCompact(PGconn* c, int64_t revision) {
    // Trim the change feed every 1,000 revisions; watchers further behind must relist.
    if (revision % 1000 != 0 || revision <= options_.change_retention) return absl::OkStatus();
    const std::string keep_after = std::to_string(revision - options_.change_retention);
    RETURN_IF_ERROR(Exec(c, "DELETE FROM gpuaas_changes WHERE revision <= $1", {keep_after}).status());
    return Exec(c, "UPDATE gpuaas_meta SET value = $1 WHERE key = 'compacted'", {keep_after}).status();
  }

  static absl::StatusOr<std::vector<Change>> ChangesIn(PGconn* c, int64_t after, size_t limit) {
    ASSIGN_OR_RETURN(int64_t compacted, MetaOn(c, "compacted"));
    if (after < compacted) {
      return internal::Compacted(after, compacted);
    }
    std::vector<Change> out;
    auto read = [&](const Result& r) {
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        Change ch;
        ch.revision = Int(r.get(), i, 0);
        ch.type = static_cast<ChangeType>(Int(r.get(), i, 1));
        ch.record = {{Text(r.get(), i, 2), Text(r.get(), i, 3), Text(r.get(), i, 4)}, Text(r.get(), i, 5), ch.revision,
                     Text(r.get(), i, 6)};
        out.push_back(std::move(ch));
      }
    };
    ASSIGN_OR_RETURN(Result first, Exec(c,
                                        "SELECT revision, type, kind, namespace, name, uid, data FROM gpuaas_changes "
                                        "WHERE revision > $1 ORDER BY revision, seq LIMIT $2",
                                        {std::to_string(after), std::to_string(limit)}));
    read(first);
    if (out.size() == limit && limit > 0) {
      // Finish the last transaction: a watcher resuming after revision R must have seen all of R.
      const int64_t last = out.back().revision;
      int64_t have = 0;
      for (const Change& ch : out) have += ch.revision == last ? 1 : 0;
      ASSIGN_OR_RETURN(Result rest, Exec(c,
                                         "SELECT revision, type, kind, namespace, name, uid, data FROM gpuaas_changes "
                                         "WHERE revision = $1 ORDER BY seq OFFSET $2",
                                         {std::to_string(last), std::to_string(have)}));
      read(rest);
    }
    return out;
  }

  // A revision known to have committed: waiters past it wake.
  void Seen(int64_t rev) {
    int64_t cur = known_.load();
    while (rev > cur && !known_.compare_exchange_weak(cur, rev)) {
    }
    if (rev > cur) {
      std::lock_guard<std::mutex> lock(mu_);
      changed_.notify_all();
    }
  }

  // The listener: LISTEN on its own connection, wake waiters on each NOTIFY, and read the
  // revision once a second besides (a notification lost while reconnecting costs at most that).
  void Listen() {
    PGconn* c = nullptr;
    while (!stop_) {
      if (c == nullptr || PQstatus(c) != CONNECTION_OK) {
        if (c != nullptr) PQfinish(c);
        c = nullptr;
        absl::StatusOr<PGconn*> made = Connect(options_.conninfo);
        if (made.ok() && Exec(*made, fmt::format("LISTEN {}", kChannel).c_str()).ok()) {
          c = *made;
          // Registered now; what committed while it was not is read below.
          if (absl::StatusOr<int64_t> rev = MetaOn(c, "revision"); rev.ok()) Seen(*rev);
        } else {
          if (made.ok()) PQfinish(*made);
          WaitWake(1000);
          continue;
        }
      }
      pollfd fds[2] = {{PQsocket(c), POLLIN, 0}, {wake_[0], POLLIN, 0}};
      const int n = poll(fds, 2, 1000);
      if (stop_) break;
      if (n > 0 && (fds[0].revents & POLLIN) != 0) {
        if (PQconsumeInput(c) == 0) continue;  // broken: reconnect above
        while (PGnotify* note = PQnotifies(c)) {
          int64_t rev = 0;
          const std::string_view payload = note->extra != nullptr ? note->extra : "";
          std::from_chars(payload.data(), payload.data() + payload.size(), rev);
          PQfreemem(note);
          Seen(rev);
        }
      } else if (n == 0) {
        if (absl::StatusOr<int64_t> rev = MetaOn(c, "revision"); rev.ok()) Seen(*rev);
      }
    }
    if (c != nullptr) PQfinish(c);
  }

  void WaitWake(int ms) {
    pollfd fd{wake_[0], POLLIN, 0};
    (void)poll(&fd, 1, ms);
  }

  PostgresOptions options_;
  Pool pool_;
  std::atomic<int64_t> known_{0};  // the newest revision known to have committed
  std::mutex mu_;                  // for changed_ only
  std::condition_variable changed_;
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};  // the listener's wake-up pipe (stop)
  std::mutex lease_mu_;
  PGconn* lease_conn_ ABSL_GUARDED_BY(lease_mu_) = nullptr;
  std::thread listener_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const PostgresOptions& options) {
  auto store = std::make_unique<PostgresStore>(options);
  RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace gpuaas::store
