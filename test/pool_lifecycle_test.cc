// The pool lifecycle in one process: simulated clusters, the control plane's controllers, the
// pool service, and the store, run until idle with a fake clock (deterministic, no threads).
#include <set>

#include "api/server.h"
#include "billing/billing.h"
#include "billing/codec.h"
#include "cluster/simulated/fleet.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "model/codec.h"
#include "nlohmann/json.hpp"
#include "service/defrag.h"
#include "service/pools.h"
#include "store/objects.h"
#include "store/sqlite_store.h"
#include "telemetry/hub.h"

namespace gpuaas {
namespace {

using model::ConditionStatus;
using model::GpuPool;

class PoolLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    for (const auto& c : cluster::simulated::DemoFleet().clusters) {
      sims_.push_back(std::make_unique<cluster::simulated::SimulatedCluster>(c));
      drivers_[c.name] = sims_.back().get();
    }
    StartControlPlane();
    service_ = std::make_unique<service::PoolService>(*store_, clock_, [] {
      return std::map<std::string, int64_t>{{"H200-SXM-141GB", 48}, {"H100-SXM5-80GB", 64}, {"A100-80GB", 32}};
    });
    Sync();
    model::Project p;
    p.metadata.name = "vision";
    ASSERT_TRUE(service_->CreateProject(p, "ops").ok());
  }
  // A fresh control plane on the same store and drivers: a (re)started server.
  void StartControlPlane() {
    cp_.reset();
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    ASSERT_TRUE(cache_->Load(controller::ControlPlaneKinds()).ok());
    cp_ = std::make_unique<controller::ControlPlane>(*store_, *cache_, clock_, drivers_, hub_);
  }
  void Sync() { cp_->RunUntilIdle(); }
  // Runs the controllers until idle, `seconds` times, a second of the fake clock apart.
  void Converge(int seconds = 10) {
    for (int i = 0; i < seconds; ++i) {
      cp_->RunUntilIdle();
      clock_.Advance(std::chrono::seconds(1));
    }
  }
  void Request(const std::string& name, std::vector<model::PoolItem> items, bool approve = true,
               const std::string& cluster = "alpha", bool movable = false) {
    GpuPool p;
    p.metadata.name = name;
    p.metadata.ns = "vision";
    p.spec.cluster = cluster;
    p.spec.items = std::move(items);
    p.spec.move_idle_instances = movable;
    ASSERT_TRUE(service_->CreatePool(p, "alice").ok());
    if (approve) {
      ASSERT_TRUE(service_->Approve("vision", name, true, "ok", "ops").ok());
    }
  }
  GpuPool Get(const std::string& name) {
    std::optional<GpuPool> p;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
      auto r = store::GetObject<GpuPool>(tx, "vision", name);
      if (r.ok()) p = *r;
      return r.status();
    }).ok());
    return p.value_or(GpuPool{});
  }
  // An operator's defragmentation: asked for through the service, made by the pool controller.
  absl::StatusOr<model::Defragmentation> Defragment(service::DefragService& defrag, const std::vector<std::string>& gpus) {
    ASSIGN_OR_RETURN(const model::Defragmentation asked, defrag.Request(gpus, "ops"));
    Sync();
    return defrag.Await(asked.metadata.name, Duration::zero());
  }
  static std::string Cond(const GpuPool& p, std::string_view type) {
    const model::Condition* c = model::FindCondition(p.status.conditions, type);
    return c == nullptr ? "-" : std::string(model::ToString(c->status)) + "/" + c->reason;
  }

  FakeClock clock_{std::chrono::system_clock::from_time_t(1764688445)};
  std::unique_ptr<store::Store> store_;
  std::vector<std::unique_ptr<cluster::simulated::SimulatedCluster>> sims_;
  std::map<std::string, cluster::ClusterDriver*> drivers_;
  telemetry::Hub hub_;
  std::unique_ptr<store::ObjectCache> cache_;
  std::unique_ptr<controller::ControlPlane> cp_;
  std::unique_ptr<service::PoolService> service_;
};

TEST_F(PoolLifecycle, MigPoolOnFreeInstancesIsReadyAtOnce) {
  Request("infer", {{"H200-SXM-141GB", "3g.71gb", 4}});
  Converge(1);
  GpuPool p = Get("infer");
  EXPECT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Allocated");
  ASSERT_EQ(p.status.allocation.size(), 4u);
  for (const auto& d : p.status.allocation) {
    EXPECT_EQ(d.profile, "3g.71gb");
    EXPECT_EQ(d.instance_uuid.rfind("MIG-", 0), 0u);
  }
}

// Defragmentation end to end: the plan finds MIG GPUs whose free instances stand in the way of
// larger profiles; applied, the MIG controller lays them out anew through the cluster's driver,
// a pool's instance stays where it is, and the plan is then empty.
TEST_F(PoolLifecycle, DefragmentationFreesRoomAndLeavesPoolsAlone) {
  // A 4g.71gb of a "4g.71gb 2g.35gb 1g.18gb" GPU: its free 2g and 1g keep a 3g from the GPU.
  Request("infer", {{"H200-SXM-141GB", "4g.71gb", 1}});
  Converge(1);
  const GpuPool held = Get("infer");
  ASSERT_EQ(Cond(held, "Ready"), "True/Ready");
  ASSERT_EQ(held.status.allocation.size(), 1u);
  const model::AllocatedDevice mine = held.status.allocation[0];

  service::DefragService defrag(*store_, clock_);
  absl::StatusOr<allocator::DefragPlan> plan = defrag.Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->moves.empty()) << "the pool's GPU is carved into free instances";
  bool on_pools_gpu = false;
  for (const allocator::DefragMove& mv : plan->moves) on_pools_gpu = on_pools_gpu || mv.gpu_uuid == mine.gpu_uuid;
  EXPECT_TRUE(on_pools_gpu);
  for (const allocator::DefragMove& mv : plan->moves) {
    for (const catalog::Instance& i : mv.removed) {
      EXPECT_FALSE(mv.gpu_uuid == mine.gpu_uuid && i.start == mine.start) << "the pool's instance is not free";
    }
  }
  // Bad requests change nothing.
  const int64_t revision = store_->Revision();
  EXPECT_TRUE(absl::IsInvalidArgument(defrag.Request({"not-a-gpu"}, "ops").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(defrag.Request({"GPU-00000000-0000-0000-0000-000000000000"}, "ops").status()));
  // One GPU without a move spoils the request: the other's move is not made either.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      defrag.Request({plan->moves[0].gpu_uuid, "GPU-00000000-0000-0000-0000-000000000000"}, "ops").status()));
  EXPECT_EQ(store_->Revision(), revision);

  absl::StatusOr<model::Defragmentation> made = Defragment(defrag, {});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->status.phase, model::Defragmentation::Phase::kApplied) << made->status.message;
  EXPECT_EQ(made->status.moves.size(), plan->moves.size());
  EXPECT_EQ(made->spec.requested_by, "ops");
  Converge(5);
  // Each GPU now has exactly the instances the move kept, and the pool its instance.
  std::map<std::string, model::GpuCapacity> gpus;
  EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
    auto all = store::ListObjects<model::GpuCapacity>(tx);
    if (all.ok()) {
      for (model::GpuCapacity& g : *all) gpus[g.spec.uuid] = std::move(g);
    }
    return all.status();
  }).ok());
  for (const model::Defragmentation::Move& mv : made->status.moves) {
    std::string now;
    for (const model::MigInstance& i : gpus.at(mv.gpu_uuid).status.mig_instances) {
      now += (now.empty() ? "" : " ") + fmt::format("{}@{}", i.profile, i.start);
    }
    EXPECT_EQ(now, mv.after) << mv.gpu_uuid;
  }
  const GpuPool after = Get("infer");
  EXPECT_EQ(Cond(after, "Ready"), "True/Ready");
  ASSERT_EQ(after.status.allocation.size(), 1u);
  EXPECT_EQ(after.status.allocation[0].gpu_uuid, mine.gpu_uuid);
  EXPECT_EQ(after.status.allocation[0].start, mine.start);
  absl::StatusOr<allocator::DefragPlan> again = defrag.Plan();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->moves.empty()) << again->moves.size() << " moves left";
  const int64_t settled = store_->Revision();
  absl::StatusOr<model::Defragmentation> nothing = defrag.Request({}, "ops");
  EXPECT_TRUE(absl::IsFailedPrecondition(nothing.status())) << nothing.status();
  EXPECT_NE(nothing.status().message().find("nothing to defragment"), std::string_view::npos);
  EXPECT_EQ(store_->Revision(), settled) << "no request is stored for nothing";
  // The fleet can hand out more of each move's larger profile than before.
  for (const model::Defragmentation::Move& mv : made->status.moves) {
    const std::string& model = mv.model;
    EXPECT_GT(again->before.at(model).at(mv.largest_after), plan->before.at(model).at(mv.largest_after)) << mv.gpu_uuid;
  }
}

