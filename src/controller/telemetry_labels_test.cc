#include "controller/telemetry_labels.h"

#include "common/strings.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "store/objects.h"

namespace gpuaas::controller {
namespace {

model::GpuCapacity Gpu(const std::string& uuid, bool mig) {
  model::GpuCapacity g;
  g.metadata.name = ToLower(uuid);
  g.spec.uuid = uuid;
  g.spec.cluster = "c";
  g.spec.node = "c.n1";
  g.spec.model = "H200-SXM-141GB";
  if (mig) {
    g.status.mig_mode = model::MigMode::kEnabled;
    g.status.mig_instances = {{"3g.71gb", 0, 4, "MIG-0", true, {}}, {"3g.71gb", 4, 4, "MIG-4", false, {}}};
  }
  return g;
}

model::GpuPool Pool(const std::string& ns, const std::string& name, std::vector<model::AllocatedDevice> devices) {
  model::GpuPool p;
  p.metadata.ns = ns;
  p.metadata.name = name;
  p.status.allocation = std::move(devices);
  return p;
}

// The labeller on a manager of its own, as each replica runs it, over a real store: a whole GPU
// and a MIG instance in pools, a workload running on the whole GPU; then the pool lets go.
TEST(TelemetryLabels, NameTheOwnersOfWholeGpusAndMigInstancesAndFollowChanges) {
  std::unique_ptr<store::Store> db = std::move(*store::OpenStore("sqlite::memory:"));
  model::Workload w;
  w.metadata.ns = "vision";
  w.metadata.name = "trainer";
  w.spec.pool = "train";
  w.status.phase = model::WorkloadPhase::kRunning;
  w.status.devices = {{"GPU-A", ""}};
  ASSERT_TRUE(db->Transact([&](store::Txn& tx) -> absl::Status {
                  model::GpuCapacity a = Gpu("GPU-A", false), b = Gpu("GPU-B", true);
                  RETURN_IF_ERROR(store::CreateObject(tx, a, Time{}));
                  RETURN_IF_ERROR(store::CreateObject(tx, b, Time{}));
                  model::GpuPool train = Pool("vision", "train", {{"c", "c.n1", "GPU-A", "full", 0, ""}});
                  model::GpuPool infer = Pool("nlp", "infer", {{"c", "c.n1", "GPU-B", "3g.71gb", 0, "MIG-0"}});
                  RETURN_IF_ERROR(store::CreateObject(tx, train, Time{}));
                  RETURN_IF_ERROR(store::CreateObject(tx, infer, Time{}));
                  return store::CreateObject(tx, w, Time{});
                }).ok());
  store::ObjectCache cache(*db);
  ASSERT_TRUE(cache.Load(ControlPlaneKinds()).ok());
  FakeClock clock{Time(std::chrono::seconds(1'800'000'000))};
  runtime::Manager manager(clock, cache);
  telemetry::DeviceDirectory dir;
  TelemetryLabels labeller(dir, manager);
  manager.RunUntilIdle();

  const uint32_t a = dir.Slot("gpu-a"), b = dir.Slot("GPU-B");  // any letter case
  ASSERT_NE(dir.Get(a), nullptr);
  EXPECT_EQ(dir.Get(a)->cluster, "c");
  EXPECT_EQ(dir.Get(a)->node, "c.n1");
  EXPECT_EQ(dir.Get(a)->model, "H200-SXM-141GB");
  EXPECT_EQ(dir.Get(a)->whole, (telemetry::DeviceOwner{"vision", "train", "trainer"}));
  ASSERT_NE(dir.Get(b), nullptr);
  ASSERT_EQ(dir.Get(b)->instances.size(), 2u);
  EXPECT_EQ(dir.Get(b)->instances[0].owner, (telemetry::DeviceOwner{"nlp", "infer", ""}));
  EXPECT_EQ(dir.Get(b)->instances[0].uuid, "MIG-0");
  EXPECT_EQ(dir.Get(b)->instances[1].owner, telemetry::DeviceOwner{});  // nobody's
  EXPECT_EQ(dir.Get(b)->whole, telemetry::DeviceOwner{});

  // The pool lets go of GPU-A and the workload ends: GPU-A's labels lose them, GPU-B's stay.
  const uint64_t va = dir.Version(a), vb = dir.Version(b);
  ASSERT_TRUE(db->Transact([&](store::Txn& tx) -> absl::Status {
                  ASSIGN_OR_RETURN(std::optional<model::GpuPool> train,
                                   store::GetObject<model::GpuPool>(tx, "vision", "train"));
                  train->status.allocation.clear();
                  RETURN_IF_ERROR(store::UpdateObject(tx, *train));
                  ASSIGN_OR_RETURN(std::optional<model::Workload> job, store::GetObject<model::Workload>(tx, "vision", "trainer"));
                  job->status.phase = model::WorkloadPhase::kSucceeded;
                  return store::UpdateObject(tx, *job);
                }).ok());
  manager.RunUntilIdle();
  EXPECT_EQ(dir.Get(a)->whole, telemetry::DeviceOwner{});
  EXPECT_GT(dir.Version(a), va);
  EXPECT_EQ(dir.Version(b), vb);  // untouched
}

}  // namespace
}  // namespace gpuaas::controller
