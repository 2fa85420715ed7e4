// The server on PostgreSQL (--db postgresql://...), as a user runs it: the demo comes up on a
// fresh database, a pool goes through its lifecycle, and a restart finds everything as it was.
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "postgres_server.h"
#include "process.h"

namespace gpuaas::testing {
namespace {

TEST(PostgresE2e, TheDemoRunsOnPostgresqlAndARestartKeepsItsState) {
  std::string why;
  PostgresServer* pg = PostgresServer::Shared(&why);
  if (pg == nullptr) GTEST_SKIP() << why;
  const std::string url = pg->NewDatabase("e2e");
  ASSERT_FALSE(url.empty());
  char tmpl[] = "/tmp/gpuaas-pge2e-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::string token;
  auto until_ready = [&](const std::string& s, const std::string& pool) {
    for (int i = 0; i < 300; ++i) {
      nlohmann::json p = nlohmann::json::parse(RunGpuaas("pool get " + pool + " -p demo -o json" + s).out, nullptr, false);
      for (const nlohmann::json& c : p.is_object() ? p["status"].value("conditions", nlohmann::json::array())
                                                   : nlohmann::json::array()) {
        if (c.value("type", "") == "Ready" && c.value("status", "") == "True") return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  std::string uid;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start("--demo --db '" + url + "'", dir + "/log1")) << server.Log();
    EXPECT_EQ(server.Log().find("password"), std::string::npos);
    const std::string log = server.Log();
    const size_t at = log.find("export GPUAAS_TOKEN=");
    ASSERT_NE(at, std::string::npos) << log;
    token = log.substr(at + 20, log.find('\n', at) - at - 20);
    const std::string s = " --token " + token + " --server " + server.Url();
    ASSERT_EQ(RunGpuaas("pool request p -p demo --item H200-SXM-141GB/full=2" + s).code, 0);
    ASSERT_EQ(RunGpuaas("pool approve p -p demo" + s).code, 0);
    ASSERT_TRUE(until_ready(s, "p")) << RunGpuaas("pool get p -p demo" + s).out;
    uid = nlohmann::json::parse(RunGpuaas("pool get p -p demo -o json" + s).out)["metadata"]["uid"];
    EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
  }
  // A restart on the same database: the pool, its devices and its meter are there, and the
  // demo's token still works.
  ServerProcess again;
  ASSERT_TRUE(again.Start("--demo --db '" + url + "'", dir + "/log2")) << again.Log();
  const std::string s = " --token " + token + " --server " + again.Url();
  RunResult got = RunGpuaas("pool get p -p demo -o json" + s);
  ASSERT_EQ(got.code, 0) << got.out;
  const nlohmann::json p = nlohmann::json::parse(got.out);
  EXPECT_EQ(p["metadata"]["uid"], uid);
  EXPECT_EQ(p["status"]["allocation"].size(), 2u);
  EXPECT_TRUE(until_ready(s, "p"));
  RunResult meters = RunGpuaas("get usagerecords -o json" + s);
  ASSERT_EQ(meters.code, 0) << meters.out;
  int mine = 0;
  const nlohmann::json list = nlohmann::json::parse(meters.out);  // held: the loop reads a member of it
  for (const nlohmann::json& m : list["items"]) mine += m["spec"]["pool"] == "p" ? 1 : 0;
  EXPECT_EQ(mine, 1);
  EXPECT_EQ(again.Stop(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

// An installation moves from SQLite to PostgreSQL: a backup of its file restores into an empty
// database, where the server finds its pools, meters and tokens as they were. A restore into a
// database that holds anything is refused.
TEST(PostgresE2e, ASqliteInstallationMovesToPostgresqlByBackupAndRestore) {
  std::string why;
  PostgresServer* pg = PostgresServer::Shared(&why);
  if (pg == nullptr) GTEST_SKIP() << why;
  char tmpl[] = "/tmp/gpuaas-move-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::string token, uid;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start("--demo --db sqlite:" + dir + "/gpuaas.db", dir + "/log1")) << server.Log();
    const std::string log = server.Log();
    const size_t at = log.find("export GPUAAS_TOKEN=");
    ASSERT_NE(at, std::string::npos);
    token = log.substr(at + 20, log.find('\n', at) - at - 20);
    const std::string s = " --token " + token + " --server " + server.Url();
    ASSERT_EQ(RunGpuaas("pool request moved -p demo --item H100-SXM5-80GB/full=1" + s).code, 0);
    ASSERT_EQ(RunGpuaas("pool approve moved -p demo" + s).code, 0);
    uid = nlohmann::json::parse(RunGpuaas("pool get moved -p demo -o json" + s).out)["metadata"]["uid"];
    // Backed up while the server runs.
    RunResult b = RunGpuaas("backup --db sqlite:" + dir + "/gpuaas.db " + dir + "/move.backup");
    ASSERT_EQ(b.code, 0) << b.out;
    EXPECT_EQ(server.Stop(SIGTERM), 0);
  }
  const std::string url = pg->NewDatabase("moved");
  RunResult r = RunGpuaas("restore --db '" + url + "' " + dir + "/move.backup");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("restored "), std::string::npos) << r.out;
  RunResult again = RunGpuaas("restore --db '" + url + "' " + dir + "/move.backup");
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.out.find("not empty"), std::string::npos) << again.out;
  RunResult junk = RunGpuaas("restore --db '" + pg->NewDatabase("junk") + "' " + dir + "/log1");
  EXPECT_EQ(junk.code, 1);
  EXPECT_NE(junk.out.find("not a gpuaas backup"), std::string::npos) << junk.out;

  ServerProcess moved;
  ASSERT_TRUE(moved.Start("--demo --db '" + url + "'", dir + "/log2")) << moved.Log();
  const std::string s = " --token " + token + " --server " + moved.Url();
  RunResult got = RunGpuaas("pool get moved -p demo -o json" + s);
  ASSERT_EQ(got.code, 0) << got.out << "\n(the demo's token carried over with the store)";
  EXPECT_EQ(nlohmann::json::parse(got.out)["metadata"]["uid"], uid);
  EXPECT_EQ(moved.Stop(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::testing
