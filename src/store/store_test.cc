// The store suite: every test runs against every backend (TEST_P over Backends()).
#include <sqlite3.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "common/status.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "model/fleet.h"
#include "store/cache.h"
#include "store/fenced_store.h"
#include "store/objects.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"
#include "test/postgres_server.h"

namespace gpuaas::store {
namespace {

namespace fs = std::filesystem;

std::string TempDir() {
  char tmpl[] = "/tmp/gpuaas-store-XXXXXX";
  const char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d;
}

struct Backend {
  std::string name;
  // Returns a URL for a fresh, empty store under `dir`.
  std::function<std::string(const std::string& dir)> url;
};

void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

std::vector<Backend> Backends() {
  return {{"sqlite_file", [](const std::string& dir) { return "sqlite:" + dir + "/test.db"; }},
          {"sqlite_memory", [](const std::string&) { return std::string("sqlite::memory:"); }},
          // A fresh database of this binary's throwaway server ("" where none can run: skipped).
          {"postgresql", [](const std::string&) {
             testing::PostgresServer* pg = testing::PostgresServer::Shared();
             return pg == nullptr ? std::string() : pg->NewDatabase();
           }}};
}

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    url_ = GetParam().url(dir_);
    if (url_.empty()) {
      std::string why;
      testing::PostgresServer::Shared(&why);
      GTEST_SKIP() << why;
    }
    absl::StatusOr<std::unique_ptr<Store>> s = OpenStore(url_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  absl::Status Put(const std::string& name, const std::string& data, int64_t expected) {
    return store_->Transact([&](Txn& tx) { return tx.Put({"Thing", "", name}, "u", data, expected); });
  }
  std::string dir_;
  std::string url_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreTest, CreateReadUpdateDelete) {
  EXPECT_EQ(store_->Revision(), 0);
  ASSERT_TRUE(Put("a", "{\"v\":1}", kMustNotExist).ok());
  EXPECT_EQ(store_->Revision(), 1);
  auto got = store_->Get({"Thing", "", "a"});
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->data, "{\"v\":1}");
  EXPECT_EQ((*got)->resource_version, 1);
  ASSERT_TRUE(Put("a", "{\"v\":2}", 1).ok());
  EXPECT_EQ((*store_->Get({"Thing", "", "a"}))->resource_version, 2);
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Delete({"Thing", "", "a"}, 2); }).ok());
  EXPECT_FALSE(store_->Get({"Thing", "", "a"})->has_value());
  EXPECT_EQ(store_->Revision(), 3);
}

TEST_P(StoreTest, PagesOfAKindFollowEachOtherByName) {
  // Names compare byte by byte on every backend: "a-b" < "a.b" < "ab" < "b".
  for (const char* name : {"b", "ab", "a.b", "a-b"}) ASSERT_TRUE(Put(name, "{}", kMustNotExist).ok());
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Put({"Thing", "ns", "a"}, "u", "{}", kMustNotExist); }).ok());
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Put({"Other", "", "a"}, "u", "{}", kMustNotExist); }).ok());
  std::vector<std::string> seen;
  std::string after;
  int pages = 0;
  while (true) {
    absl::StatusOr<std::vector<Record>> page = store_->ListPage("Thing", "", after, 2);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    for (const Record& r : *page) seen.push_back(r.key.name);
    if (page->size() < 2) break;
    after = page->back().key.name;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a-b", "a.b", "ab", "b"})) << "the cluster scope only, and only its kind";
  EXPECT_EQ(pages, 3);
  absl::StatusOr<std::vector<Record>> in_ns = store_->ListPage("Thing", "ns", "", 10);
  ASSERT_TRUE(in_ns.ok());
  ASSERT_EQ(in_ns->size(), 1u);
  EXPECT_EQ((*in_ns)[0].key.ns, "ns");
}

TEST_P(StoreTest, RollupsAppendLoadAndPrune) {
  ASSERT_TRUE(store_->AppendRollups({{"GPU-a|power_w", 60, 100, 400.5, 410},
                                     {"GPU-a|power_w", 60, 101, 300, 320},
                                     {"GPU-a|power_w", 3600, 1, 350, 410}})
                  .ok());
  // Written twice: the last wins.
  ASSERT_TRUE(store_->AppendRollups({{"GPU-a|power_w", 60, 101, 301, 321}}).ok());
  absl::StatusOr<std::vector<RollupRecord>> all = store_->LoadRollups(0);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].bucket, 100);
  EXPECT_EQ((*all)[1].mean, 301);
  EXPECT_EQ((*all)[2].step_s, 3600);
  EXPECT_EQ(store_->LoadRollups(101 * 60)->size(), 1u);  // minute 101; the hour starts at 3600 s
  ASSERT_TRUE(store_->PruneRollups(60, 101 * 60).ok());
  EXPECT_EQ(store_->LoadRollups(0)->size(), 2u);
  EXPECT_EQ(store_->Revision(), 0);  // history, not state: no revision, no change feed
}

TEST_P(StoreTest, StaleWritesConflict) {
  ASSERT_TRUE(Put("a", "1", kMustNotExist).ok());
  ASSERT_TRUE(Put("a", "2", 1).ok());
  absl::Status stale = Put("a", "3", 1);
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_EQ((*store_->Get({"Thing", "", "a"}))->data, "2");
  EXPECT_EQ(Put("a", "x", kMustNotExist).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Put("missing", "x", 7).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Transact([](Txn& tx) { return tx.Delete({"Thing", "", "a"}, 1); }).code(),
            absl::StatusCode::kAborted);
  EXPECT_TRUE(Put("a", "4", kAnyVersion).ok());
}