// The pool controller plans again when it makes a request's moves: a move that is gone by then
// (here: made by another request for the same GPU) fails the request, naming the GPU, and
// nothing more is written; the MIG layout the request that made it asked for stays.
TEST_F(PoolLifecycle, ADefragmentationWhoseMoveIsGoneFailsAndMakesNothing) {
  Request("infer", {{"H200-SXM-141GB", "4g.71gb", 1}});
  Converge(1);
  service::DefragService defrag(*store_, clock_);
  absl::StatusOr<allocator::DefragPlan> plan = defrag.Plan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->moves.empty());
  const std::string gpu = plan->moves[0].gpu_uuid;
  absl::StatusOr<model::Defragmentation> first = defrag.Request({gpu}, "ops");
  absl::StatusOr<model::Defragmentation> second = defrag.Request({gpu}, "ops");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(first->metadata.name, second->metadata.name);
  EXPECT_EQ(defrag.Await(first->metadata.name, Duration::zero())->status.phase,
            model::Defragmentation::Phase::kPending)
      << "nothing is made until the pool controller runs";
  Sync();
  absl::StatusOr<model::Defragmentation> a = defrag.Await(first->metadata.name, Duration::zero());
  absl::StatusOr<model::Defragmentation> b = defrag.Await(second->metadata.name, Duration::zero());
  ASSERT_TRUE(a.ok() && b.ok());
  // Whichever the controller took first made the move.
  if (a->status.phase != model::Defragmentation::Phase::kApplied) std::swap(a, b);
  EXPECT_EQ(a->status.phase, model::Defragmentation::Phase::kApplied) << a->status.message;
  ASSERT_EQ(a->status.moves.size(), 1u);
  EXPECT_EQ(b->status.phase, model::Defragmentation::Phase::kFailed);
  EXPECT_NE(b->status.message.find(ToLower(gpu)), std::string::npos) << b->status.message;
  EXPECT_TRUE(b->status.moves.empty());
  // The layout is that of the request that made the move.
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) {
    auto l = store::GetObject<model::MigLayout>(tx, "", ToLower(gpu));
    if (!l.ok()) return l.status();
    EXPECT_TRUE(l->has_value());
    std::string layout;
    for (const model::MigLayout::Instance& i : (*l)->spec.instances) {
      layout += (layout.empty() ? "" : " ") + fmt::format("{}@{}", i.profile, i.start);
    }
    EXPECT_EQ(layout, a->status.moves[0].after);
    return absl::OkStatus();
  }).ok());
  EXPECT_TRUE(absl::IsNotFound(defrag.Await("defrag-none", Duration::zero()).status()));
  // Both are kept a week as the record of what moved, then deleted.
  clock_.Advance(controller::kDefragRetention - std::chrono::hours(1));
  Converge(1);
  EXPECT_TRUE(defrag.Await(a->metadata.name, Duration::zero()).ok());
  clock_.Advance(std::chrono::hours(2));
  Converge(1);
  EXPECT_TRUE(absl::IsNotFound(defrag.Await(a->metadata.name, Duration::zero()).status()));
  EXPECT_TRUE(absl::IsNotFound(defrag.Await(b->metadata.name, Duration::zero()).status()));
}

TEST_F(PoolLifecycle, APoolGetsDevicesOfItsModelInItsCluster) {
  // Both clusters have H100 nodes; each pool stays in the one it names.
  Request("in-beta", {{"H100-SXM5-80GB", "full", 3}}, true, "beta");
  Request("in-alpha", {{"H100-SXM5-80GB", "full", 3}}, true, "alpha");
  Converge(2);
  for (const auto& [name, cluster] : {std::pair{"in-beta", "beta"}, std::pair{"in-alpha", "alpha"}}) {
    GpuPool p = Get(name);
    EXPECT_EQ(Cond(p, "Allocated"), "True/Allocated") << name;
    ASSERT_EQ(p.status.allocation.size(), 3u) << name;
    for (const auto& d : p.status.allocation) {
      EXPECT_EQ(d.cluster, cluster) << name;
      EXPECT_EQ(d.profile, "full");
      EXPECT_EQ(d.node.find(std::string(cluster) + ".h100"), 0u) << d.node;
    }
  }
}

