#include "controller/health.h"

#include "controller/control_plane.h"

#include "common/strings.h"
#include "gtest/gtest.h"
#include "model/fleet.h"
#include "store/objects.h"

namespace gpuaas::controller {

using namespace telemetry;  // NOLINT: the readings and reports of this test
namespace {

constexpr int64_t kT0 = 1'800'000'000;

model::GpuCapacity Gpu(const std::string& uuid) {
  model::GpuCapacity g;
  g.metadata.name = ToLower(uuid);
  g.spec.uuid = uuid;
  g.spec.cluster = "c";
  g.spec.node = "c.n";
  model::SetDriverHealth(g, true, Time{});
  model::SummarizeGpuHealth(g, Time{});
  return g;
}

// The health controller and the rollup writer on a manager of their own, as the server runs them.
struct Controllers {
  Controllers(store::Store& store, Hub& hub, const Clock& clock) : cache(store), manager(clock, cache) {
    EXPECT_TRUE(cache.Load(ControlPlaneKinds()).ok());
    health = std::make_unique<HealthController>(store, hub, manager);
    rollups = std::make_unique<RollupWriter>(store, hub, manager);
  }
  int Run() { return manager.RunUntilIdle(); }
  store::ObjectCache cache;
  runtime::Manager manager;
  std::unique_ptr<HealthController> health;
  std::unique_ptr<RollupWriter> rollups;
};

class TelemetryControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    ASSERT_TRUE(store_->Transact([](store::Txn& tx) {
                        model::GpuCapacity a = Gpu("GPU-A"), b = Gpu("GPU-B");
                        RETURN_IF_ERROR(store::CreateObject(tx, a, Time{}));
                        return store::CreateObject(tx, b, Time{});
                      }).ok());
  }
  model::GpuCapacity Read(const std::string& uuid) {
    model::GpuCapacity out;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
                        ASSIGN_OR_RETURN(std::optional<model::GpuCapacity> g,
                                         store::GetObject<model::GpuCapacity>(tx, "", ToLower(uuid)));
                        out = *g;
                        return absl::OkStatus();
                      }).ok());
    return out;
  }
  std::unique_ptr<store::Store> store_;
  FakeClock clock_{Time(std::chrono::seconds(kT0))};
};

TEST_F(TelemetryControllerTest, VerdictsBecomeGpuConditionsAndHealth) {
  Hub hub;
  Controllers c(*store_, hub, clock_);
  NodeReport r{"n", "", kT0 * 1000, {}};
  GpuReport a{"GPU-A", 0, "NVIDIA H200", 143771, false, {{Field::kEccDbeVolatile, 3}}, {}, {}};
  GpuReport b{"GPU-B", 1, "NVIDIA H200", 143771, false, {{Field::kEccDbeVolatile, 0}}, {}, {{79, -1, kT0 * 1000}}};
  GpuReport stranger{"GPU-Z", 2, "NVIDIA H200", 143771, false, {{Field::kPowerW, 100}}, {}, {}};
  r.gpus = {a, b, stranger};
  c.Run();  // the hub learns the inventory
  const int64_t writes = c.health->writes();
  absl::StatusOr<IngestResult> in = hub.IngestReport(r, kT0 * 1000);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->unmatched_gpus, std::vector<std::string>{"GPU-Z"});
  c.Run();
  EXPECT_EQ(c.health->writes() - writes, 2);

  model::GpuCapacity ga = Read("GPU-A");
  EXPECT_EQ(ga.status.health, model::Health::kUnhealthy);
  const model::Condition* mem = model::FindCondition(ga.status.conditions, model::kGpuMemoryErrors);
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->status, model::ConditionStatus::kTrue);
  EXPECT_EQ(mem->reason, "DoubleBitEccErrors");
  const model::Condition* healthy = model::FindCondition(ga.status.conditions, model::kGpuHealthy);
  EXPECT_EQ(healthy->status, model::ConditionStatus::kFalse);
  EXPECT_EQ(healthy->reason, "MemoryErrors");

  model::GpuCapacity gb = Read("GPU-B");
  EXPECT_EQ(gb.status.health, model::Health::kUnhealthy);
  const model::Condition* reset = model::FindCondition(gb.status.conditions, model::kGpuResetRequired);
  EXPECT_EQ(reset->reason, "Xid79");
  EXPECT_NE(reset->message.find("reboot the node"), std::string::npos);

  // Nothing changed: nothing written, nothing even looked at.
  EXPECT_EQ(c.Run(), 0);

  // GPU-A is reset (its energy counter restarts and the volatile ECC count with it).
  NodeReport later{"n", "", (kT0 + 60) * 1000, {}};
  later.gpus = {{"GPU-A", 0, "", 0, false, {{Field::kEnergyMj, 9e9}}, {}, {}}};
  ASSERT_TRUE(hub.IngestReport(later, later.time_ms).ok());
  later.time_ms += 1000;
  later.gpus[0].readings = {{Field::kEnergyMj, 1000}, {Field::kEccDbeVolatile, 0}};
  ASSERT_TRUE(hub.IngestReport(later, later.time_ms).ok());
  c.Run();
  EXPECT_EQ(Read("GPU-A").status.health, model::Health::kHealthy);
}