TEST_P(StoreTest, FailedTransactionChangesNothing) {
  ASSERT_TRUE(Put("a", "1", kMustNotExist).ok());
  const int64_t rev = store_->Revision();
  absl::Status s = store_->Transact([](Txn& tx) {
    EXPECT_TRUE(tx.Put({"Thing", "", "b"}, "u", "new", kMustNotExist).ok());
    EXPECT_TRUE(tx.Put({"Thing", "", "a"}, "u", "changed", kAnyVersion).ok());
    return absl::FailedPreconditionError("changed my mind");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Revision(), rev);
  EXPECT_FALSE(store_->Get({"Thing", "", "b"})->has_value());
  EXPECT_EQ((*store_->Get({"Thing", "", "a"}))->data, "1");
  EXPECT_TRUE(store_->Changes(rev, 100)->empty());
}

TEST_P(StoreTest, AnExceptionInATransactionRollsItBackAndLaterWritesWork) {
  ASSERT_TRUE(Put("a", "1", kMustNotExist).ok());
  const int64_t rev = store_->Revision();
  EXPECT_THROW((void)store_->Transact([](Txn& tx) -> absl::Status {
    EXPECT_TRUE(tx.Put({"Thing", "", "a"}, "u", "changed", kAnyVersion).ok());
    throw std::runtime_error("a callback that throws");
  }), std::runtime_error);
  EXPECT_EQ(store_->Revision(), rev);
  EXPECT_EQ((*store_->Get({"Thing", "", "a"}))->data, "1");
  ASSERT_TRUE(Put("b", "2", kMustNotExist).ok());  // the connection is not left inside a transaction
  EXPECT_EQ((*store_->Get({"Thing", "", "b"}))->data, "2");
}

TEST_P(StoreTest, TransactionWritesShareOneRevisionAndListIsSorted) {
  ASSERT_TRUE(store_->Transact([](Txn& tx) {
    EXPECT_EQ(tx.revision(), 1);
    for (const char* n : {"c", "a", "b"}) {
      if (absl::Status s = tx.Put({"Thing", "ns1", n}, "u", n, kMustNotExist); !s.ok()) return s;
    }
    return tx.Put({"Thing", "ns0", "z"}, "u", "z", kMustNotExist);
  }).ok());
  auto all = store_->List("Thing", "");
  ASSERT_TRUE(all.ok());
  std::vector<std::string> names;
  for (const Record& r : *all) {
    names.push_back(r.key.ns + "/" + r.key.name);
    EXPECT_EQ(r.resource_version, 1);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ns0/z", "ns1/a", "ns1/b", "ns1/c"}));
  EXPECT_EQ(store_->List("Thing", "ns1")->size(), 3u);
  EXPECT_TRUE(store_->List("Other", "")->empty());
  // A transaction that only reads does not move the revision.
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Get({"Thing", "ns1", "a"}).status(); }).ok());
  EXPECT_EQ(store_->Revision(), 1);
}

TEST_P(StoreTest, ChangeFeedListsEveryWriteInOrder) {
  ASSERT_TRUE(Put("a", "1", kMustNotExist).ok());
  ASSERT_TRUE(Put("a", "2", 1).ok());
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Delete({"Thing", "", "a"}, kAnyVersion); }).ok());
  auto changes = store_->Changes(0, 100);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 3u);
  EXPECT_EQ((*changes)[0].type, ChangeType::kAdded);
  EXPECT_EQ((*changes)[1].type, ChangeType::kModified);
  EXPECT_EQ((*changes)[1].record.data, "2");
  EXPECT_EQ((*changes)[2].type, ChangeType::kDeleted);
  EXPECT_EQ((*changes)[2].revision, 3);
  EXPECT_EQ(store_->Changes(1, 1)->size(), 1u);
  EXPECT_TRUE(store_->Changes(3, 100)->empty());

  EXPECT_FALSE(store_->WaitForChange(3, std::chrono::milliseconds(10)));
  std::thread writer([&] { EXPECT_TRUE(Put("b", "1", kMustNotExist).ok()); });
  EXPECT_TRUE(store_->WaitForChange(3, std::chrono::seconds(10)));
  writer.join();
}