// A pool that lets its idle instances move: defragmentation empties the GPU it shares with
// nobody by moving its instance into a free one elsewhere; the pool follows, stays Ready, and the
// GPU it left is idle, a whole GPU again. Another pool's instances never move.
TEST_F(PoolLifecycle, DefragmentationMovesIdleInstancesOfPoolsThatAllowIt) {
  Request("first", {{"H200-SXM-141GB", "3g.71gb", 1}});
  Request("movable", {{"H200-SXM-141GB", "3g.71gb", 1}}, true, "alpha", /*movable=*/true);
  Converge(1);
  const std::string shared = Get("movable").status.allocation.at(0).gpu_uuid;
  ASSERT_EQ(Get("first").status.allocation.at(0).gpu_uuid, shared) << "packed onto one GPU";
  Request("other", {{"H200-SXM-141GB", "3g.71gb", 1}});
  Converge(1);
  const model::AllocatedDevice others = Get("other").status.allocation.at(0);
  ASSERT_NE(others.gpu_uuid, shared);
  service::DefragService defrag(*store_, clock_);
  auto relocations = [&]() {
    std::vector<allocator::DefragMove> out;
    absl::StatusOr<allocator::DefragPlan> plan = defrag.Plan();
    EXPECT_TRUE(plan.ok()) << plan.status();
    for (allocator::DefragMove& mv : plan->moves) {
      if (!mv.relocations.empty()) out.push_back(std::move(mv));
    }
    return out;
  };
  EXPECT_TRUE(relocations().empty()) << "the GPU still holds another pool's instance";
  // Released, "first" leaves "movable" alone on its GPU.
  ASSERT_TRUE(service_->Release("vision", "first", "alice").ok());
  Converge(2);
  std::vector<allocator::DefragMove> moves = relocations();
  ASSERT_EQ(moves.size(), 1u);
  ASSERT_EQ(moves[0].gpu_uuid, shared);
  ASSERT_EQ(moves[0].relocations.size(), 1u);
  const allocator::Relocation r = moves[0].relocations[0];
  EXPECT_EQ(r.pool, "vision/movable");
  // A workload on the instance keeps it where it is.
  model::Workload w;
  w.metadata.name = "job";
  w.metadata.ns = "vision";
  w.spec = {"movable", "nvidia.com/mig-3g.71gb", 1, model::PriorityClass::kBatch};
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) { return store::CreateObject(tx, w, clock_.Now()); }).ok());
  Converge(2);
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) {
    auto job = store::GetObject<model::Workload>(tx, "vision", "job");
    if (!job.ok()) return job.status();
    EXPECT_TRUE(*job && (*job)->status.phase == model::WorkloadPhase::kRunning) << "the workload runs on the instance";
    return absl::OkStatus();
  }).ok());
  ASSERT_EQ(Get("movable").status.allocation.at(0).gpu_uuid, shared);
  EXPECT_TRUE(relocations().empty()) << "a running workload's instance does not move";
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) { return store::DeleteObject<model::Workload>(tx, "vision", "job"); }).ok());
  Converge(2);
  ASSERT_EQ(relocations().size(), 1u);

  absl::StatusOr<model::Defragmentation> made = Defragment(defrag, {shared});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->status.phase, model::Defragmentation::Phase::kApplied) << made->status.message;
  ASSERT_EQ(made->status.moves.size(), 1u);
  ASSERT_EQ(made->status.moves[0].relocations.size(), 1u);
  EXPECT_EQ(made->status.moves[0].relocations[0].to_gpu, r.to_gpu);
  Converge(5);
  const GpuPool moved = Get("movable");
  ASSERT_EQ(moved.status.allocation.size(), 1u);
  EXPECT_EQ(moved.status.allocation[0].gpu_uuid, r.to_gpu);
  EXPECT_EQ(moved.status.allocation[0].start, r.to_start);
  EXPECT_EQ(Cond(moved, "Ready"), "True/Ready");
  EXPECT_EQ(moved.status.allocation[0].instance_uuid.rfind("MIG-", 0), 0u) << "the instance exists";
  EXPECT_EQ(Get("other").status.allocation.at(0), others) << "a pool that did not allow it stays";
  // The GPU it left holds nothing: the allocator may lay it out anew, even as a whole GPU.
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) {
    auto pools = store::ListObjects<GpuPool>(tx);
    if (!pools.ok()) return pools.status();
    for (const GpuPool& p : *pools) {
      if (!model::PoolIsLive(p)) continue;
      for (const model::AllocatedDevice& d : p.status.allocation) EXPECT_NE(d.gpu_uuid, shared) << p.metadata.name;
    }
    return absl::OkStatus();
  }).ok());
  EXPECT_TRUE(relocations().empty());
}

TEST_F(PoolLifecycle, ReconfiguresIdleGpusThenReleaseAndReuse) {
  // The demo fleet has four 4g.71gb instances; six need two idle GPUs reconfigured.
  Request("big", {{"H200-SXM-141GB", "4g.71gb", 6}, {"H200-SXM-141GB", "full", 2}});
  Converge(1);
  GpuPool p = Get("big");
  EXPECT_EQ(Cond(p, "Allocated"), "True/Allocated");
  EXPECT_EQ(cp_->miglayouts().applied(), 2);  // two GPUs asked for new layouts, once each
  ASSERT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Provisioned");
  std::set<std::string> devices;
  for (const auto& d : p.status.allocation) {
    EXPECT_TRUE(devices.insert(d.gpu_uuid + "@" + std::to_string(d.start) + d.profile).second);
    if (d.profile != "full") {
      EXPECT_FALSE(d.instance_uuid.empty());
    }
  }
  EXPECT_EQ(devices.size(), 8u);

  // A second pool cannot take the same devices.
  Request("other", {{"H200-SXM-141GB", "4g.71gb", 1}});
  Converge(3);
  GpuPool other = Get("other");
  ASSERT_EQ(Cond(other, "Ready"), "True/Ready") << Cond(other, "Allocated");
  for (const auto& d : p.status.allocation) {
    EXPECT_NE(other.status.allocation[0].gpu_uuid + std::to_string(other.status.allocation[0].start),
              d.gpu_uuid + std::to_string(d.start));
  }

  // Release frees the devices; the next pool reuses the instances without reconfiguring.
  ASSERT_TRUE(service_->Release("vision", "big", "alice").ok());
  Converge(1);
  p = Get("big");
  EXPECT_EQ(Cond(p, "Released"), "True/Released");
  EXPECT_TRUE(p.status.allocation.empty());
  Request("again", {{"H200-SXM-141GB", "4g.71gb", 5}});
  Converge(1);
  EXPECT_EQ(Cond(Get("again"), "Ready"), "True/Ready");
}

TEST_F(PoolLifecycle, AWaitingPoolIsAllocatedByTheReleaseThatFreesItsCapacity) {
  Request("all", {{"H200-SXM-141GB", "full", 48}});  // every H200 of cluster alpha
  Converge(1);
  ASSERT_EQ(Cond(Get("all"), "Ready"), "True/Ready") << Cond(Get("all"), "Allocated");
  Request("next", {{"H200-SXM-141GB", "full", 1}});
  Converge(1);
  EXPECT_EQ(Cond(Get("next"), "Allocated"), "False/Unschedulable");
  // Nothing changes: the waiting pool is looked at after its backoff, not every second.
  const int64_t tries = cp_->pools().stats().unschedulable;
  Converge(3);
  EXPECT_EQ(cp_->pools().stats().unschedulable, tries);
  // The release queues it at once: no clock moves between the two.
  ASSERT_TRUE(service_->Release("vision", "all", "alice").ok());
  cp_->RunUntilIdle();
  EXPECT_EQ(Cond(Get("next"), "Ready"), "True/Ready") << Cond(Get("next"), "Allocated");
}

