// A throwaway PostgreSQL for tests: one cluster per test binary, made with Debian's initdb
// (--no-sync) in a temporary folder and served on a unix socket there only, with fsync off; a
// fresh database per test. As root (CI) the server runs as the `postgres` user, since initdb
// refuses root. Tests skip, saying why, where the binaries are missing (scripts/install-deps.sh
// installs postgresql-15).
#ifndef GPUAAS_TEST_POSTGRES_SERVER_H_
#define GPUAAS_TEST_POSTGRES_SERVER_H_

#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace gpuaas::testing {

class PostgresServer {
 public:
  // The folder of initdb and pg_ctl: $GPUAAS_PG_BINDIR, else Debian's for PostgreSQL 15; empty
  // when neither holds them.
  static std::string BinDir() {
    const char* env = std::getenv("GPUAAS_PG_BINDIR");
    for (const std::string& d : {std::string(env ? env : ""), std::string("/usr/lib/postgresql/15/bin")}) {
      if (!d.empty() && std::filesystem::exists(d + "/initdb") && std::filesystem::exists(d + "/pg_ctl")) return d;
    }
    return "";
  }

  // The one server of this test binary, started at first use; null (with `why`) when none can
  // run here.
  static PostgresServer* Shared(std::string* why = nullptr) {
    static std::string error;
    static std::unique_ptr<PostgresServer> server = [] {
      auto s = std::make_unique<PostgresServer>();
      if (!s->Start(error)) s.reset();
      return s;
    }();
    if (why != nullptr) *why = error;
    return server.get();
  }

  PostgresServer() = default;
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;
  ~PostgresServer() {
    if (started_) Run(PgCtl() + " -m immediate stop > /dev/null 2>&1");
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  bool Start(std::string& why) {
    const std::string bin = BinDir();
    if (bin.empty()) {
      why = "PostgreSQL's initdb is not installed (/usr/lib/postgresql/15/bin; scripts/install-deps.sh installs it)";
      return false;
    }
    char tmpl[] = "/tmp/gpuaas-pg-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      why = "cannot make a temporary folder";
      return false;
    }
    dir_ = tmpl;
    // initdb refuses to run as root: the server runs as the postgres user, in a folder it owns.
    if (geteuid() == 0) {
      as_ = "runuser -u postgres -- ";
      if (Run("chown postgres: " + dir_) != 0) {
        why = "running as root, but there is no postgres user to run PostgreSQL as";
        return false;
      }
    }
    bin_ = bin;
    if (Run(as_ + bin_ + "/initdb -D " + dir_ + "/data -U test -A trust --no-sync -E UTF8 --locale=C > " + dir_ +
            "/initdb.log 2>&1") != 0) {
      why = "initdb failed: " + Read(dir_ + "/initdb.log");
      return false;
    }
    if (!StartServer()) {
      why = "the server did not start: " + Read(dir_ + "/server.log");
      return false;
    }
    started_ = true;
    // Should this process die without its destructor (a crash, an abort), the server goes with
    // it: a watchdog stops it and removes its folder once this process is gone.
    Run("(while kill -0 " + std::to_string(getpid()) + " 2>/dev/null; do sleep 1; done; " + PgCtl() +
        " -m immediate stop; rm -rf " + dir_ + ") > /dev/null 2>&1 &");
    return true;
  }

  // A new, empty database; the URL that reaches it (libpq's URI, over the unix socket).
  std::string NewDatabase(const std::string& prefix = "t") {
    static std::atomic<int> n{0};
    const std::string name = prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(n++);
    PGconn* c = PQconnectdb(Url("postgres").c_str());
    std::string url;
    if (PQstatus(c) == CONNECTION_OK) {
      PGresult* r = PQexec(c, ("CREATE DATABASE " + name).c_str());
      if (PQresultStatus(r) == PGRES_COMMAND_OK) url = Url(name);
      PQclear(r);
    }
    PQfinish(c);
    return url;
  }

  // A database outage: the server stops (fast: sessions are cut) and starts again on the same
  // data. False when pg_ctl fails.
  bool StopServer() { return Run(PgCtl() + " -m fast -w -s stop > /dev/null 2>&1") == 0; }
  bool StartServer() {
    return Run(PgCtl() + " -w -s -l " + dir_ + "/server.log -o \"-k " + dir_ +
               " -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -p 5432\" start") == 0;
  }

  std::string Url(const std::string& db) const { return "postgresql:///" + db + "?host=" + dir_ + "&port=5432&user=test"; }
  const std::string& dir() const { return dir_; }

 private:
  std::string PgCtl() const { return as_ + bin_ + "/pg_ctl -D " + dir_ + "/data"; }
  static int Run(const std::string& cmd) { return std::system(cmd.c_str()); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
  std::string bin_;
  std::string as_;  // "runuser -u postgres -- " as root
  bool started_ = false;
};

}  // namespace gpuaas::testing

#endif  // GPUAAS_TEST_POSTGRES_SERVER_H_