// Regression: a transaction larger than the page of changes a watcher asks for was cut in two,
// and a watcher resuming after its revision lost the rest (the cache then missed objects).
TEST_P(StoreTest, ChangesReturnWholeTransactions) {
  ASSERT_TRUE(store_->Transact([](Txn& tx) {
    for (int i = 0; i < 20; ++i) {
      if (absl::Status s = tx.Put({"Thing", "", std::to_string(i)}, "u", "x", kMustNotExist); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }).ok());
  ASSERT_TRUE(Put("after", "y", kMustNotExist).ok());
  auto page = store_->Changes(0, 5);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->size(), 20u);
  EXPECT_EQ(page->back().revision, 1);
  EXPECT_EQ(store_->Changes(1, 5)->size(), 1u);

  // The cache, which reads the feed in pages, sees every object of a large transaction.
  ObjectCache cache(*store_);
  ASSERT_TRUE(cache.Start({"Thing"}).ok());
  ASSERT_TRUE(store_->Transact([](Txn& tx) {
    for (int i = 0; i < 6000; ++i) {
      if (absl::Status s = tx.Put({"Thing", "big", std::to_string(i)}, "u", "{}", kMustNotExist);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }).ok());
  ASSERT_TRUE(cache.WaitFor(store_->Revision(), std::chrono::seconds(30)));
  EXPECT_EQ(cache.Snapshot("Thing")->items.size(), 21u + 6000u);
  cache.Stop();
}

TEST_P(StoreTest, ConcurrentReadModifyWriteLosesNothing) {
  ASSERT_TRUE(Put("counter", "0", kMustNotExist).ok());
  constexpr int kThreads = 4, kIncrements = 50;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        // Read outside the transaction, write with the version read: a classic lost-update race
        // unless the store rejects stale writes.
        auto cur = *store_->Get({"Thing", "", "counter"});
        int v = std::stoi(cur->data);
        absl::Status s = Put("counter", std::to_string(v + 1), cur->resource_version);
        if (s.ok()) {
          ++i;
        } else {
          ASSERT_EQ(s.code(), absl::StatusCode::kAborted) << s;
          ++conflicts;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ((*store_->Get({"Thing", "", "counter"}))->data, std::to_string(kThreads * kIncrements));
}

TEST_P(StoreTest, TypedObjectsKeepMetadataHonest) {
  model::Cluster c;
  c.metadata.name = "alpha";
  c.spec.driver = "simulated";
  Time now = std::chrono::system_clock::from_time_t(1764688445);
  ASSERT_TRUE(store_->Transact([&](Txn& tx) { return CreateObject(tx, c, now); }).ok());
  EXPECT_EQ(c.metadata.generation, 1);
  EXPECT_EQ(c.metadata.resource_version, 1);
  const std::string uid = c.metadata.uid;
  // A status-only change keeps the generation; a spec change bumps it.
  c.status.nodes = 3;
  ASSERT_TRUE(store_->Transact([&](Txn& tx) { return UpdateObject(tx, c); }).ok());
  EXPECT_EQ(c.metadata.generation, 1);
  c.spec.region = "eu";
  ASSERT_TRUE(store_->Transact([&](Txn& tx) { return UpdateObject(tx, c); }).ok());
  EXPECT_EQ(c.metadata.generation, 2);
  EXPECT_EQ(c.metadata.resource_version, 3);
  // The same spec spelled another way (as another version may have written it) is the same
  // spec; the generation comes from the store, whatever the writer's copy says.
  ASSERT_TRUE(store_->Transact([&](Txn& tx) -> absl::Status {
    model::Cluster respelled = c;
    respelled.metadata.resource_version = tx.revision();
    std::string text = model::Encode(respelled);
    const size_t at = text.find("\"spec\":{");
    if (at == std::string::npos) return absl::InternalError(text);
    text.replace(at, 8, "\"spec\": {\"unknownField\": 1, ");
    return tx.Put(KeyOf<model::Cluster>("", "alpha"), c.metadata.uid, text, kAnyVersion);
  }).ok());
  c.metadata.resource_version = 4;
  c.metadata.generation = 7;
  c.status.nodes = 4;
  ASSERT_TRUE(store_->Transact([&](Txn& tx) { return UpdateObject(tx, c); }).ok());
  EXPECT_EQ(c.metadata.generation, 2);
  c.spec.region = "ap";
  ASSERT_TRUE(store_->Transact([&](Txn& tx) { return UpdateObject(tx, c); }).ok());
  EXPECT_EQ(c.metadata.generation, 3);
  EXPECT_EQ(c.metadata.resource_version, 6);
  std::optional<model::Cluster> back;
  ASSERT_TRUE(store_->Transact([&](Txn& tx) {
    auto r = GetObject<model::Cluster>(tx, "", "alpha");
    if (r.ok()) back = *r;
    return r.status();
  }).ok());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, c);
  EXPECT_EQ(back->metadata.uid, uid);
  // A writer holding an old copy gets a conflict and the stored object is unchanged.
  model::Cluster stale = c;
  stale.metadata.resource_version = 2;
  stale.spec.region = "us";
  EXPECT_EQ(store_->Transact([&](Txn& tx) { return UpdateObject(tx, stale); }).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ((*store_->Get({"Cluster", "", "alpha"}))->data, model::Encode(c));
}

TEST_P(StoreTest, CacheFollowsTheStore) {
  ASSERT_TRUE(Put("b", "{\"metadata\":{\"name\":\"b\",\"labels\":{\"x\":\"1\"}}}", kMustNotExist).ok());
  ObjectCache cache(*store_);
  ASSERT_TRUE(cache.Start({"Thing"}).ok());
  auto snap = cache.Snapshot("Thing");
  ASSERT_EQ(snap->items.size(), 1u);
  EXPECT_EQ(snap->items[0]->labels.at("x"), "1");
  ASSERT_TRUE(Put("a", "{\"metadata\":{\"name\":\"a\"}}", kMustNotExist).ok());
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Delete({"Thing", "", "b"}, kAnyVersion); }).ok());
  ASSERT_TRUE(cache.WaitFor(store_->Revision(), std::chrono::seconds(10)));
  auto snap2 = cache.Snapshot("Thing");
  ASSERT_EQ(snap2->items.size(), 1u);
  EXPECT_EQ(snap2->items[0]->name, "a");
  EXPECT_EQ(snap->items.size(), 1u) << "old snapshots are immutable";
  EXPECT_EQ(cache.Get("Thing", "", "a")->resource_version, 2);
  EXPECT_EQ(cache.Get("Thing", "", "b"), nullptr);
  cache.Stop();
}

// One holder at a time; a renewal keeps the epoch, a new holder gets the next one; a release
// frees the lease at once; an expired lease goes to the next taker.
TEST_P(StoreTest, LeasesHaveOneHolderAndAnEpochPerGrant) {
  using std::chrono::milliseconds;
  absl::StatusOr<Lease> none = store_->GetLease("ctl");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->holder, "");
  EXPECT_EQ(none->epoch, 0);
  absl::StatusOr<Lease> a = store_->TryAcquireLease("ctl", "a", "http://a:8080", milliseconds(60000));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->holder, "a");
  EXPECT_EQ(a->address, "http://a:8080");
  EXPECT_EQ(a->epoch, 1);
  EXPECT_GT(a->remaining, milliseconds(55000));
  absl::StatusOr<Lease> b = store_->TryAcquireLease("ctl", "b", "http://b:8080", milliseconds(60000));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->holder, "a") << "held: b does not get it";
  EXPECT_EQ(b->epoch, 1);
  absl::StatusOr<Lease> renewed = store_->TryAcquireLease("ctl", "a", "http://a:8080", milliseconds(60000));
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->epoch, 1) << "a renewal keeps the epoch";
  EXPECT_TRUE(store_->ReleaseLease("ctl", "b").ok());
  EXPECT_EQ(store_->GetLease("ctl")->holder, "a") << "only the holder releases";
  ASSERT_TRUE(store_->ReleaseLease("ctl", "a").ok());
  EXPECT_EQ(store_->GetLease("ctl")->holder, "");
  b = store_->TryAcquireLease("ctl", "b", "http://b:8080", milliseconds(300));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->holder, "b") << "released: the next taker gets it at once";
  EXPECT_EQ(b->epoch, 2);
  // Expired: a takes it over, epoch 3.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    a = store_->TryAcquireLease("ctl", "a", "http://a:8080", milliseconds(60000));
    ASSERT_TRUE(a.ok());
    if (a->holder == "a") break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(a->holder, "a");
  EXPECT_EQ(a->epoch, 3);
  EXPECT_EQ(store_->GetLease("other")->epoch, 0) << "leases are independent";
}