TEST_F(PoolLifecycle, UnplaceableAndRejectedPoolsSayWhy) {
  Request("rejected", {{"H200-SXM-141GB", "full", 1}}, /*approve=*/false);
  ASSERT_TRUE(service_->Approve("vision", "rejected", false, "use the shared pool", "ops").ok());
  // Pods run on one instance of every MIG H200, so only the 32 whole H200s can become full GPUs.
  const cluster::ObservedCluster alpha = *sims_[0]->Observe();
  for (const auto& n : alpha.nodes) {
    for (const auto& g : n.gpus) {
      if (g.mig_enabled) sims_[0]->SetInUse(g.mig_instances[0].uuid, true);
    }
  }
  Sync();
  Request("toomuch", {{"H200-SXM-141GB", "full", 33}});
  Converge(2);
  EXPECT_TRUE(Get("rejected").status.allocation.empty());
  GpuPool t = Get("toomuch");
  EXPECT_EQ(Cond(t, "Allocated"), "False/Unschedulable");
  const model::Condition* c = model::FindCondition(t.status.conditions, "Allocated");
  EXPECT_NE(c->message.find("MIG instances"), std::string::npos) << c->message;
}

// The reason a pool waits is true and adds up: the devices a decision placed before it ran out
// are this pool's own, not "other pools'".
TEST_F(PoolLifecycle, AWaitingPoolsReasonCountsItsOwnDevicesApart) {
  Request("one", {{"H100-SXM5-80GB", "full", 1}}, true, /*cluster=*/"");
  Converge(1);
  ASSERT_EQ(Cond(Get("one"), "Ready"), "True/Ready");
  Request("wait2", {{"H100-SXM5-80GB", "full", 64}}, true, "");  // every H100 of the fleet
  Converge(1);
  const GpuPool w = Get("wait2");
  ASSERT_EQ(Cond(w, "Allocated"), "False/Unschedulable");
  const std::string m = model::FindCondition(w.status.conditions, "Allocated")->message;
  EXPECT_NE(m.find("63 of them would"), std::string::npos) << m;
  EXPECT_NE(m.find("of 64 H100-SXM5-80GB GPUs: "), std::string::npos) << m;
  EXPECT_NE(m.find("63 are taken by this pool's other devices"), std::string::npos) << m;
  EXPECT_NE(m.find("1 is allocated to other pools"), std::string::npos) << m;
  EXPECT_EQ(m.find("64 are allocated"), std::string::npos) << m;
}

TEST_F(PoolLifecycle, MigFailuresRetryWithBackoffAndRestartsConverge) {
  sims_[0]->FailNextMigChanges(1);
  Request("big", {{"H200-SXM-141GB", "4g.71gb", 5}});
  Converge(2);  // allocate; request the layout; see it fail a second later (the retry is due 2 s after)
  GpuPool p = Get("big");
  EXPECT_EQ(Cond(p, "Provisioned"), "False/MigLayoutFailed") << Cond(p, "Provisioned");
  // A new control plane (a restarted server) picks up where the old one stopped.
  StartControlPlane();
  clock_.Advance(std::chrono::seconds(30));
  Converge(4);
  p = Get("big");
  EXPECT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Provisioned");
  EXPECT_EQ(p.status.allocation.size(), 5u);
}

}  // namespace
}  // namespace gpuaas

namespace gpuaas {
namespace {

class WorkloadLifecycle : public PoolLifecycle {
 protected:
  void Run(const std::string& name, const std::string& pool, const std::string& resource,
           model::PriorityClass prio, int64_t count = 1) {
    model::Workload w;
    w.metadata.name = name;
    w.metadata.ns = "vision";
    w.spec = {pool, resource, count, prio};
    ASSERT_TRUE(service_->CreateWorkload(w, "alice").ok());
    clock_.Advance(std::chrono::seconds(1));
  }
  void Admit() { cp_->RunUntilIdle(); }
  model::Workload W(const std::string& name) {
    std::optional<model::Workload> w;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
      auto r = store::GetObject<model::Workload>(tx, "vision", name);
      if (r.ok()) w = *r;
      return r.status();
    }).ok());
    return w.value_or(model::Workload{});
  }
  std::vector<model::Profile> Profiles() {
    std::vector<model::Profile> out;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
      auto r = store::ListObjects<model::Profile>(tx, "vision");
      if (r.ok()) out = *r;
      return r.status();
    }).ok());
    return out;
  }
};

TEST_F(WorkloadLifecycle, InferencePreemptsBatchWhenThePoolIsFull) {
  Request("p", {{"H200-SXM-141GB", "3g.71gb", 2}});
  Converge(1);
  Run("batch-1", "p", "nvidia.com/mig-3g.71gb", model::PriorityClass::kBatch);
  Run("batch-2", "p", "nvidia.com/mig-3g.71gb", model::PriorityClass::kBatch);
  Admit();
  EXPECT_EQ(W("batch-1").status.phase, model::WorkloadPhase::kRunning);
  EXPECT_EQ(W("batch-2").status.phase, model::WorkloadPhase::kRunning);
  EXPECT_NE(W("batch-1").status.devices[0].instance_uuid, W("batch-2").status.devices[0].instance_uuid);
  Run("infer", "p", "nvidia.com/mig-3g.71gb", model::PriorityClass::kInference);
  Admit();
  model::Workload infer = W("infer");
  ASSERT_EQ(infer.status.phase, model::WorkloadPhase::kRunning) << infer.status.message;
  // The newest batch workload made room and went back to the queue.
  EXPECT_EQ(W("batch-2").status.phase, model::WorkloadPhase::kPending);
  EXPECT_EQ(W("batch-2").status.reason, "Preempted");
  EXPECT_EQ(W("batch-1").status.phase, model::WorkloadPhase::kRunning);
  // Profiles: three runs started, the preempted one has ended.
  int open = 0, closed = 0;
  for (const model::Profile& p : Profiles()) (p.spec.end ? closed : open)++;
  EXPECT_EQ(open, 2);
  EXPECT_EQ(closed, 1);
  // Another batch workload waits; when inference ends, the queue moves on in order.
  ASSERT_TRUE(service_->DeleteWorkload("vision", "infer", "alice").ok());
  Admit();
  EXPECT_EQ(W("batch-2").status.phase, model::WorkloadPhase::kRunning);
  // A second inference workload does not preempt inference.
  Run("infer-2", "p", "nvidia.com/mig-3g.71gb", model::PriorityClass::kInference);
  Run("infer-3", "p", "nvidia.com/mig-3g.71gb", model::PriorityClass::kInference);
  Run("infer-4", "p", "nvidia.com/mig-3g.71gb", model::PriorityClass::kInference);
  Admit();
  EXPECT_EQ(W("infer-2").status.phase, model::WorkloadPhase::kRunning);
  EXPECT_EQ(W("infer-3").status.phase, model::WorkloadPhase::kRunning);
  EXPECT_EQ(W("infer-4").status.phase, model::WorkloadPhase::kPending);
  EXPECT_EQ(W("infer-4").status.reason, "Queued");
}

