// The controller runtime: work queue semantics, informers over a real store and cache, and the
// manager's deterministic and threaded modes. No sleeps: time is a FakeClock, and the threaded
// test waits on conditions.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "controller/runtime/informer.h"
#include "controller/runtime/leader_election.h"
#include "controller/runtime/manager.h"
#include "controller/runtime/workqueue.h"
#include "gtest/gtest.h"
#include "model/pool.h"
#include "store/objects.h"
#include "store/sqlite_store.h"

namespace gpuaas::controller::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

FakeClock NewClock() { return FakeClock(std::chrono::system_clock::from_time_t(1764688445)); }

TEST(WorkQueue, DeduplicatesAndHandsAKeyToOneWorkerAtATime) {
  FakeClock clock = NewClock();
  WorkQueue q("test", clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.TryGet(), "a");
  q.Add("a");  // while processing: handed out again only after Done
  EXPECT_EQ(q.TryGet(), "b");
  EXPECT_EQ(q.TryGet(), std::nullopt);
  q.Done("a");
  EXPECT_EQ(q.TryGet(), "a");
  q.Done("a");
  q.Done("b");
  EXPECT_EQ(q.TryGet(), std::nullopt);
  EXPECT_EQ(q.adds_total(), 4u);
}

TEST(WorkQueue, AddAfterWaitsForTheClockAndTheEarliestWins) {
  FakeClock clock = NewClock();
  WorkQueue q("test", clock);
  q.AddAfter("a", seconds(10));
  q.AddAfter("a", seconds(3));
  q.AddAfter("a", seconds(20));
  EXPECT_EQ(q.TryGet(), std::nullopt);
  EXPECT_EQ(q.Waiting(), 1u);
  clock.Advance(seconds(2));
  EXPECT_EQ(q.TryGet(), std::nullopt);
  clock.Advance(seconds(1));
  EXPECT_EQ(q.TryGet(), "a");
  q.Done("a");
  EXPECT_EQ(q.Waiting(), 0u);
  // A plain Add beats a pending delay.
  q.AddAfter("b", seconds(60));
  q.Add("b");
  EXPECT_EQ(q.TryGet(), "b");
  q.Done("b");
  clock.Advance(seconds(61));
  EXPECT_EQ(q.TryGet(), std::nullopt);
}

TEST(WorkQueue, RateLimitedBackoffDoublesUntilForgotten) {
  FakeClock clock = NewClock();
  WorkQueue q("test", clock, BackoffPolicy{milliseconds(100), seconds(1)});
  const std::vector<int> expect_ms = {100, 200, 400, 800, 1000, 1000};
  for (int want : expect_ms) {
    q.AddRateLimited("k");
    clock.Advance(milliseconds(want - 1));
    EXPECT_EQ(q.TryGet(), std::nullopt) << want;
    clock.Advance(milliseconds(1));
    ASSERT_EQ(q.TryGet(), "k") << want;
    q.Done("k");
  }
  EXPECT_EQ(q.NumRequeues("k"), 6);
  EXPECT_EQ(q.retries_total(), 6u);
  q.Forget("k");
  EXPECT_EQ(q.NumRequeues("k"), 0);
  q.AddRateLimited("k");
  clock.Advance(milliseconds(100));
  EXPECT_EQ(q.TryGet(), "k");
}

TEST(WorkQueue, ShutDownWakesABlockedGet) {
  WorkQueue q("test", RealClock::Get());
  std::optional<std::string> got = "unset";
  std::thread t([&] { got = q.Get(); });
  q.ShutDown();
  t.join();
  EXPECT_EQ(got, std::nullopt);
  q.Add("late");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueue, BlockingGetReturnsADelayedKeyOnceDue) {
  WorkQueue q("test", RealClock::Get());
  const auto start = std::chrono::steady_clock::now();  // (before the key is added: it is due from then)
  q.AddAfter("soon", milliseconds(20));
  EXPECT_EQ(q.Get(), "soon");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(19));
}