// A write fenced by a lease commits while the lease is held in that epoch, and is refused whole
// (nothing of it lands, the revision stays) once another holds it or it has expired.
TEST_P(StoreTest, FencedWritesAreRefusedWholeAfterATakeover) {
  using std::chrono::milliseconds;
  ASSERT_TRUE(store_->TryAcquireLease("ctl", "a", "", milliseconds(400)).ok());
  std::optional<FenceToken> token = FenceToken{"ctl", "a", 1};
  FencedStore fenced(*store_, [&] { return token; });
  ASSERT_TRUE(fenced.Transact([](Txn& tx) { return tx.Put({"Thing", "", "x"}, "u", "1", kMustNotExist); }).ok());
  EXPECT_EQ(store_->Revision(), 1);
  // a's lease runs out; b takes over.
  std::this_thread::sleep_for(milliseconds(450));
  absl::Status expired = fenced.Transact([](Txn& tx) { return tx.Put({"Thing", "", "y"}, "u", "1", kMustNotExist); });
  EXPECT_TRUE(absl::IsFailedPrecondition(expired)) << expired;
  EXPECT_NE(std::string(expired.message()).find("has expired"), std::string::npos) << expired;
  absl::StatusOr<Lease> b = store_->TryAcquireLease("ctl", "b", "", milliseconds(60000));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->holder, "b");
  bool ran = false;
  absl::Status late = fenced.Transact([&](Txn& tx) {
    ran = true;
    return tx.Put({"Thing", "", "x"}, "u", "2", kAnyVersion);
  });
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_NE(std::string(late.message()).find("held by b (epoch 2), not by a (epoch 1)"), std::string::npos) << late;
  EXPECT_FALSE(ran) << "the check comes before the write";
  EXPECT_EQ(store_->Revision(), 1);
  EXPECT_EQ((*store_->Get({"Thing", "", "x"}))->data, "1");
  EXPECT_FALSE(store_->Get({"Thing", "", "y"})->has_value());
  token.reset();
  EXPECT_TRUE(absl::IsFailedPrecondition(fenced.Transact([](Txn&) { return absl::OkStatus(); })));
  EXPECT_EQ(fenced.refused(), 3u);
  // b's fenced writes pass; a's own lease never comes back in epoch 1.
  FencedStore as_b(*store_, [] { return std::optional<FenceToken>(FenceToken{"ctl", "b", 2}); });
  EXPECT_TRUE(as_b.Transact([](Txn& tx) { return tx.Put({"Thing", "", "x"}, "u", "3", kAnyVersion); }).ok());
  EXPECT_EQ(store_->Revision(), 2);
}