TEST_F(WorkloadLifecycle, TimeSlicingSharesDevicesAndReleaseEvicts) {
  GpuPool p;
  p.metadata.name = "shared";
  p.metadata.ns = "vision";
  p.spec.items = {{"H200-SXM-141GB", "full", 1}};
  p.spec.time_slicing_replicas = 3;
  ASSERT_TRUE(service_->CreatePool(p, "alice").ok());
  ASSERT_TRUE(service_->Approve("vision", "shared", true, "", "ops").ok());
  Converge(1);
  for (int i = 0; i < 4; ++i) Run("dev-" + std::to_string(i), "shared", "nvidia.com/gpu", model::PriorityClass::kBatch);
  Admit();
  int running = 0;
  std::set<std::string> gpus;
  for (int i = 0; i < 4; ++i) {
    model::Workload w = W("dev-" + std::to_string(i));
    if (w.status.phase == model::WorkloadPhase::kRunning) {
      ++running;
      gpus.insert(w.status.devices[0].gpu_uuid);
    }
  }
  EXPECT_EQ(running, 3) << "three replicas of one GPU";
  EXPECT_EQ(gpus.size(), 1u);
  const int64_t before_release = store_->Revision();
  ASSERT_TRUE(service_->Release("vision", "shared", "alice").ok());
  Converge(1);
  Admit();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(W("dev-" + std::to_string(i)).status.phase, model::WorkloadPhase::kEvicted);
  for (const model::Profile& pr : Profiles()) EXPECT_TRUE(pr.spec.end.has_value());
  // The order, from the change feed: every run ended before the pool gave its devices back, so
  // that no other pool could be given a device whose run was still open.
  absl::StatusOr<std::vector<store::Change>> feed = store_->Changes(before_release, 100000);
  ASSERT_TRUE(feed.ok()) << feed.status();
  int64_t last_run_end = 0, devices_freed = 0;
  for (const store::Change& c : *feed) {
    if (c.record.key.kind == model::Workload::kKind) {
      absl::StatusOr<model::Workload> w = model::Decode<model::Workload>(c.record.data);
      if (w.ok() && w->status.phase == model::WorkloadPhase::kEvicted) last_run_end = std::max(last_run_end, c.revision);
    }
    if (c.record.key.kind == GpuPool::kKind && devices_freed == 0) {
      absl::StatusOr<GpuPool> gp = model::Decode<GpuPool>(c.record.data);
      if (gp.ok() && gp->status.allocation.empty()) devices_freed = c.revision;
    }
  }
  ASSERT_GT(last_run_end, 0);
  ASSERT_GT(devices_freed, 0);
  EXPECT_LT(last_run_end, devices_freed);
  EXPECT_EQ(Cond(Get("shared"), "Released"), "True/Released");
}

TEST_F(WorkloadLifecycle, WorkloadsNeedAPoolWithTheirResource) {
  Request("p", {{"H200-SXM-141GB", "3g.71gb", 1}});
  model::Workload w;
  w.metadata.name = "x";
  w.metadata.ns = "vision";
  w.spec = {"p", "nvidia.com/gpu", 1, model::PriorityClass::kBatch};
  EXPECT_EQ(service_->CreateWorkload(w, "alice").status().code(), absl::StatusCode::kInvalidArgument);
  w.spec.pool = "nope";
  EXPECT_EQ(service_->CreateWorkload(w, "alice").status().code(), absl::StatusCode::kNotFound);
  w.spec = {"p", "cpu", 1, model::PriorityClass::kBatch};
  EXPECT_EQ(service_->CreateWorkload(w, "alice").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model::ProfileOfResource("nvidia.com/mig-1g.18gb.me"), "1g.18gb+me");
}

}  // namespace
}  // namespace gpuaas

namespace gpuaas {
namespace {

// A workload that could never fit its pool is refused at once; a deleted workload's name is free.
TEST_F(WorkloadLifecycle, ImpossibleWorkloadsAreRefusedAndDeletedNamesReused) {
  Request("small", {{"H200-SXM-141GB", "full", 1}});
  Converge(2);
  ASSERT_EQ(Cond(Get("small"), "Ready"), "True/Ready");
  model::Workload bad;
  bad.metadata.name = "bad";
  bad.metadata.ns = "vision";
  bad.spec = {"small", "nvidia.com/gpu", 2, model::PriorityClass::kBatch};
  absl::Status s = service_->CreateWorkload(bad, "alice").status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("can never run on pool small: it has 1 full device(s)"), std::string::npos) << s.message();
  model::Workload serve = bad;
  serve.metadata.name = "serve";
  serve.spec.count = 1;
  ASSERT_TRUE(service_->CreateWorkload(serve, "alice").ok());
  Converge(1);
  ASSERT_TRUE(service_->DeleteWorkload("vision", "serve", "alice").ok());
  Converge(1);
  ASSERT_TRUE(service_->CreateWorkload(serve, "alice").ok()) << "the name is free again";
  Converge(1);
  // The first run is recorded and closed; the second runs.
  int closed = 0, open = 0;
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::Profile> runs, store::ListObjects<model::Profile>(tx, "vision"));
    for (const model::Profile& r : runs) (r.spec.end ? closed : open) += r.spec.pod == "serve" ? 1 : 0;
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(open, 1);
}

TEST_F(WorkloadLifecycle, AFailedGpuIsReplacedAndItsRunQueuesAgain) {
  Request("train", {{"H200-SXM-141GB", "full", 1}});
  Converge(3);
  GpuPool p = Get("train");
  ASSERT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Allocated") << " " << Cond(p, "Provisioned");
  ASSERT_EQ(p.status.allocation.size(), 1u);
  const std::string failed = p.status.allocation[0].gpu_uuid;
  Run("job", "train", "nvidia.com/gpu", model::PriorityClass::kBatch);
  Admit();
  ASSERT_EQ(W("job").status.phase, model::WorkloadPhase::kRunning);
  ASSERT_EQ(W("job").status.devices[0].gpu_uuid, failed);

  // The node agent reports XID 79 on that GPU; the health controller marks it, the pool
  // controller replaces the device and the workload controller moves the run, all from events.
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch()).count();
  telemetry::NodeReport r{"n", "", now_ms, {{failed, 0, "NVIDIA H200", 0, false, {}, {}, {{79, -1, now_ms}}}}};
  ASSERT_TRUE(hub_.IngestReport(r, now_ms).ok());
  Sync();

  p = Get("train");
  ASSERT_EQ(p.status.allocation.size(), 1u);
  EXPECT_NE(p.status.allocation[0].gpu_uuid, failed);
  EXPECT_EQ(Cond(p, "DevicesHealthy"), "True/Replaced");
  EXPECT_EQ(Cond(p, "Ready"), "True/Ready");
  // The run on the failed GPU ended and the workload restarted on the replacement.
  Admit();
  model::Workload job = W("job");
  ASSERT_EQ(job.status.phase, model::WorkloadPhase::kRunning) << job.status.message;
  EXPECT_EQ(job.status.devices[0].gpu_uuid, p.status.allocation[0].gpu_uuid);
  int ended = 0;
  for (const model::Profile& pr : Profiles()) ended += pr.spec.end ? 1 : 0;
  EXPECT_EQ(ended, 1);

  // A second pool cannot get the failed GPU either: the allocator's health filter.
  Request("more", {{"H200-SXM-141GB", "full", 1}});
  Converge(3);
  for (const auto& d : Get("more").status.allocation) EXPECT_NE(d.gpu_uuid, failed);
}