model::GpuPool Pool(const std::string& ns, const std::string& name, const std::string& team) {
  model::GpuPool p;
  p.metadata.ns = ns;
  p.metadata.name = name;
  p.metadata.labels = {{"team", team}};
  p.spec.items = {{"H200-SXM-141GB", "full", 1}};
  return p;
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    ASSERT_TRUE(cache_->Load({std::string(model::GpuPool::kKind)}).ok());
  }
  void Create(model::GpuPool p) {
    ASSERT_TRUE(store_->Transact([&](store::Txn& tx) { return store::CreateObject(tx, p, clock_.Now()); }).ok());
  }
  FakeClock clock_ = NewClock();
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::ObjectCache> cache_;
};

TEST_F(RuntimeTest, InformerDecodesIndexesAndTellsHandlers) {
  Create(Pool("a", "one", "red"));
  ASSERT_TRUE(cache_->SyncNow().ok());
  InformerSet set(*cache_);
  Informer<model::GpuPool>& pools = set.For<model::GpuPool>();
  pools.AddIndex("team", [](const model::GpuPool& p) { return std::vector<std::string>{p.metadata.labels.at("team")}; });
  // Two values, one that every pool shares: an update moves only the value that changed.
  pools.AddIndex("both", [](const model::GpuPool& p) {
    return std::vector<std::string>{"all", p.metadata.labels.at("team")};
  });
  std::vector<std::string> seen;
  pools.OnChange([&](const model::GpuPool* before, const model::GpuPool* after) {
    seen.push_back(fmt::format("{}->{}", before ? before->metadata.labels.at("team") : "-",
                               after ? after->metadata.labels.at("team") : "-"));
  });
  set.Start();
  EXPECT_EQ(seen, std::vector<std::string>{"-->red"});  // existing objects arrive as added
  Create(Pool("b", "two", "blue"));
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::GpuPool> p, store::GetObject<model::GpuPool>(tx, "a", "one"));
    p->metadata.labels["team"] = "blue";
    return store::UpdateObject(tx, *p);
  }).ok());
  ASSERT_TRUE(cache_->SyncNow().ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"-->red", "-->blue", "red->blue"}));
  EXPECT_EQ(pools.ByIndex("team", "blue").size(), 2u);
  EXPECT_TRUE(pools.ByIndex("team", "red").empty());
  EXPECT_EQ(pools.ByIndex("both", "all").size(), 2u);
  EXPECT_EQ(pools.ByIndex("both", "blue").size(), 2u);
  EXPECT_EQ(pools.IndexValues("both"), (std::vector<std::string>{"all", "blue"}));
  ASSERT_NE(pools.Get("a/one"), nullptr);
  EXPECT_EQ(pools.Get("a", "one")->spec.items[0].model, "H200-SXM-141GB");
  EXPECT_EQ(pools.SyncedRevision(), store_->Revision());

  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) { return store::DeleteObject<model::GpuPool>(tx, "b", "two"); }).ok());
  ASSERT_TRUE(cache_->SyncNow().ok());
  EXPECT_EQ(seen.back(), "blue->-");
  EXPECT_EQ(pools.Size(), 1u);
  EXPECT_EQ(pools.IndexValues("team"), std::vector<std::string>{"blue"});
  EXPECT_EQ(pools.ByIndex("both", "all").size(), 1u);
  // An update that keeps every value keeps the object where it is.
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::GpuPool> p, store::GetObject<model::GpuPool>(tx, "a", "one"));
    p->spec.items[0].count = 2;
    return store::UpdateObject(tx, *p);
  }).ok());
  ASSERT_TRUE(cache_->SyncNow().ok());
  EXPECT_EQ(pools.ByIndex("both", "all").size(), 1u);
  EXPECT_EQ(pools.ByIndex("team", "blue").size(), 1u);
  EXPECT_EQ(pools.Get("a", "one")->spec.items[0].count, 2);
}

// Counts reconciles per key; fails a key a set number of times; can ask to be requeued.
class Recorder : public Reconciler {
 public:
  absl::StatusOr<Result> Reconcile(const std::string& key) override {
    ++calls[key];
    if (fail[key] > 0) {
      --fail[key];
      return absl::AbortedError("conflict");
    }
    if (auto it = every.find(key); it != every.end()) return Result::After(it->second);
    return Result::Done();
  }
  std::map<std::string, int> calls;
  std::map<std::string, int> fail;
  std::map<std::string, Duration> every;
};