// The holder's renewal does not wait for its own fenced writes in flight (a leader whose
// controllers write all the time must still renew), while they keep passing the fence.
TEST_P(StoreTest, ARenewalDoesNotWaitForTheHoldersWritesInFlight) {
  using std::chrono::milliseconds;
  ASSERT_EQ(store_->TryAcquireLease("ctl", "a", "", milliseconds(60000))->holder, "a");
  FencedStore fenced(*store_, [] { return std::optional<FenceToken>(FenceToken{"ctl", "a", 1}); });
  std::atomic<bool> checked{false};
  std::thread writer([&] {
    EXPECT_TRUE(fenced.Transact([&](Txn& tx) {
      checked = true;
      std::this_thread::sleep_for(milliseconds(800));
      return tx.Put({"Thing", "", "slow"}, "u", "{}", kMustNotExist);
    }).ok());
  });
  while (!checked) std::this_thread::sleep_for(milliseconds(5));
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Lease> renewed = store_->TryAcquireLease("ctl", "a", "", milliseconds(60000));
  const auto took = std::chrono::steady_clock::now() - start;
  writer.join();
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->holder, "a");
  EXPECT_EQ(renewed->epoch, 1);
  EXPECT_LT(took, milliseconds(400)) << "the renewal waited for the write in flight";
  EXPECT_TRUE(store_->Get({"Thing", "", "slow"})->has_value());
}

// A snapshot taken from one store fills an empty one (of any backend) with the same objects at
// the same resourceVersions and revision; its feed starts there; a store that holds anything
// refuses it unchanged.
TEST_P(StoreTest, ASnapshotRestoresIntoAnEmptyStoreOfEitherBackend) {
  ASSERT_TRUE(Put("a", "{\"v\":1}", kMustNotExist).ok());
  ASSERT_TRUE(Put("b", "{\"v\":2}", kMustNotExist).ok());
  ASSERT_TRUE(Put("a", "{\"v\":3}", 1).ok());
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Delete({"Thing", "", "b"}, kAnyVersion); }).ok());
  ASSERT_TRUE(store_->Transact([](Txn& tx) { return tx.Put({"Other", "ns", "c"}, "u2", "{}", kMustNotExist); }).ok());
  ASSERT_TRUE(store_->AppendRollups({{"gpu-1|power", 60, 100, 1.5, 2.5}}).ok());
  absl::StatusOr<Snapshot> snap = store_->ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->revision, 5);
  ASSERT_EQ(snap->records.size(), 2u);
  EXPECT_EQ(snap->records[0].key.kind, "Other");
  EXPECT_EQ(snap->records[1].data, "{\"v\":3}");
  EXPECT_EQ(snap->records[1].resource_version, 3);
  ASSERT_EQ(snap->rollups.size(), 1u);

  for (const Backend& b : Backends()) {
    SCOPED_TRACE(b.name);
    const std::string url = b.url(dir_ + "/restored-" + b.name);
    if (url.empty()) continue;  // no PostgreSQL here
    fs::create_directories(dir_ + "/restored-" + b.name);
    absl::StatusOr<std::unique_ptr<Store>> to = OpenStore(url);
    ASSERT_TRUE(to.ok()) << to.status();
    ASSERT_TRUE((*to)->LoadSnapshot(*snap).ok());
    EXPECT_EQ((*to)->Revision(), 5);
    absl::StatusOr<std::optional<Record>> a = (*to)->Get({"Thing", "", "a"});
    ASSERT_TRUE(a.ok() && a->has_value());
    EXPECT_EQ((*a)->resource_version, 3);
    EXPECT_EQ((*a)->data, "{\"v\":3}");
    EXPECT_EQ((*a)->uid, "u");
    EXPECT_FALSE((*to)->Get({"Thing", "", "b"})->has_value());
    EXPECT_EQ((*to)->LoadRollups(0)->size(), 1u);
    EXPECT_EQ((*to)->Changes(0, 10).status().code(), absl::StatusCode::kOutOfRange) << "the feed starts at the snapshot";
    EXPECT_TRUE((*to)->Changes(5, 10)->empty());
    // Writes go on from there, and a stale resourceVersion still conflicts.
    EXPECT_TRUE(absl::IsAborted((*to)->Transact([](Txn& tx) { return tx.Put({"Thing", "", "a"}, "u", "{}", 1); })));
    ASSERT_TRUE((*to)->Transact([](Txn& tx) { return tx.Put({"Thing", "", "a"}, "u", "{}", 3); }).ok());
    EXPECT_EQ((*to)->Revision(), 6);
    // Not empty any more: refused, nothing changed.
    absl::Status again = (*to)->LoadSnapshot(*snap);
    EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
    EXPECT_NE(std::string(again.message()).find("not empty"), std::string::npos);
    EXPECT_EQ((*to)->Revision(), 6);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::ValuesIn(Backends()),
                         [](const auto& p) { return p.param.name; });

// --- SQLite specifics: migrations, compaction, crash safety -------------------------------