// Billing with the controllers: fault credits from the pool controller, final invoices and
// backfilled meters from the metering controller.
class BillingLifecycle : public PoolLifecycle {
 protected:
  void SetUp() override {
    PoolLifecycle::SetUp();
    model::RateCard card;
    card.metadata.name = "list";
    card.spec.currency = "USD";
    card.spec.effective_from = std::chrono::floor<std::chrono::days>(clock_.Now()) - std::chrono::days(1);  // Dec 1
    card.spec.prices = {{"H200-SXM-141GB", "full", 3'600'000}};
    ASSERT_TRUE(service_->CreateRateCard(card, "ops").ok());
  }
  template <typename T>
  std::vector<T> All(std::string_view ns = "vision") {
    std::vector<T> out;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
      auto r = store::ListObjects<T>(tx, ns);
      if (r.ok()) out = *r;
      return r.status();
    }).ok());
    return out;
  }
  void Report(const std::string& uuid, double energy_mj, bool xid79) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch()).count();
    telemetry::NodeReport r{"n", "", now_ms, {{uuid, 0, "NVIDIA H200", 0, false, {{telemetry::Field::kEnergyMj, energy_mj}}, {}, {}}}};
    if (xid79) r.gpus[0].xid_events.push_back({79, -1, now_ms});
    ASSERT_TRUE(hub_.IngestReport(r, now_ms).ok());
  }
};

TEST_F(BillingLifecycle, AFaultIsCreditedFromTheFailureUntilTheReplacement) {
  // Every H200 of alpha, so that a failed one has no replacement until it is healed.
  Request("all", {{"H200-SXM-141GB", "full", 48}});
  Converge(20);
  GpuPool p = Get("all");
  ASSERT_EQ(Cond(p, "Ready"), "True/Ready") << Cond(p, "Allocated");
  const std::string failed = p.status.allocation[5].gpu_uuid;
  Report(failed, 5e9, true);
  Sync();
  EXPECT_EQ(Cond(Get("all"), "DevicesHealthy"), "False/DeviceFailed");
  std::vector<model::UsageRecord> meters = All<model::UsageRecord>();
  ASSERT_EQ(meters.size(), 1u);
  ASSERT_EQ(meters[0].spec.credits.size(), 1u);
  EXPECT_EQ(meters[0].spec.credits[0].gpu_uuid, failed);
  EXPECT_EQ(meters[0].spec.credits[0].reason, "ResetRequired");
  EXPECT_FALSE(meters[0].spec.credits[0].end);
  const Time failed_at = meters[0].spec.credits[0].start;
  // Half an hour later the GPU is reset (its energy counter restarts) and rejoins the pool.
  clock_.Advance(std::chrono::minutes(30));
  Report(failed, 1, false);
  Converge(5);
  EXPECT_EQ(Cond(Get("all"), "DevicesHealthy"), "True/Replaced");
  meters = All<model::UsageRecord>();
  ASSERT_EQ(meters[0].spec.credits.size(), 1u);
  ASSERT_TRUE(meters[0].spec.credits[0].end);
  const int64_t credited =
      std::chrono::duration_cast<std::chrono::seconds>(*meters[0].spec.credits[0].end - failed_at).count();
  EXPECT_GE(credited, 1800);
  EXPECT_LE(credited, 1805);
  // On the invoice: the usage of 48 GPUs less the credit, at 3.6 USD an hour.
  const billing::Invoice inv = billing::Rate("vision", meters, billing::PriceBook(All<model::RateCard>("")),
                                             billing::MonthOf(clock_.Now()), clock_.Now());
  ASSERT_EQ(inv.lines.size(), 2u);
  EXPECT_EQ(inv.lines[1].category, "Credit");
  EXPECT_EQ(inv.lines[1].seconds, credited);
  EXPECT_EQ(inv.lines[1].amount_micros, -credited * 1000);
  EXPECT_EQ(inv.total_micros, inv.lines[0].amount_micros + inv.lines[1].amount_micros);
}

// A pool that waits for capacity pays for no device it has not got: each device is billed from
// the later of the approval and its allocation, and the invoice line says so.
TEST_F(BillingLifecycle, AWaitingPoolIsBilledFromItsAllocationNotItsApproval) {
  Request("all", {{"H200-SXM-141GB", "full", 48}});  // every H200 of alpha
  Converge(1);
  ASSERT_EQ(Cond(Get("all"), "Ready"), "True/Ready");
  Request("next", {{"H200-SXM-141GB", "full", 2}});
  Converge(1);
  ASSERT_EQ(Cond(Get("next"), "Allocated"), "False/Unschedulable");
  const Time approved = std::chrono::floor<std::chrono::seconds>(Get("next").status.approval->time);
  clock_.Advance(std::chrono::hours(1));
  Sync();
  auto rate = [&] {
    return billing::Rate("vision", All<model::UsageRecord>(), billing::PriceBook(All<model::RateCard>("")),
                         billing::MonthOf(clock_.Now()), clock_.Now());
  };
  for (const billing::Line& l : rate().lines) EXPECT_NE(l.pool, "next") << "an hour of waiting is not billed";
  // The release of "all" gives "next" its devices: billing starts then.
  ASSERT_TRUE(service_->Release("vision", "all", "alice").ok());
  cp_->RunUntilIdle();
  ASSERT_EQ(Cond(Get("next"), "Ready"), "True/Ready") << Cond(Get("next"), "Allocated");
  const Time allocated = std::chrono::floor<std::chrono::seconds>(clock_.Now());
  clock_.Advance(std::chrono::minutes(30));
  const billing::Invoice inv = rate();
  std::vector<const billing::Line*> next;
  for (const billing::Line& l : inv.lines) {
    if (l.pool == "next") next.push_back(&l);
  }
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0]->quantity, 2);
  EXPECT_EQ(next[0]->seconds, 1800);
  EXPECT_EQ(next[0]->start, allocated);
  EXPECT_EQ(next[0]->amount_micros, 2 * 1800 * 1000);
  EXPECT_NE(next[0]->description.find("billed from the allocation at " + FormatTime(allocated)), std::string::npos)
      << next[0]->description;
  EXPECT_NE(next[0]->description.find("not the approval at " + FormatTime(approved)), std::string::npos);
  // The meter records it: two devices from their allocation.
  for (const model::UsageRecord& m : All<model::UsageRecord>()) {
    if (m.spec.pool != "next") continue;
    ASSERT_TRUE(m.spec.held);
    ASSERT_EQ(m.spec.held->size(), 1u);
    EXPECT_EQ((*m.spec.held)[0].count, 2);
    EXPECT_EQ((*m.spec.held)[0].since, allocated);
  }
}