// A GPU the inventory just created (health Unknown) is judged once, in the controller's first
// pass; WaitJudged, which a server's readiness waits on, says when every GPU has been.
TEST_F(TelemetryControllerTest, NewGpusAreJudgedOnceAndWaitJudgedSaysWhen) {
  ASSERT_TRUE(store_->Transact([](store::Txn& tx) {
                        model::GpuCapacity c;
                        c.metadata.name = "gpu-c";
                        c.spec.uuid = "GPU-C";
                        c.spec.cluster = "c";
                        c.spec.node = "c.n";
                        model::SetDriverHealth(c, true, Time{});  // as the inventory creates it
                        return store::CreateObject(tx, c, Time{});
                      }).ok());
  Hub hub;
  Controllers c(*store_, hub, clock_);
  c.manager.StartInformers();
  EXPECT_FALSE(c.health->WaitJudged(std::chrono::milliseconds(0))) << "GPU-C is not judged yet";
  c.Run();
  EXPECT_TRUE(c.health->WaitJudged(std::chrono::milliseconds(0)));
  EXPECT_EQ(Read("GPU-C").status.health, model::Health::kHealthy);
  EXPECT_EQ(c.Run(), 0) << "judged once";
}

TEST_F(TelemetryControllerTest, TheDriversViewIsSummedUpIntoHealthy) {
  Hub hub;
  Controllers c(*store_, hub, clock_);
  c.Run();
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::GpuCapacity> g, store::GetObject<model::GpuCapacity>(tx, "", "gpu-b"));
    model::SetDriverHealth(*g, false, clock_.Now());  // as the inventory writes it
    return store::UpdateObject(tx, *g);
  }).ok());
  c.Run();
  model::GpuCapacity gb = Read("GPU-B");
  EXPECT_EQ(gb.status.health, model::Health::kUnhealthy);
  EXPECT_EQ(model::FindCondition(gb.status.conditions, model::kGpuHealthy)->reason, model::kReasonDriverUnhealthy);
}

TEST_F(TelemetryControllerTest, AFailedGpuStaysFailedAcrossARestartUntilAReset) {
  {
    Hub hub;
    Controllers c(*store_, hub, clock_);
    c.Run();
    NodeReport r{"n", "", kT0 * 1000, {{"GPU-A", 0, "", 0, false, {{Field::kEnergyMj, 5e9}}, {}, {{79, -1, kT0 * 1000}}}}};
    ASSERT_TRUE(hub.IngestReport(r, r.time_ms).ok());
    c.Run();
    ASSERT_EQ(Read("GPU-A").status.health, model::Health::kUnhealthy);
  }
  // The server restarts: a fresh hub knows nothing of the XID, the store does.
  Hub hub;
  Controllers c(*store_, hub, clock_);
  ASSERT_TRUE(c.health->Restore().ok());
  EXPECT_EQ(hub.Verdict("GPU-A").reset_required.reason, "Xid79");
  ASSERT_EQ(hub.Alerts(true).size(), 1u);
  EXPECT_EQ(hub.Alerts(true)[0].source, "Restored");
  // Readings that change something else (temperature) do not heal it.
  NodeReport r{"n", "", (kT0 + 10) * 1000, {{"GPU-A", 0, "", 0, false, {{Field::kEnergyMj, 6e9}, {Field::kTempC, 95}}, {}, {}}}};
  ASSERT_TRUE(hub.IngestReport(r, r.time_ms).ok());
  c.Run();
  EXPECT_EQ(Read("GPU-A").status.health, model::Health::kUnhealthy);
  EXPECT_EQ(model::FindCondition(Read("GPU-A").status.conditions, model::kGpuResetRequired)->reason, "Xid79");
  // A reset does.
  r.time_ms += 10'000;
  r.gpus[0].readings = {{Field::kEnergyMj, 1000}, {Field::kTempC, 40}};
  ASSERT_TRUE(hub.IngestReport(r, r.time_ms).ok());
  c.Run();
  EXPECT_EQ(Read("GPU-A").status.health, model::Health::kHealthy);
  EXPECT_TRUE(hub.Alerts(true).empty());
}

TEST_F(TelemetryControllerTest, RollupsArePersistedAndRestored) {
  {
    Hub hub;
    Controllers c(*store_, hub, clock_);
    NodeReport r{"n", "", 0, {{"GPU-A", 0, "", 0, false, {}, {}, {}}}};
    for (int i = 0; i <= 3 * 60; i += 10) {  // three minutes of power at 10 s
      r.time_ms = (kT0 + i) * 1000;
      r.gpus[0].readings = {{Field::kPowerW, i < 60 ? 100.0 : 200.0}};
      ASSERT_TRUE(hub.IngestReport(r, r.time_ms).ok());
    }
    c.Run();
    EXPECT_EQ(c.rollups->written(), 0);  // the first flush is due in 10 s
    clock_.Advance(std::chrono::seconds(10));
    c.Run();
    EXPECT_EQ(c.rollups->written(), 3);  // three closed minutes
  }
  Hub fresh;
  Controllers c(*store_, fresh, clock_);
  absl::StatusOr<size_t> n = c.rollups->Restore();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3u);
  const int64_t later = kT0 + 2 * 3600;  // past the raw hour: minute rollups answer
  std::vector<Bucket> q = fresh.series().Query("GPU-A", Field::kPowerW, kT0, kT0 + 180, 60, later);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].mean, 100);
  EXPECT_EQ(q[2].mean, 200);
}

}  // namespace
}  // namespace gpuaas::controller