TEST_F(RuntimeTest, ManagerRunsKeysFromEventsUntilIdleWithBackoffAndRequeues) {
  Create(Pool("a", "one", "red"));
  Manager m(clock_, *cache_);
  Recorder r;
  WorkQueue& q = m.Add("recorder", r, 1, BackoffPolicy{seconds(1), seconds(8)});
  m.informers().For<model::GpuPool>().OnChange([&q](const model::GpuPool* b, const model::GpuPool* a) {
    const model::GpuPool& p = a ? *a : *b;
    q.Add(ObjectKey(p.metadata.ns, p.metadata.name));
  });
  r.fail["a/one"] = 2;
  r.every["tick"] = seconds(30);
  q.Add("tick");
  EXPECT_EQ(m.RunUntilIdle(), 2);  // a/one fails once, tick runs
  EXPECT_EQ(r.calls["a/one"], 1);
  clock_.Advance(seconds(1));
  EXPECT_EQ(m.RunUntilIdle(), 1);  // the second failure: now 2 s of backoff
  clock_.Advance(seconds(1));
  EXPECT_EQ(m.RunUntilIdle(), 0);
  clock_.Advance(seconds(1));
  EXPECT_EQ(m.RunUntilIdle(), 1);
  EXPECT_EQ(r.calls["a/one"], 3);
  EXPECT_EQ(q.NumRequeues("a/one"), 0);  // forgotten after success

  Create(Pool("b", "two", "blue"));  // a change reaches the queue through the informer
  EXPECT_EQ(m.RunUntilIdle(), 1);
  EXPECT_EQ(r.calls["b/two"], 1);
  clock_.Advance(seconds(30));
  EXPECT_EQ(m.RunUntilIdle(), 1);
  EXPECT_EQ(r.calls["tick"], 2);

  std::string metrics;
  m.AppendMetrics(metrics);
  EXPECT_NE(metrics.find("controller_runtime_reconcile_total{controller=\"recorder\",result=\"error\"} 2"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("controller_runtime_reconcile_errors_total{controller=\"recorder\"} 2"), std::string::npos);
  EXPECT_NE(metrics.find("workqueue_retries_total{name=\"recorder\"} 2"), std::string::npos);
  EXPECT_NE(metrics.find("workqueue_depth{name=\"recorder\"} 0"), std::string::npos);
  EXPECT_NE(metrics.find("controller_runtime_reconcile_time_seconds_count{controller=\"recorder\"} 6"), std::string::npos);
}

// Blocks in Reconcile until released, to see that Stop waits for it.
class Blocking : public Reconciler {
 public:
  absl::StatusOr<Result> Reconcile(const std::string&) override {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    finished = true;
    return Result::Done();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false, finished = false;
};

TEST_F(RuntimeTest, StopFinishesInFlightReconciles) {
  Manager m(RealClock::Get(), *cache_);
  Blocking b;
  WorkQueue& q = m.Add("blocking", b);
  m.Start();
  q.Add("k");
  {
    std::unique_lock<std::mutex> lock(b.mu);
    ASSERT_TRUE(b.cv.wait_for(lock, seconds(30), [&] { return b.entered; }));
  }
  std::thread stopper([&] { m.Stop(); });
  {
    std::lock_guard<std::mutex> lock(b.mu);
    EXPECT_FALSE(b.finished);
    b.release = true;
  }
  b.cv.notify_all();
  stopper.join();
  EXPECT_TRUE(b.finished);
  q.Add("after-stop");
  EXPECT_EQ(q.Len(), 0u);
}

TEST_F(RuntimeTest, ChangedKeysListsWhatMovedSinceARevision) {
  Create(Pool("a", "one", "red"));
  const int64_t rev = store_->Revision();
  Create(Pool("b", "two", "red"));
  Create(Pool("b", "three", "red"));
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<store::Key> keys, tx.ChangedKeys(model::GpuPool::kKind, rev));
    std::set<std::string> names;
    for (const store::Key& k : keys) names.insert(k.ns + "/" + k.name);
    EXPECT_EQ(names, (std::set<std::string>{"b/two", "b/three"}));
    ASSIGN_OR_RETURN(std::vector<store::Key> none, tx.ChangedKeys("Workload", rev));
    EXPECT_TRUE(none.empty());
    return absl::OkStatus();
  }).ok());
}

// --- leader election ---

// Waits up to `timeout` for `cond`.
bool Eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