// A pool released while it waits pays nothing, and is released at once (it has nothing to give
// back), even while its retry backoff runs.
TEST_F(BillingLifecycle, AWaitingPoolIsReleasedAtOnceAndNeverBilled) {
  Request("all", {{"H200-SXM-141GB", "full", 48}});
  Converge(1);
  Request("wait", {{"H200-SXM-141GB", "full", 4}});
  Converge(4);  // it failed a few times: its backoff is running
  ASSERT_EQ(Cond(Get("wait"), "Allocated"), "False/Unschedulable");
  ASSERT_TRUE(service_->Release("vision", "wait", "alice").ok());
  cp_->RunUntilIdle();  // no clock moves: the release is not a retry after a backoff
  const GpuPool w = Get("wait");
  EXPECT_EQ(Cond(w, "Released"), "True/Released");
  EXPECT_TRUE(w.status.allocation.empty());
  for (const billing::Line& l : billing::Rate("vision", All<model::UsageRecord>(), billing::PriceBook(All<model::RateCard>("")),
                                              billing::MonthOf(clock_.Now()), clock_.Now())
                                    .lines) {
    EXPECT_NE(l.pool, "wait");
  }
  // A pool that was Ready tells, once released, that its devices are gone.
  ASSERT_TRUE(service_->Release("vision", "all", "alice").ok());
  cp_->RunUntilIdle();
  const GpuPool all = Get("all");
  EXPECT_EQ(Cond(all, "Released"), "True/Released");
  EXPECT_EQ(Cond(all, "Provisioned"), "False/Released");
  EXPECT_EQ(Cond(all, "Ready"), "False/Released");
  // Approving it again is refused with advice that fits a released pool.
  absl::Status again = service_->Approve("vision", "all", true, "", "ops").status();
  EXPECT_TRUE(absl::IsFailedPrecondition(again));
  EXPECT_EQ(again.message().find("release it"), std::string::npos) << again.message();
  EXPECT_NE(again.message().find("pool delete all -p vision"), std::string::npos) << again.message();
}

// A meter written before devices were billed from their allocation (no `held`) is converted by
// the pool controller: what the pool holds stays billed from the approval, the rest from later.
TEST_F(BillingLifecycle, AnOlderMeterIsConvertedWithoutBillingWhatThePoolLacks) {
  Request("all", {{"H200-SXM-141GB", "full", 47}});
  Converge(1);
  Request("two", {{"H200-SXM-141GB", "full", 2}});  // one H200 is left: it waits
  Converge(1);
  ASSERT_EQ(Cond(Get("two"), "Allocated"), "False/Unschedulable");
  // Its meter as an older server wrote it.
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::UsageRecord> m, store::GetObject<model::UsageRecord>(tx, "vision", "two"));
    m->spec.held.reset();
    return store::UpdateObject(tx, *m);
  }).ok());
  StartControlPlane();
  Converge(1);
  std::optional<model::UsageRecord> two;
  for (const model::UsageRecord& m : All<model::UsageRecord>()) {
    if (m.spec.pool == "two") two = m;
  }
  ASSERT_TRUE(two && two->spec.held);
  EXPECT_TRUE(two->spec.held->empty()) << "it holds nothing yet";
}

// Names come back: a request not yet decided is withdrawn, a released or rejected pool deleted,
// and the name used again; the deleted pool's meter stays, under a name of its own, and still
// bills what the pool held.
TEST_F(BillingLifecycle, DeletedPoolsFreeTheirNamesAndKeepTheirMeters) {
  Request("train", {{"H200-SXM-141GB", "full", 1}}, /*approve=*/false);
  ASSERT_TRUE(service_->DeletePool("vision", "train", "alice").ok()) << "a request not yet decided is withdrawn";
  EXPECT_TRUE(absl::IsNotFound(service_->DeletePool("vision", "train", "alice").status()));
  Request("train", {{"H200-SXM-141GB", "full", 1}});
  Converge(1);
  ASSERT_EQ(Cond(Get("train"), "Ready"), "True/Ready");
  const std::string first_uid = Get("train").metadata.uid;
  const Time first_from = std::chrono::floor<std::chrono::seconds>(Get("train").status.approval->time);
  clock_.Advance(std::chrono::minutes(10));
  const Time first_to = std::chrono::floor<std::chrono::seconds>(clock_.Now());
  // In force: the delete is its release (billing ends now), and the pool is kept, marked, until
  // the pool controller has freed its devices.
  absl::StatusOr<GpuPool> deleting = service_->DeletePool("vision", "train", "alice");
  ASSERT_TRUE(deleting.ok()) << deleting.status();
  EXPECT_EQ(deleting->metadata.deletion_timestamp, first_to);
  EXPECT_EQ(deleting->metadata.finalizers, std::vector<std::string>{std::string(model::kReleaseFinalizer)});
  ASSERT_TRUE(deleting->spec.release_requested);
  EXPECT_EQ(deleting->spec.release_requested->time, first_to);
  EXPECT_EQ(Get("train").metadata.uid, first_uid) << "kept until released";
  const int64_t before = store_->Revision();
  ASSERT_TRUE(service_->DeletePool("vision", "train", "alice").ok()) << "asked again: the same answer";
  EXPECT_EQ(store_->Revision(), before) << "and nothing written";
  cp_->RunUntilIdle();
  EXPECT_TRUE(Get("train").metadata.uid.empty()) << "gone once released";
  // Used again.
  Request("train", {{"H200-SXM-141GB", "full", 1}});
  const Time second_from = std::chrono::floor<std::chrono::seconds>(clock_.Now());
  Converge(1);
  EXPECT_EQ(Cond(Get("train"), "Ready"), "True/Ready");
  EXPECT_NE(Get("train").metadata.uid, first_uid);
  std::set<std::string> names;
  for (const model::UsageRecord& m : All<model::UsageRecord>()) names.insert(m.metadata.name);
  EXPECT_EQ(names, (std::set<std::string>{"train", "train." + first_uid}));
  int64_t seconds = 0;
  for (const billing::Line& l : billing::Rate("vision", All<model::UsageRecord>(), billing::PriceBook(All<model::RateCard>("")),
                                              billing::MonthOf(clock_.Now()), clock_.Now())
                                    .lines) {
    if (l.pool == "train") seconds += l.seconds;
  }
  const auto secs = [](Duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); };
  EXPECT_EQ(seconds, secs(first_to - first_from) + secs(std::chrono::floor<std::chrono::seconds>(clock_.Now()) - second_from))
      << "the first train's time to its release, and the second's since its approval";
  EXPECT_GT(secs(first_to - first_from), 600);
  // A rejected pool is deleted too.
  Request("no", {{"H200-SXM-141GB", "full", 1}}, /*approve=*/false);
  ASSERT_TRUE(service_->Approve("vision", "no", false, "not now", "ops").ok());
  EXPECT_TRUE(service_->DeletePool("vision", "no", "alice").ok());
}