// Several stores on one database: gpuaas replicas on one PostgreSQL.
class SharedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    pg_ = testing::PostgresServer::Shared(&why);
    if (pg_ == nullptr) GTEST_SKIP() << why;
    url_ = pg_->NewDatabase();
    ASSERT_FALSE(url_.empty());
  }
  std::unique_ptr<Store> Open() {
    absl::StatusOr<std::unique_ptr<Store>> s = OpenStore(url_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  testing::PostgresServer* pg_ = nullptr;
  std::string url_;
};

// A write through one replica is read at once through another, a stale write through the other
// conflicts, and a waiter on the other wakes for it.
TEST_F(SharedStoreTest, ReplicasSeeEachOthersWritesAndWaitForThem) {
  std::unique_ptr<Store> a = Open(), b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Transact([](Txn& tx) { return tx.Put({"Thing", "", "x"}, "u", "{\"v\":1}", kMustNotExist); }).ok());
  EXPECT_EQ(b->Revision(), 1);
  ASSERT_TRUE(b->Get({"Thing", "", "x"})->has_value());
  ASSERT_TRUE(b->Transact([](Txn& tx) { return tx.Put({"Thing", "", "x"}, "u", "{\"v\":2}", 1); }).ok());
  EXPECT_TRUE(absl::IsAborted(a->Transact([](Txn& tx) { return tx.Put({"Thing", "", "x"}, "u", "{\"v\":3}", 1); })))
      << "a stale write through the other replica conflicts";
  EXPECT_TRUE(absl::IsAlreadyExists(
      a->Transact([](Txn& tx) { return tx.Put({"Thing", "", "x"}, "u", "{}", kMustNotExist); })));
  // b waits past revision 2; a writes revision 3.
  std::atomic<bool> woke{false};
  std::thread waiter([&] { woke = b->WaitForChange(2, std::chrono::seconds(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(a->Transact([](Txn& tx) { return tx.Put({"Thing", "", "y"}, "u", "{}", kMustNotExist); }).ok());
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500)) << "woken by the notification";
  EXPECT_FALSE(b->WaitForChange(3, std::chrono::milliseconds(50)));
}

// Writers on two replicas at once: revisions are 1, 2, 3, ... with no gap, every transaction's
// writes share one revision and reach a follower whole and in order, and nothing is lost.
TEST_F(SharedStoreTest, RevisionsFollowCommitOrderAcrossReplicasWithNoGap) {
  std::unique_ptr<Store> a = Open(), b = Open(), follower = Open();
  ASSERT_TRUE(a && b && follower);
  ASSERT_TRUE(a->Transact([](Txn& tx) { return tx.Put({"Counter", "", "c"}, "u", "0", kMustNotExist); }).ok());
  constexpr int kPerThread = 40;
  std::atomic<int> done{0};
  auto writer = [&](Store* s, int id) {
    for (int i = 0; i < kPerThread; ++i) {
      // A read-modify-write of the counter, and an object of its own, in one transaction.
      while (true) {
        absl::Status st = s->Transact([&](Txn& tx) -> absl::Status {
          ASSIGN_OR_RETURN(std::optional<Record> c, tx.Get({"Counter", "", "c"}));
          RETURN_IF_ERROR(tx.Put({"Counter", "", "c"}, "u", std::to_string(std::stoi(c->data) + 1), c->resource_version));
          return tx.Put({"Thing", "", fmt::format("w{}-{}", id, i)}, "u", "{}", kMustNotExist);
        });
        if (st.ok()) break;
        ASSERT_TRUE(absl::IsAborted(st)) << st;
      }
    }
    ++done;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(writer, t % 2 == 0 ? a.get() : b.get(), t);
  // The follower reads the feed while they write.
  std::vector<Change> seen;
  int64_t after = 0;
  while (done < 4 || after < follower->Revision()) {
    absl::StatusOr<std::vector<Change>> page = follower->Changes(after, 7);
    ASSERT_TRUE(page.ok()) << page.status();
    for (Change& c : *page) {
      after = c.revision;
      seen.push_back(std::move(c));
    }
    if (page->empty()) follower->WaitForChange(after, std::chrono::milliseconds(200));
  }
  for (std::thread& t : threads) t.join();
  const int64_t last = 1 + 4 * kPerThread;
  EXPECT_EQ(follower->Revision(), last);
  ASSERT_EQ(seen.size(), static_cast<size_t>(1 + 2 * 4 * kPerThread));
  int64_t expect = 1;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (i > 0 && seen[i].revision != seen[i - 1].revision) ++expect;
    ASSERT_EQ(seen[i].revision, expect) << "revision " << seen[i].revision << " at change " << i << ": a gap or a reorder";
  }
  EXPECT_EQ(expect, last);
  EXPECT_EQ((*a->Get({"Counter", "", "c"}))->data, std::to_string(4 * kPerThread)) << "no lost update";
}

// A database another gpuaas migrated further is refused with a clear message, changing nothing;
// a database that cannot be reached is Unavailable.
TEST_F(SharedStoreTest, ANewerSchemaIsRefusedAndAnUnreachableDatabaseIsUnavailable) {
  { ASSERT_TRUE(Open()); }
  const std::string conninfo = url_;
  PGconn* c = PQconnectdb(conninfo.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK);
  PQclear(PQexec(c, "INSERT INTO gpuaas_schema (version) VALUES (99)"));
  PQfinish(c);
  absl::StatusOr<std::unique_ptr<Store>> s = OpenStore(url_);
  ASSERT_TRUE(absl::IsFailedPrecondition(s.status())) << s.status();
  EXPECT_NE(std::string(s.status().message()).find("schema version 99, newer than this gpuaas supports"),
            std::string::npos);
  absl::StatusOr<std::unique_ptr<Store>> none = OpenStore("postgresql:///nowhere?host=/nonexistent-folder&port=5432");
  EXPECT_TRUE(absl::IsUnavailable(none.status())) << none.status();
}

// Two replicas race for a lease: exactly one wins each round. A takeover waits for a fenced
// write of the old holder that is in flight (it holds the lease row), and every write of the old
// holder after the takeover is refused.
TEST_F(SharedStoreTest, OneReplicaWinsALeaseAndATakeoverWaitsForAFencedWriteInFlight) {
  using std::chrono::milliseconds;
  std::unique_ptr<Store> a = Open(), b = Open();
  ASSERT_TRUE(a && b);
  std::atomic<int> winners{0};
  std::thread ta([&] {
    if (a->TryAcquireLease("ctl", "a", "", milliseconds(60000))->holder == "a") ++winners;
  });
  std::thread tb([&] {
    if (b->TryAcquireLease("ctl", "b", "", milliseconds(60000))->holder == "b") ++winners;
  });
  ta.join();
  tb.join();
  EXPECT_EQ(winners.load(), 1);
  const Lease held = *a->GetLease("ctl");
  Store& holder = held.holder == "a" ? *a : *b;
  Store& other = held.holder == "a" ? *b : *a;
  const std::string other_name = held.holder == "a" ? "b" : "a";
  ASSERT_TRUE(holder.ReleaseLease("ctl", held.holder).ok());
  ASSERT_TRUE(holder.TryAcquireLease("ctl", held.holder, "", milliseconds(300)).ok());
  FencedStore fenced(holder, [&] { return std::optional<FenceToken>(FenceToken{"ctl", held.holder, 2}); });
  // The old holder's write passes the check and lingers; the takeover waits for it.
  std::atomic<bool> checked{false}, taken{false};
  std::thread writer([&] {
    EXPECT_TRUE(fenced.Transact([&](Txn& tx) {
      checked = true;
      std::this_thread::sleep_for(milliseconds(700));
      EXPECT_FALSE(taken.load()) << "the takeover waited for the write in flight";
      return tx.Put({"Thing", "", "in-flight"}, "u", "{}", kMustNotExist);
    }).ok());
  });
  while (!checked) std::this_thread::sleep_for(milliseconds(5));
  absl::StatusOr<Lease> took = other.TryAcquireLease("ctl", other_name, "", milliseconds(60000));
  taken = true;
  writer.join();
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_EQ(took->holder, other_name);
  EXPECT_EQ(took->epoch, 3);
  EXPECT_TRUE(other.Get({"Thing", "", "in-flight"})->has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(fenced.Transact([](Txn& tx) {
    return tx.Put({"Thing", "", "late"}, "u", "{}", kMustNotExist);
  })));
  EXPECT_FALSE(other.Get({"Thing", "", "late"})->has_value());
}

TEST_F(SharedStoreTest, CompactionTrimsTheFeedForEveryReplica) {
  PostgresOptions o;
  o.conninfo = url_;
  o.change_retention = 500;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenPostgresStore(o);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE((*store)->Transact([&](Txn& tx) {
      return tx.Put({"Thing", "", "a"}, "u", std::to_string(i), kAnyVersion);
    }).ok());
  }
  std::unique_ptr<Store> other = Open();
  EXPECT_EQ(other->Changes(100, 10).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(other->Transact([](Txn& tx) { return tx.ChangedKeys("Thing", 100).status(); }).code(),
            absl::StatusCode::kOutOfRange);
  auto recent = other->Changes(900, 1000);
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ(recent->size(), 100u);
}

TEST(Store, UrlsAreLoggedWithoutPasswords) {
  EXPECT_EQ(RedactedUrl("postgresql://gpuaas:s3cret@db.example:5432/gpuaas?sslmode=verify-full"),
            "postgresql://gpuaas:***@db.example:5432/gpuaas?sslmode=verify-full");
  EXPECT_EQ(RedactedUrl("postgresql://db/gpuaas?user=g&password=s3cret&sslmode=require"),
            "postgresql://db/gpuaas?user=g&password=***&sslmode=require");
  EXPECT_EQ(RedactedUrl("postgresql://gpuaas@db:5432/gpuaas"), "postgresql://gpuaas@db:5432/gpuaas");
  EXPECT_EQ(RedactedUrl("sqlite:gpuaas-demo.db"), "sqlite:gpuaas-demo.db");
}

TEST(SqliteStore, MigratesAVersion1FileInPlace) {
  std::string dir = TempDir();
  std::string path = dir + "/old.db";
  {
    // A database as the first release wrote it: schema version 1, objects only.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* v1 = R"sql(
      CREATE TABLE objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
        uid TEXT NOT NULL, resource_version INTEGER NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (kind, namespace, name)) WITHOUT ROWID;
      INSERT INTO objects VALUES ('Thing', '', 'a', 'u1', 5, 'old-a');
      INSERT INTO objects VALUES ('Thing', '', 'b', 'u2', 9, 'old-b');
      PRAGMA user_version = 1;)sql";
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = OpenStore("sqlite:" + path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(), kSqliteSchemaVersion);
  EXPECT_EQ((*store)->Revision(), 9);
  EXPECT_EQ((*(*store)->Get({"Thing", "", "a"}))->data, "old-a");
  ASSERT_TRUE((*store)->Transact([](Txn& tx) { return tx.Put({"Thing", "", "a"}, "u1", "new", 5); }).ok());
  EXPECT_EQ((*(*store)->Get({"Thing", "", "a"}))->resource_version, 10);
  // Changes before the migration are not in the feed; asking for them says so.
  EXPECT_EQ((*store)->Changes(0, 10).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*store)->Changes(9, 10)->size(), 1u);
  store->reset();
  // Reopening a current file runs no migration and keeps everything.
  auto again = OpenStore("sqlite:" + path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Revision(), 10);
  fs::remove_all(dir);
}