LeaderElectionOptions FastElection(std::string identity) {
  LeaderElectionOptions o;
  o.identity = std::move(identity);
  o.address = "http://" + o.identity;
  o.lease_duration = std::chrono::milliseconds(1500);
  o.renew_deadline = std::chrono::milliseconds(1000);
  o.retry_period = std::chrono::milliseconds(100);
  return o;
}

// One of two candidates leads; a graceful stop hands over within a retry period or two, in a new
// epoch; a leader that finds the lease taken stops leading at once and withdraws its token.
TEST(LeaderElection, OneLeadsAStopHandsOverAndALeaderThatLosesTheLeaseStops) {
  auto st = store::OpenSqliteStore({":memory:"});
  ASSERT_TRUE(st.ok());
  std::atomic<int> a_started{0}, a_stopped{0}, b_started{0}, b_stopped{0};
  LeaderElector a(**st, FastElection("a"), [&] { ++a_started; }, [&] { ++a_stopped; });
  LeaderElector b(**st, FastElection("b"), [&] { ++b_started; }, [&] { ++b_stopped; });
  a.Start();
  ASSERT_TRUE(Eventually([&] { return a.leading(); }, std::chrono::seconds(2)));
  b.Start();
  ASSERT_TRUE(Eventually([&] { return b.observed().holder == "a"; }, std::chrono::seconds(2)));
  EXPECT_FALSE(b.leading());
  EXPECT_FALSE(b.token().has_value());
  EXPECT_EQ(b.observed().address, "http://a");
  ASSERT_TRUE(Eventually([&] { return a_started == 1; }, std::chrono::seconds(1)));
  ASSERT_TRUE(a.token().has_value());
  EXPECT_EQ(a.token()->epoch, 1);
  std::string metrics;
  a.AppendMetrics(metrics);
  EXPECT_NE(metrics.find("gpuaas_leader_election_master_status{name=\"gpuaas-controller-manager\"} 1"), std::string::npos)
      << metrics;
  metrics.clear();
  b.AppendMetrics(metrics);
  EXPECT_NE(metrics.find("gpuaas_leader_election_master_status{name=\"gpuaas-controller-manager\"} 0"), std::string::npos);

  // A graceful stop releases the lease: b leads well before a's lease would have expired.
  const auto stop = std::chrono::steady_clock::now();
  a.Stop();
  EXPECT_EQ(a_stopped, 1);
  ASSERT_TRUE(Eventually([&] { return b.leading(); }, std::chrono::seconds(1)));
  EXPECT_LT(std::chrono::steady_clock::now() - stop, std::chrono::milliseconds(700));
  ASSERT_TRUE(b.token().has_value());
  EXPECT_EQ(b.token()->epoch, 2);
  ASSERT_TRUE(Eventually([&] { return b_started == 1; }, std::chrono::seconds(1)));

  // Someone else takes the lease (b's renewals lapsed, say): b stops at its next renewal.
  ASSERT_TRUE((*st)->ReleaseLease("gpuaas-controller-manager", "b").ok());
  ASSERT_EQ((*st)->TryAcquireLease("gpuaas-controller-manager", "c", "", std::chrono::seconds(60))->holder, "c");
  // (b stops leading, then says so: its on_stopped runs just after.)
  ASSERT_TRUE(Eventually([&] { return !b.leading() && b_stopped == 1; }, std::chrono::seconds(1)));
  EXPECT_FALSE(b.token().has_value());
  EXPECT_EQ(b.observed().holder, "c");
  b.Stop();
  EXPECT_EQ(b_stopped, 1) << "on_stopped once per term";
  EXPECT_EQ((*st)->GetLease("gpuaas-controller-manager")->holder, "c") << "b released nothing it did not hold";
}

TEST(LeaderElection, TimingsAreValidated) {
  LeaderElectionOptions o = FastElection("a");
  EXPECT_TRUE(o.Validate().ok());
  o.renew_deadline = o.lease_duration;
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
  o = FastElection("a");
  o.retry_period = std::chrono::milliseconds(900);  // x1.2 > the renew deadline
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
  o = FastElection("");
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
  EXPECT_GT(UniqueIdentity().size(), 9u);
  EXPECT_NE(UniqueIdentity(), UniqueIdentity());
  EXPECT_TRUE(UniqueIdentity("r1").starts_with("r1_"));
}

}  // namespace
}  // namespace gpuaas::controller::runtime