// The pool controller is the meter's one writer: it opens the meter from the approval and ends it
// at the release request's time, however late it sees the request; a request it sees only after
// the request's month was kept ends the meter where that invoice ended, so that nothing is
// billed twice or lost.
TEST_F(BillingLifecycle, TheMeterOpensAtTheApprovalAndEndsAtTheReleaseRequest) {
  Request("train", {{"H200-SXM-141GB", "full", 1}});
  const GpuPool approved = Get("train");
  Converge(1);
  std::vector<model::UsageRecord> meters = All<model::UsageRecord>();
  ASSERT_EQ(meters.size(), 1u);
  EXPECT_EQ(meters[0].spec.start, std::chrono::floor<std::chrono::seconds>(approved.status.approval->time));
  EXPECT_EQ(meters[0].spec.pool_uid, approved.metadata.uid);
  EXPECT_FALSE(meters[0].spec.end);
  // The controller sees the request seven minutes late; billing ends at the request all the same.
  ASSERT_TRUE(service_->Release("vision", "train", "alice").ok());
  const Time asked = Get("train").spec.release_requested->time;
  clock_.Advance(std::chrono::minutes(7));
  Converge(1);
  EXPECT_EQ(Cond(Get("train"), "Released"), "True/Released");
  meters = All<model::UsageRecord>();
  ASSERT_EQ(meters.size(), 1u);
  ASSERT_TRUE(meters[0].spec.end);
  EXPECT_EQ(*meters[0].spec.end, asked);

  // A release asked on December 31st that the controller first sees in January, after
  // December's invoice was kept (here: a control plane that was down across the month's end).
  Request("late", {{"H200-SXM-141GB", "full", 1}});
  Converge(1);
  const Time dec31 = std::chrono::sys_days(std::chrono::year(2025) / 12 / 31) + std::chrono::hours(23);
  clock_.Advance(dec31 - clock_.Now());
  cp_.reset();
  ASSERT_TRUE(service_->Release("vision", "late", "alice").ok());
  const Time jan = std::chrono::sys_days(std::chrono::year(2026) / 1 / 1);
  clock_.Advance(jan + std::chrono::minutes(1) - clock_.Now());
  // December's invoice, as a replica that finalized it first would have kept it.
  ASSERT_TRUE(store_->Transact([](store::Txn& tx) {
    return tx.Put({std::string(model::kInvoiceKind), "vision", "2025-12"}, "", "{}", store::kMustNotExist);
  }).ok());
  StartControlPlane();
  Converge(2);
  std::optional<model::UsageRecord> late;
  for (const model::UsageRecord& m : All<model::UsageRecord>()) {
    if (m.spec.pool == "late") late = m;
  }
  ASSERT_TRUE(late && late->spec.end);
  EXPECT_EQ(*late->spec.end, jan) << "December was billed to its end; January bills nothing";
}

TEST_F(BillingLifecycle, AClosedMonthsInvoiceIsKeptOnceAndMissingMetersAreOpened) {
  Request("train", {{"H200-SXM-141GB", "full", 2}});
  Converge(3);
  const Time approved = std::chrono::floor<std::chrono::seconds>(Get("train").status.approval->time);
  // A pool approved before metering existed: its meter is gone, as in an older store.
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) {
    return store::DeleteObject<model::UsageRecord>(tx, "vision", "train");
  }).ok());
  // Into January: a restarted server opens the meter from the approval and keeps December's invoice.
  const Time jan = std::chrono::sys_days(std::chrono::year(2026) / 1 / 1) + std::chrono::minutes(5);
  clock_.Advance(jan - clock_.Now());
  StartControlPlane();
  Converge(2);
  std::vector<model::UsageRecord> meters = All<model::UsageRecord>();
  ASSERT_EQ(meters.size(), 1u);
  EXPECT_EQ(meters[0].spec.start, approved);
  auto kept = store_->Get({std::string(model::kInvoiceKind), "vision", "2025-12"});
  ASSERT_TRUE(kept.ok() && *kept);
  absl::StatusOr<billing::Invoice> inv = billing::DecodeInvoice((*kept)->data);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->state, billing::InvoiceState::kFinal);
  const int64_t held = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::sys_days(std::chrono::year(2026) / 1 / 1) - approved).count();
  ASSERT_EQ(inv->lines.size(), 1u);
  EXPECT_EQ(inv->lines[0].seconds, held);
  EXPECT_EQ(inv->total_micros, held * 2 * 1000);
  // Kept once: another restart writes nothing more.
  StartControlPlane();
  Converge(2);
  EXPECT_EQ(cp_->metering().invoices_written(), 0);
  auto again = store_->Get({std::string(model::kInvoiceKind), "vision", "2025-12"});
  EXPECT_EQ((*again)->resource_version, (*kept)->resource_version);
}

// Billing through the API on the clock the control plane runs on: hours of a pool's use pass in
// no time, and the project's invoice bills them to the second at the card's prices.
TEST_F(PoolLifecycle, TheInvoiceBillsTheHoursHeldOnTheServersClock) {
  model::RateCard card;
  card.metadata.name = "list";
  card.spec.currency = "USD";
  card.spec.effective_from = clock_.Now() - std::chrono::hours(24);
  card.spec.prices = {{"H200-SXM-141GB", "full", 3'600'000}};
  ASSERT_TRUE(service_->CreateRateCard(card, "ops").ok());
  Request("train", {{"H200-SXM-141GB", "full", 2}});
  Converge(1);
  ASSERT_EQ(Cond(Get("train"), "Ready"), "True/Ready");
  clock_.Advance(std::chrono::minutes(150));
  ASSERT_TRUE(service_->Release("vision", "train", "alice").ok());
  Converge(1);

  // The API reads its own cache of every kind it serves, on the same clock.
  store::ObjectCache api_cache(*store_);
  std::vector<std::string> kinds;
  for (const api::ResourceType& t : api::ResourceTypes()) kinds.push_back(t.kind);
  ASSERT_TRUE(api_cache.Load(kinds).ok());
  api::ServerOptions o;
  o.port = 0;
  o.clock = &clock_;
  api::ApiServer server(o, api_cache, service_.get());
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/api/v1/projects/vision/invoices");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const nlohmann::json items = nlohmann::json::parse(r->body)["items"];
  ASSERT_EQ(items.size(), 1u) << items.dump(2);
  const nlohmann::json& line = items[0]["lines"].at(0);
  // Held from the allocation, one fake second after the approval, to the release request.
  const int64_t held = line["seconds"].get<int64_t>();
  EXPECT_GE(held, 150 * 60);
  EXPECT_LE(held, 150 * 60 + 2);
  EXPECT_EQ(line["quantity"], 2);
  EXPECT_EQ(line["amountMicros"], (held * 2 * 3'600'000 + 1800) / 3600) << line.dump();
  EXPECT_EQ(items[0]["totalMicros"], line["amountMicros"]);
  server.Stop();
}

}  // namespace
}  // namespace gpuaas