TEST(SqliteStore, MigratesVersion3TablesToRowidKeepingTheFeed) {
  std::string dir = TempDir();
  std::string path = dir + "/v3.db";
  {
    // Objects and changes as schema version 3 had them: WITHOUT ROWID.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* v3 = R"sql(
      CREATE TABLE objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
        uid TEXT NOT NULL, resource_version INTEGER NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (kind, namespace, name)) WITHOUT ROWID;
      CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
      INSERT INTO meta VALUES ('revision', 7), ('compacted', 5);
      CREATE TABLE changes (revision INTEGER NOT NULL, seq INTEGER NOT NULL, type INTEGER NOT NULL,
        kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL,
        data TEXT NOT NULL, PRIMARY KEY (revision, seq)) WITHOUT ROWID;
      CREATE TABLE rollups (series TEXT NOT NULL, step INTEGER NOT NULL, bucket INTEGER NOT NULL,
        mean REAL NOT NULL, max REAL NOT NULL, PRIMARY KEY (series, step, bucket)) WITHOUT ROWID;
      INSERT INTO objects VALUES ('Thing', 'ns', 'a', 'u1', 7, 'a7');
      INSERT INTO changes VALUES (6, 0, 0, 'Thing', 'ns', 'a', 'u1', 'a6');
      INSERT INTO changes VALUES (7, 0, 1, 'Thing', 'ns', 'a', 'u1', 'a7');
      PRAGMA user_version = 3;)sql";
    ASSERT_EQ(sqlite3_exec(db, v3, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  {
    auto store = OpenStore("sqlite:" + path);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->Revision(), 7);
    EXPECT_EQ((*(*store)->Get({"Thing", "ns", "a"}))->data, "a7");
    absl::StatusOr<std::vector<Change>> feed = (*store)->Changes(5, 10);
    ASSERT_TRUE(feed.ok()) << feed.status();
    ASSERT_EQ(feed->size(), 2u);
    EXPECT_EQ((*feed)[1].record.data, "a7");
    EXPECT_EQ((*feed)[1].type, ChangeType::kModified);
    // Upserts still find the key.
    ASSERT_TRUE((*store)->Transact([](Txn& tx) { return tx.Put({"Thing", "ns", "a"}, "u1", "a8", 7); }).ok());
    EXPECT_EQ((*store)->Transact([](Txn& tx) { return tx.Put({"Thing", "ns", "a"}, "u1", "x", kMustNotExist); }).code(),
              absl::StatusCode::kAlreadyExists);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT group_concat(sql, ';') FROM sqlite_master WHERE name IN ('objects', 'changes')",
                               -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  const std::string sql = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  EXPECT_EQ(sql.find("WITHOUT ROWID"), std::string::npos) << sql;
  sqlite3_finalize(st);
  sqlite3_close(db);
  fs::remove_all(dir);
}

TEST(SqliteStore, RefusesANewerSchema) {
  std::string dir = TempDir();
  std::string path = dir + "/new.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore("sqlite:" + path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().ToString().find("newer"), std::string::npos);
  fs::remove_all(dir);
}

TEST(SqliteStore, UnknownUrlsAreRefused) {
  EXPECT_EQ(OpenStore("mysql://x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("sqlite:").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(OpenStore("sqlite:/nonexistent-dir/x/y.db").ok());
}

TEST(SqliteStore, CompactionTrimsTheFeed) {
  auto store = OpenSqliteStore({":memory:", 500});
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE((*store)->Transact([&](Txn& tx) {
      return tx.Put({"Thing", "", "a"}, "u", std::to_string(i), kAnyVersion);
    }).ok());
  }
  EXPECT_EQ((*store)->Changes(100, 10).status().code(), absl::StatusCode::kOutOfRange);
  auto recent = (*store)->Changes(900, 1000);
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ(recent->size(), 100u);
}

// A writer process commits one record per transaction and reports each commit on a pipe only
// after Transact returned. SIGKILL at an arbitrary moment must leave a database that opens and
// holds every reported record.
TEST(SqliteStore, SurvivesSigkillOfAWriter) {
  std::string dir = TempDir();
  std::string path = dir + "/crash.db";
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      auto store = OpenStore("sqlite:" + path);
      if (!store.ok()) _exit(2);
      for (int i = 0;; ++i) {
        std::string name = "r" + std::to_string(round) + "-" + std::to_string(i);
        absl::Status s = (*store)->Transact([&](Txn& tx) {
          return tx.Put({"Thing", "", name}, "u", std::string(200, 'x'), kMustNotExist);
        });
        if (!s.ok()) _exit(3);
        if (write(fds[1], &i, sizeof i) != sizeof i) _exit(4);
      }
    }
    close(fds[1]);
    int acked = -1, v = 0;
    // Let it commit a varying number of writes, then kill it mid-stream.
    const int target = 20 + round * 37;
    while (acked < target && read(fds[0], &v, sizeof v) == sizeof v) acked = v;
    kill(pid, SIGKILL);
    while (read(fds[0], &v, sizeof v) == sizeof v) acked = v;  // drain acks sent before death
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited with " << WEXITSTATUS(status);

    auto store = OpenStore("sqlite:" + path);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i <= acked; ++i) {
      std::string name = "r" + std::to_string(round) + "-" + std::to_string(i);
      auto r = (*store)->Get({"Thing", "", name});
      ASSERT_TRUE(r.ok() && r->has_value()) << "acknowledged write lost: " << name;
    }
    // The revision counter and the feed agree with the objects after recovery.
    auto all = (*store)->List("Thing", "");
    ASSERT_TRUE(all.ok());
    int64_t max_rv = 0;
    for (const Record& r : *all) max_rv = std::max(max_rv, r.resource_version);
    EXPECT_EQ((*store)->Revision(), max_rv);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuaas::store
