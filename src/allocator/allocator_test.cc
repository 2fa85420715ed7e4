#include "allocator/allocator.h"

#include "allocator/defrag.h"
#include "allocator/mig_plan.h"

#include <random>
#include <set>

#include "gtest/gtest.h"

namespace gpuaas::allocator {
namespace {

// A GPU of `model` on `node`; `layout` "" means MIG disabled, "-" MIG enabled and empty.
GpuState Gpu(const std::string& node, int index, const std::string& layout = "",
             const std::string& model = "H200-SXM-141GB", const std::string& cluster = "alpha") {
  GpuState g;
  g.cluster = cluster;
  g.node = node;
  g.index = index;
  g.uuid = "GPU-" + node + "-" + std::to_string(index);
  g.model = catalog::FindModel(model);
  if (!layout.empty()) {
    g.mig_enabled = true;
    if (layout != "-") {
      const catalog::Layout parsed = *catalog::ParseLayout(*g.model, layout);
      for (const catalog::Instance& i : parsed) {
        g.instances.push_back({i.profile, i.start, g.uuid + "-mig" + std::to_string(i.start), "", false});
      }
    }
  }
  return g;
}

Request Req(const std::string& pool, std::vector<RequestItem> items, std::string cluster = "") {
  return {pool, std::move(cluster), std::move(items)};
}

const Profile& Default() { return *ProfileByName("default"); }

// One device that is `milli` thousandths of a whole GPU.
RequestItem Share(const std::string& model, int32_t milli, const std::string& profile = "full") {
  RequestItem item{model, profile, 1};
  item.share_milli = milli;
  return item;
}

TEST(Allocator, UsesFreeExistingInstancesFirst) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0, "-"), Gpu("n1", 1, "3g.71gb@0 3g.71gb@4")};
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "3g.71gb", 2}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  ASSERT_EQ(o.plan.placements.size(), 2u);
  for (const Placement& p : o.plan.placements) {
    EXPECT_EQ(p.action, Action::kUseInstance);
    EXPECT_EQ(p.gpu_uuid, "GPU-n1-1");
    EXPECT_FALSE(p.instance_uuid.empty());
  }
  EXPECT_TRUE(o.plan.gpu_changes.empty());
}

TEST(Allocator, PacksOntoPartlyUsedGpusAtTheSlotThatKeepsRoom) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0, "3g.71gb@0"), Gpu("n1", 1, "-")};
  f.gpus[0].instances[0].owner = "other/pool";
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "1g.18gb", 1}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  const Placement& p = o.plan.placements[0];
  EXPECT_EQ(p.gpu_uuid, "GPU-n1-0");  // the fuller GPU
  EXPECT_EQ(p.action, Action::kCreateInstance);
  // At slot 6 a 2g.35gb still fits at 4; at slot 4 or 5 it would not.
  EXPECT_EQ(p.start, 6);
  const Plan::GpuChange& c = o.plan.gpu_changes.at("GPU-n1-0");
  EXPECT_FALSE(c.reconfigure);
  EXPECT_EQ(catalog::FormatLayout(c.layout), "3g.71gb@0 1g.18gb@6");
}

// Two 8-GPU nodes of 64 CPUs and 512 GiB; node "a" has `a_cpu_taken` milli-CPUs and
// `a_mem_taken` MiB requested by other pods.
FleetSnapshot TwoNodes(int64_t a_cpu_taken, int64_t a_mem_taken) {
  FleetSnapshot f;
  for (const std::string node : {"a", "b"}) {
    const int64_t cpu_taken = node == "a" ? a_cpu_taken : 0, mem_taken = node == "a" ? a_mem_taken : 0;
    f.nodes.push_back({node, 64000 - cpu_taken, 524288 - mem_taken, 8000, 65536});
    for (int i = 0; i < 8; ++i) {
      f.gpus.push_back(Gpu(node, i));
      f.gpus.back().node_room = static_cast<int32_t>(f.nodes.size() - 1);
    }
  }
  f.Reindex();
  return f;
}

TEST(Allocator, WholeGpusAvoidNodesWhoseCpuOrMemoryOtherWorkHasTaken) {
  // Equal nodes: the first.
  Outcome even = Allocate(TwoNodes(0, 0), Req("p/a", {{"H200-SXM-141GB", "full", 2}}), Default());
  ASSERT_EQ(even.code, Code::kSuccess) << even.reason;
  EXPECT_EQ(even.plan.placements[0].node, "a");
  // 60 of a's 64 CPUs requested: two GPUs there would get 2 CPUs each, not their 8. Memory alike.
  for (const auto& [cpu, mem] : {std::pair<int64_t, int64_t>{60000, 0}, {0, 500000}}) {
    Outcome o = Allocate(TwoNodes(cpu, mem), Req("p/a", {{"H200-SXM-141GB", "full", 2}}), Default());
    ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
    for (const Placement& p : o.plan.placements) EXPECT_EQ(p.node, "b") << cpu << " " << mem;
  }
  // 48 CPUs taken leaves 16: two GPUs fed, a third not; a MIG instance needs its compute share.
  Outcome three = Allocate(TwoNodes(48000, 0), Req("p/a", {{"H200-SXM-141GB", "full", 3}}), Default());
  ASSERT_EQ(three.code, Code::kSuccess) << three.reason;
  for (const Placement& p : three.plan.placements) EXPECT_EQ(p.node, "b");
  Outcome two = Allocate(TwoNodes(48000, 0), Req("p/a", {{"H200-SXM-141GB", "full", 2}}), Default());
  for (const Placement& p : two.plan.placements) EXPECT_EQ(p.node, "a");
  Outcome mig = Allocate(TwoNodes(63000, 0), Req("p/a", {{"H200-SXM-141GB", "3g.71gb", 1}}), Default());
  ASSERT_EQ(mig.code, Code::kSuccess) << mig.reason;
  EXPECT_EQ(mig.plan.placements[0].node, "b");
  // Starved GPUs are still better than none.
  FleetSnapshot full = TwoNodes(60000, 0);
  for (GpuState& g : full.gpus) g.owner = g.node == "b" ? "other/pool" : "";
  full.Reindex();
  EXPECT_EQ(Allocate(full, Req("p/a", {{"H200-SXM-141GB", "full", 2}}), Default()).code, Code::kSuccess);
}

TEST(Snapshot, NodesRoomIsCapacityLessWhatTheirPodsRequest) {
  std::vector<model::NodeCapacity> nodes(2);
  std::vector<model::GpuCapacity> gpus;
  for (int n = 0; n < 2; ++n) {
    model::NodeCapacity& node = nodes[static_cast<size_t>(n)];
    node.metadata.name = "alpha.h200-" + std::to_string(n);
    node.spec = {"alpha", "h200-" + std::to_string(n), "H200-SXM-141GB", "NVIDIA-H200", 8, 64, int64_t{512} << 30, true};
    for (int i = 0; i < 8; ++i) {
      model::GpuCapacity g;
      g.spec = {"alpha", node.metadata.name, "GPU-" + std::to_string(n) + "-" + std::to_string(i), i, "H200-SXM-141GB",
                "NVIDIA-H200", 143771, true};
      gpus.push_back(g);
    }
  }
  nodes[0].status.pod_cpu_milli = 60000;
  nodes[0].status.pod_memory_bytes = int64_t{500} << 30;
  nodes[1].status.pod_cpu_milli = -5;  // never below zero
  const FleetSnapshot f = BuildSnapshot(gpus, nodes, {}, {});
  ASSERT_EQ(f.nodes.size(), 2u);
  for (const GpuState& g : f.gpus) ASSERT_EQ(f.nodes.at(static_cast<size_t>(g.node_room)).name, g.node);
  const NodeRoom& busy = f.nodes[0].name == "alpha.h200-0" ? f.nodes[0] : f.nodes[1];
  const NodeRoom& idle = f.nodes[0].name == "alpha.h200-0" ? f.nodes[1] : f.nodes[0];
  EXPECT_EQ(busy.cpu_free_milli, 4000);
  EXPECT_EQ(busy.memory_free_mib, 12 * 1024);
  EXPECT_DOUBLE_EQ(busy.cpu_share_milli, 8000);
  EXPECT_DOUBLE_EQ(busy.memory_share_mib, 64 * 1024);
  EXPECT_EQ(idle.cpu_free_milli, 64000);
  EXPECT_EQ(f.index.nodes, 2u);
  // A pool of two whole GPUs goes where their pods could run.
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "full", 2}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  for (const Placement& p : o.plan.placements) EXPECT_EQ(p.node, "alpha.h200-1");
}

// A cluster may report MIG instances that cannot be on one GPU together (overlapping, or more
// than its slices hold): such a GPU is set aside, as one with a profile the catalogue does not
// know, and decisions go on over the rest.
TEST(Snapshot, AGpuReportingAnIllegalLayoutIsNeverTouched) {
  std::vector<model::GpuCapacity> gpus(4);
  for (int i = 0; i < 4; ++i) {
    model::GpuCapacity& g = gpus[static_cast<size_t>(i)];
    g.spec = {"alpha", "n", "GPU-" + std::to_string(i), i, "H200-SXM-141GB", "NVIDIA-H200", 143771, true};
    g.status.mig_mode = model::MigMode::kEnabled;
  }
  auto inst = [](const std::string& profile, int64_t start, const std::string& uuid) {
    return model::MigInstance{profile, start, 0, uuid};
  };
  gpus[0].status.mig_instances = {inst("4g.71gb", 0, "MIG-a"), inst("4g.71gb", 0, "MIG-b")};  // overlapping
  for (int k = 0; k < 30; ++k) gpus[1].status.mig_instances.push_back(inst("1g.18gb", k % 7, "MIG-c" + std::to_string(k)));
  gpus[2].status.mig_instances = {inst("4g.71gb", 0, "MIG-d"), inst("3g.71gb", 4, "MIG-e")};  // legal
  const FleetSnapshot f = BuildSnapshot(gpus, {}, {}, {});
  for (const GpuState& g : f.gpus) {
    EXPECT_EQ(g.model == nullptr, g.uuid == "GPU-0" || g.uuid == "GPU-1") << g.uuid;
  }
  // Only the GPUs with a legal layout serve.
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "1g.18gb", 14}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  for (const Placement& p : o.plan.placements) EXPECT_TRUE(p.gpu_uuid == "GPU-2" || p.gpu_uuid == "GPU-3") << p.gpu_uuid;
  o = Allocate(f, Req("p/b", {{"H200-SXM-141GB", "4g.71gb", 1}, {"H200-SXM-141GB", "3g.71gb", 1}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  for (const Placement& p : o.plan.placements) EXPECT_EQ(p.gpu_uuid, "GPU-2");
  // Set aside, they do not count towards what the fleet could hold.
  EXPECT_EQ(Allocate(f, Req("p/c", {{"H200-SXM-141GB", "full", 3}}), Default()).code, Code::kUnschedulableAndUnresolvable);
}

TEST(Allocator, ItemsThatAskForCpuGetNodesThatHaveIt) {
  RequestItem item{"H200-SXM-141GB", "full", 2, 20000, 1024, true};
  Outcome o = Allocate(TwoNodes(50000, 0), Req("p/a", {item}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  ASSERT_EQ(o.plan.placements.size(), 2u);
  EXPECT_EQ(o.plan.placements[0].node, "b");
  EXPECT_EQ(o.plan.placements[1].node, "b");
  EXPECT_EQ(o.plan.placements[0].cpu_milli + o.plan.placements[1].cpu_milli, 20000);  // taken once, at the first
  item.cpu_milli = 70000;
  Outcome none = Allocate(TwoNodes(0, 0), Req("p/a", {item}), Default());
  EXPECT_EQ(none.code, Code::kUnschedulable);
  EXPECT_NE(none.reason.find("16 are on nodes without the CPU it asks for"), std::string::npos) << none.reason;
  // Spread over devices: 3 x 1g.18gb asking 10 CPUs in all take 3, 3 and 4.
  RequestItem spread{"H200-SXM-141GB", "1g.18gb", 3, 10000, 0, false};
  Outcome s = Allocate(TwoNodes(0, 0), Req("p/s", {spread}), Default());
  ASSERT_EQ(s.code, Code::kSuccess) << s.reason;
  std::multiset<int64_t> charges;
  for (const Placement& p : s.plan.placements) charges.insert(p.cpu_milli);
  EXPECT_EQ(charges, (std::multiset<int64_t>{3333, 3333, 3334}));
  // One node: a pod of 9 GPUs fits no 8-GPU node, though 16 are free.
  Outcome nine = Allocate(TwoNodes(0, 0), Req("p/n", {{"H200-SXM-141GB", "full", 9, 0, 0, true}}), Default());
  EXPECT_EQ(nine.code, Code::kUnschedulable);
  EXPECT_NE(nine.reason.find("without room for the whole item"), std::string::npos) << nine.reason;
}

TEST(Allocator, WholeGpusStayOnOneNode) {
  FleetSnapshot f;
  for (int i = 0; i < 2; ++i) f.gpus.push_back(Gpu("a", i));
  for (int i = 0; i < 8; ++i) f.gpus.push_back(Gpu("b", i));
  Outcome four = Allocate(f, Req("p/train", {{"H200-SXM-141GB", "full", 4}}), Default());
  ASSERT_EQ(four.code, Code::kSuccess) << four.reason;
  for (const Placement& p : four.plan.placements) {
    EXPECT_EQ(p.node, "b");
    EXPECT_EQ(p.action, Action::kUseGpu);
  }
  Outcome two = Allocate(f, Req("p/small", {{"H200-SXM-141GB", "full", 2}}), Default());
  ASSERT_EQ(two.code, Code::kSuccess);
  for (const Placement& p : two.plan.placements) EXPECT_EQ(p.node, "a") << "best fit";
  std::set<std::string> gpus;
  for (const Placement& p : four.plan.placements) EXPECT_TRUE(gpus.insert(p.gpu_uuid).second);
}

TEST(Allocator, ReconfiguresOnlyIdleGpus) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0, "7g.141gb@0"), Gpu("n1", 1, "7g.141gb@0"), Gpu("n1", 2)};
  f.gpus[0].instances[0].busy = true;        // a workload runs there
  f.gpus[1].instances[0].owner = "other/p";  // allocated to another pool
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "3g.71gb", 2}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  for (const Placement& p : o.plan.placements) EXPECT_EQ(p.gpu_uuid, "GPU-n1-2");
  EXPECT_EQ(o.plan.placements[0].action, Action::kReconfigure);
  EXPECT_EQ(o.plan.placements[1].action, Action::kCreateInstance);
  const Plan::GpuChange& c = o.plan.gpu_changes.at("GPU-n1-2");
  EXPECT_TRUE(c.reconfigure);
  EXPECT_TRUE(c.mig_enabled);
  EXPECT_EQ(catalog::FormatLayout(c.layout), "3g.71gb@0 3g.71gb@4");
  EXPECT_EQ(o.plan.ReconfiguredGpus(), 1);

  // With the idle GPU gone, nothing fits, and the reason says why per GPU.
  f.gpus.pop_back();
  Outcome none = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "3g.71gb", 1}}), Default());
  EXPECT_EQ(none.code, Code::kUnschedulable);
  EXPECT_NE(none.reason.find("but run workloads"), std::string::npos) << none.reason;
  EXPECT_NE(none.reason.find("hold other pools' devices"), std::string::npos) << none.reason;
  EXPECT_NE(none.reason.find("of 2 H200-SXM-141GB GPUs"), std::string::npos) << none.reason;
}

TEST(Allocator, FullItemsTakeMigGpusOnlyWhenIdle) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0, "3g.71gb@0 3g.71gb@4"), Gpu("n1", 1, "3g.71gb@0")};
  f.gpus[1].instances[0].busy = true;
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "full", 1}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  EXPECT_EQ(o.plan.placements[0].gpu_uuid, "GPU-n1-0");
  EXPECT_EQ(o.plan.placements[0].action, Action::kReconfigure);
  EXPECT_FALSE(o.plan.gpu_changes.at("GPU-n1-0").mig_enabled);
  Outcome two = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "full", 2}}), Default());
  EXPECT_EQ(two.code, Code::kUnschedulable);
  EXPECT_NE(two.reason.find("MIG instances that run workloads"), std::string::npos) << two.reason;
}

TEST(Allocator, FiltersExplainThemselves) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0), Gpu("n2", 0), Gpu("n3", 0, "", "H200-SXM-141GB", "beta")};
  f.gpus[0].healthy = false;
  f.gpus[1].schedulable = false;
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "full", 1}}, "alpha"), Default());
  EXPECT_EQ(o.code, Code::kUnschedulable);
  EXPECT_NE(o.reason.find("1 is unhealthy"), std::string::npos) << o.reason;
  EXPECT_NE(o.reason.find("1 is on a cordoned node"), std::string::npos) << o.reason;
  EXPECT_NE(o.reason.find("1 is in another cluster"), std::string::npos) << o.reason;
  Outcome beta = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "full", 1}}, "beta"), Default());
  ASSERT_EQ(beta.code, Code::kSuccess);
  EXPECT_EQ(beta.plan.placements[0].cluster, "beta");
}

TEST(Allocator, ImpossibleRequestsAreUnresolvable) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0), Gpu("n1", 1)};
  auto code = [&](RequestItem item) { return Allocate(f, Req("p/a", {item}), Default()); };
  EXPECT_EQ(code({"Z100", "full", 1}).code, Code::kUnschedulableAndUnresolvable);
  EXPECT_EQ(code({"H200-SXM-141GB", "3g.20gb", 1}).code, Code::kUnschedulableAndUnresolvable);
  Outcome too_many = code({"H200-SXM-141GB", "3g.71gb", 5});
  EXPECT_EQ(too_many.code, Code::kUnschedulableAndUnresolvable);
  EXPECT_NE(too_many.reason.find("could hold (4)"), std::string::npos) << too_many.reason;
  EXPECT_EQ(code({"H200-SXM-141GB", "full", 0}).code, Code::kUnschedulableAndUnresolvable);
  EXPECT_EQ(FleetCapacity(f, "H200-SXM-141GB", "1g.18gb"), 14);
  // A share is a part of a whole GPU: 1..999 thousandths, never of a MIG profile.
  for (RequestItem bad : {Share("H200-SXM-141GB", 1000), Share("H200-SXM-141GB", -5), Share("H200-SXM-141GB", 500, "3g.71gb")}) {
    const Outcome o = code(bad);
    EXPECT_EQ(o.code, Code::kUnschedulableAndUnresolvable) << bad.share_milli;
    EXPECT_NE(o.reason.find("a share is 1 to 999 thousandths"), std::string::npos) << o.reason;
  }
  // A MIG profile belongs to one model; an unknown name among several is still unknown.
  EXPECT_NE(code({"H200-SXM-141GB|H100-SXM5-80GB", "3g.71gb", 1}).reason.find("names one GPU model"), std::string::npos);
  EXPECT_EQ(code({"H200-SXM-141GB|Z100", "full", 1}).reason, "unknown GPU model \"Z100\"");
}

// Shares of whole GPUs, as the trace's GPU-sharing pods ask for: each goes to the tightest GPU
// that holds it, no GPU is shared beyond its whole, a shared GPU is no longer whole for anyone,
// and releasing a holder frees exactly its share.
TEST(Allocator, SharesTimeSliceWholeGpusWithoutOvercommitting) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0), Gpu("n1", 1)};
  f.Reindex();
  auto share = [&](const std::string& pool, int32_t milli) {
    Request req = Req(pool, {Share("H200-SXM-141GB", milli)});
    Outcome o = Allocate(f, req, Default());
    if (o.code == Code::kSuccess) {
      EXPECT_EQ(o.plan.placements[0].action, Action::kShareGpu);
      EXPECT_EQ(o.plan.placements[0].share_milli, milli);
      ApplyPlan(f, req, o.plan);
    }
    return o;
  };
  EXPECT_EQ(share("p/a", 600).plan.placements[0].gpu_uuid, "GPU-n1-0");
  EXPECT_EQ(share("p/b", 500).plan.placements[0].gpu_uuid, "GPU-n1-1") << "500 does not fit beside 600";
  EXPECT_EQ(f.gpus[0].SharedMilli(), 600);
  EXPECT_EQ(f.gpus[1].SharedMilli(), 500);
  EXPECT_EQ(share("p/c", 400).plan.placements[0].gpu_uuid, "GPU-n1-0") << "the tightest GPU that holds it";
  EXPECT_EQ(f.gpus[0].SharedMilli(), 1000);
  const Outcome too_big = share("p/d", 600);
  EXPECT_EQ(too_big.code, Code::kUnschedulable);
  EXPECT_NE(too_big.reason.find("too little left for the share"), std::string::npos) << too_big.reason;
  const Outcome whole = Allocate(f, Req("p/e", {{"H200-SXM-141GB", "full", 1}}), Default());
  EXPECT_EQ(whole.code, Code::kUnschedulable);
  EXPECT_NE(whole.reason.find("are shared by others"), std::string::npos) << whole.reason;
  ReleasePool(f, "p/a");
  EXPECT_EQ(f.gpus[0].SharedMilli(), 400);
  ASSERT_EQ(f.gpus[0].shares.size(), 1u);
  EXPECT_EQ(f.gpus[0].shares[0].owner, "p/c");
  ReleasePool(f, "p/c");
  EXPECT_TRUE(f.gpus[0].Idle());
  EXPECT_EQ(Allocate(f, Req("p/e", {{"H200-SXM-141GB", "full", 1}}), Default()).code, Code::kSuccess);
}

// With FGD's fragmentation score (against one expected pod: a whole GPU and 10 CPUs), a pod
// goes where fragmentation grows least; among equals, where the fewest idle GPUs lose their
// share of the node's CPU (the Stranding score). Node "x" has 30 of its 100 CPUs left for 4
// idle GPUs, "y" all 100: fragmentation is the same either way, and on "x" the pod leaves fewer
// GPUs stranded (it takes one of them). A node where the pod would leave too little CPU for the
// expected pod ("tight") loses to both, whatever the stranding.
TEST(Allocator, FragmentationComesFirstThenStranding) {
  const std::shared_ptr<const Profile> fgd = FragmentationAwareProfile({{{10000, 0, 1, 1000, ""}, 1.0}});
  auto fleet = [](std::vector<std::pair<std::string, int64_t>> nodes) {
    FleetSnapshot f;
    for (const auto& [name, cpu_left] : nodes) {
      f.nodes.push_back({name, cpu_left, 1 << 20, 25000, 1 << 18});
      for (int i = 0; i < 4; ++i) {
        f.gpus.push_back(Gpu(name, i));
        f.gpus.back().node_room = static_cast<int32_t>(f.nodes.size() - 1);
      }
    }
    f.Reindex();
    return f;
  };
  RequestItem pod{"H200-SXM-141GB", "full", 1, 1000, 1024, true};
  auto node_of = [&](const FleetSnapshot& f) {
    const Outcome o = Allocate(f, Req("p/a", {pod}), *fgd);
    return o.code == Code::kSuccess ? o.plan.placements[0].node : o.reason;
  };
  EXPECT_EQ(node_of(fleet({{"y", 100000}, {"x", 30000}})), "x");
  EXPECT_EQ(node_of(fleet({{"tight", 10500}, {"y", 100000}})), "y");
  // A share too.
  pod.share_milli = 300;
  EXPECT_EQ(node_of(fleet({{"y", 100000}, {"x", 30000}})), "x");
  EXPECT_EQ(node_of(fleet({{"tight", 10500}, {"y", 100000}})), "y");
}

// Where FGD and the stranding key find two shared GPUs equal, the fragmentation-aware profile
// takes the first (FGD's own rule), the default one the tightest.
TEST(Allocator, EqualSharedGpusGoFirstUnderFragmentationTightestByDefault) {
  FleetSnapshot f;
  f.nodes.push_back({"n", 100000, 1 << 20, 25000, 1 << 18});
  for (int i = 0; i < 4; ++i) {
    f.gpus.push_back(Gpu("n", i));
    f.gpus.back().node_room = 0;
  }
  f.gpus[0].shares = {{"other/a", 400}};
  f.gpus[1].shares = {{"other/b", 600}};
  f.Reindex();
  RequestItem pod{"H200-SXM-141GB", "full", 1, 1000, 1024, true};
  pod.share_milli = 300;
  auto gpu_under = [&](const Profile& profile) {
    const Outcome o = Allocate(f, Req("p/a", {pod}), profile);
    return o.code == Code::kSuccess ? o.plan.placements[0].gpu_uuid : o.reason;
  };
  // A typical pod wants a whole GPU: both shared GPUs are fragmented for it alike.
  EXPECT_EQ(gpu_under(*FragmentationAwareProfile({{{10000, 0, 1, 1000, ""}, 1.0}})), "GPU-n-0");
  EXPECT_EQ(gpu_under(Default()), "GPU-n-1");
}

// An item may name several models, or any ("*"), for whole GPUs and shares; GPUs of a model the
// catalogue does not know are chosen when a request names it.
TEST(Allocator, ItemsMayNameSeveralModelsOrAny) {
  catalog::GpuModel t4{"T4", "", 16, 0, 0, false, {}, {}};
  FleetSnapshot f;
  f.gpus = {Gpu("a", 0, "", "H100-SXM5-80GB"), Gpu("b", 0), Gpu("c", 0)};
  f.gpus[2].model = &t4;
  f.gpus[2].uuid = "GPU-t4";
  f.Reindex();
  auto where = [&](const std::string& model) {
    Outcome o = Allocate(f, Req("p/a", {{model, "full", 1}}), Default());
    return o.code == Code::kSuccess ? o.plan.placements[0].gpu_uuid : o.reason;
  };
  EXPECT_EQ(where("T4"), "GPU-t4");
  EXPECT_EQ(where("T4|H200-SXM-141GB"), "GPU-b-0");  // the first of the allowed GPUs
  EXPECT_EQ(where("*"), "GPU-a-0");
  f.gpus[0].owner = f.gpus[1].owner = "other/pool";
  f.Reindex();
  EXPECT_EQ(where("*"), "GPU-t4");
  EXPECT_NE(where("H100-SXM5-80GB|H200-SXM-141GB").find("no H100-SXM5-80GB|H200-SXM-141GB GPU can take"), std::string::npos)
      << where("H100-SXM5-80GB|H200-SXM-141GB");
}

TEST(Allocator, AllOrNothing) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0), Gpu("n1", 1, "3g.71gb@0 3g.71gb@4")};
  f.gpus[1].instances[0].busy = true;
  f.gpus[1].instances[1].busy = true;
  // The full GPU fits; the 3g does not (the idle GPU is taken by the first item).
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "full", 1}, {"H200-SXM-141GB", "3g.71gb", 1}}),
                       Default());
  EXPECT_EQ(o.code, Code::kUnschedulable);
  EXPECT_TRUE(o.plan.placements.empty());
  EXPECT_TRUE(o.plan.gpu_changes.empty());
  EXPECT_TRUE(f.gpus[0].owner.empty()) << "the snapshot is never changed";
}

// --- property test -----------------------------------------------------------------------

struct DeviceOwner {
  std::string gpu;
  int start;  // -1 for the whole GPU
  bool operator<(const DeviceOwner& o) const { return std::tie(gpu, start) < std::tie(o.gpu, o.start); }
};

std::map<DeviceOwner, std::string> Owners(const FleetSnapshot& f) {
  std::map<DeviceOwner, std::string> out;
  for (const GpuState& g : f.gpus) {
    if (!g.owner.empty()) out[{g.uuid, -1}] = g.owner;
    for (const InstanceState& i : g.instances) {
      if (!i.owner.empty()) out[{g.uuid, i.start}] = i.owner;
    }
  }
  return out;
}

TEST(AllocatorProperty, RandomSequencesKeepTheInvariants) {
  const char* models[] = {"H200-SXM-141GB", "H100-SXM5-80GB", "A100-80GB"};
  std::mt19937 rng(20261202);
  // Half the rounds decide with FGD's fragmentation score too, against a few pod shapes.
  TypicalPods typical;
  for (auto [gpus, milli, weight] : {std::tuple{1, 500, 0.4}, {1, 1000, 0.3}, {2, 1000, 0.2}, {0, 0, 0.1}}) {
    typical.push_back({{4000, 0, gpus, milli, ""}, weight});
  }
  const std::shared_ptr<const Profile> fgd = FragmentationAwareProfile(typical);
  int shared = 0;
  int allocations = 0, failures = 0, reconfigurations = 0;
  for (int round = 0; round < 100; ++round) {
    FleetSnapshot f;
    const int nodes = 1 + static_cast<int>(rng() % 4);
    for (int n = 0; n < nodes; ++n) {
      const std::string model = models[rng() % 3];
      const catalog::GpuModel& m = *catalog::FindModel(model);
      std::vector<catalog::Layout> layouts = catalog::MaximalLayouts(m);
      for (int i = 0; i < 4; ++i) {
        GpuState g = Gpu("node" + std::to_string(n), i, "", model);
        if (rng() % 2) {
          g.mig_enabled = true;
          const catalog::Layout& l = layouts[rng() % layouts.size()];
          for (const catalog::Instance& inst : l) {
            if (rng() % 3 == 0) continue;  // leave some slots empty
            g.instances.push_back({inst.profile, inst.start, "", "", rng() % 6 == 0});
          }
        } else {
          g.busy = rng() % 8 == 0;
        }
        g.healthy = rng() % 20 != 0;
        f.gpus.push_back(std::move(g));
      }
    }
    f.Reindex();
    const Profile& profile = round % 2 == 0 ? Default() : *fgd;
    std::vector<std::string> live;
    for (int step = 0; step < 50; ++step) {
      if (!live.empty() && rng() % 3 == 0) {
        size_t k = rng() % live.size();
        ReleasePool(f, live[k]);
        live.erase(live.begin() + static_cast<long>(k));
        continue;
      }
      const std::string model = models[rng() % 3];
      const catalog::GpuModel& m = *catalog::FindModel(model);
      std::vector<RequestItem> items;
      for (int k = 0, n = 1 + static_cast<int>(rng() % 2); k < n; ++k) {
        std::string p = rng() % 4 == 0 ? "full" : std::string(m.profiles[rng() % m.profiles.size()].name);
        const int32_t share = p == "full" && rng() % 2 == 0 ? 100 + static_cast<int32_t>(rng() % 800) : 0;
        RequestItem item{rng() % 8 == 0 && p == "full" ? "*" : model, p, 1 + static_cast<int>(rng() % 3)};
        item.share_milli = share;
        items.push_back(std::move(item));
      }
      const std::string pool = "ns/pool-" + std::to_string(round) + "-" + std::to_string(step);
      Request req = Req(pool, items);
      Outcome o = Allocate(f, req, profile);
      // The index changes which GPUs are visited, never the decision.
      const Outcome scanned = Allocate(f, req, profile, /*scan_fleet=*/true);
      ASSERT_EQ(o.code, scanned.code) << o.reason << " / " << scanned.reason;
      ASSERT_EQ(o.reason, scanned.reason);
      ASSERT_EQ(o.plan.placements.size(), scanned.plan.placements.size());
      for (size_t k = 0; k < o.plan.placements.size(); ++k) {
        ASSERT_EQ(o.plan.placements[k].gpu_uuid, scanned.plan.placements[k].gpu_uuid);
        ASSERT_EQ(o.plan.placements[k].start, scanned.plan.placements[k].start);
        ASSERT_EQ(o.plan.placements[k].action, scanned.plan.placements[k].action);
      }
      if (o.code != Code::kSuccess) {
        ++failures;
        EXPECT_FALSE(o.reason.empty());
        continue;
      }
      ++allocations;
      // Count check: exactly the devices asked for.
      size_t want = 0;
      for (const RequestItem& it : items) want += static_cast<size_t>(it.count);
      ASSERT_EQ(o.plan.placements.size(), want);
      // A reconfigured GPU was idle before; a GPU that only gains instances keeps its old ones.
      for (const auto& [uuid, change] : o.plan.gpu_changes) {
        const GpuState& before = *std::find_if(f.gpus.begin(), f.gpus.end(),
                                               [&](const GpuState& g) { return g.uuid == uuid; });
        if (change.reconfigure) {
          ++reconfigurations;
          ASSERT_TRUE(before.Idle()) << uuid << " had work or allocations and was reconfigured";
        } else {
          for (const InstanceState& i : before.instances) {
            ASSERT_TRUE(std::find(change.layout.begin(), change.layout.end(),
                                  catalog::Instance{i.profile, i.start}) != change.layout.end())
                << uuid << " lost an instance without reconfiguration";
          }
        }
      }
      const auto owners_before = Owners(f);
      ApplyPlan(f, req, o.plan);
      live.push_back(pool);
      // Nobody's devices changed hands; the new pool got exactly its devices.
      const auto owners_after = Owners(f);
      size_t mine = 0;
      for (const auto& [dev, owner] : owners_after) {
        auto was = owners_before.find(dev);
        if (was != owners_before.end()) {
          ASSERT_EQ(was->second, owner) << dev.gpu << "@" << dev.start;
        }
        if (owner == pool) ++mine;
      }
      // Shares: only on whole GPUs nobody holds, never beyond the whole GPU.
      for (const GpuState& g : f.gpus) {
        int32_t sum = 0;
        for (const GpuShare& s : g.shares) {
          sum += s.milli;
          if (s.owner == pool) ++mine, ++shared;
        }
        ASSERT_LE(sum, 1000) << g.uuid;
        ASSERT_TRUE(g.shares.empty() || (!g.mig_enabled && g.owner.empty())) << g.uuid;
      }
      ASSERT_EQ(mine, want);
      // Every layout stays legal and no busy device lost its GPU.
      for (const GpuState& g : f.gpus) {
        ASSERT_TRUE(catalog::ValidateLayout(*g.model, g.Layout()).ok()) << g.uuid;
        if (!g.mig_enabled) {
          ASSERT_TRUE(g.instances.empty());
        }
      }
    }
  }
  // The random fleets exercise every path, not only the easy one.
  EXPECT_GT(allocations, 500);
  EXPECT_GT(failures, 100);
  EXPECT_GT(reconfigurations, 50);
  EXPECT_GT(shared, 100);
}

// A pool's MIG instances on new GPUs take the fewest GPUs whose legal layouts hold them all:
// 1g.18gb, 1g.35gb, 2 x 2g.35gb and 2 x 4g.71gb fit on two H200s (4g+2g+1g twice), which a
// device-by-device choice spread over three.
TEST(Allocator, APoolsNewMigInstancesTakeTheFewestGpus) {
  FleetSnapshot f;
  for (int i = 0; i < 8; ++i) f.gpus.push_back(Gpu("n1", i));
  for (int i = 0; i < 8; ++i) f.gpus.push_back(Gpu("n2", i, "-"));
  const Request req = Req("p/a", {{"H200-SXM-141GB", "1g.18gb", 1},
                                  {"H200-SXM-141GB", "1g.35gb", 1},
                                  {"H200-SXM-141GB", "2g.35gb", 2},
                                  {"H200-SXM-141GB", "4g.71gb", 2}});
  Outcome o = Allocate(f, req, Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  EXPECT_EQ(o.plan.gpu_changes.size(), 2u);
  for (const auto& [uuid, change] : o.plan.gpu_changes) {
    EXPECT_TRUE(catalog::ValidateLayout(*catalog::FindModel("H200-SXM-141GB"), change.layout).ok()) << uuid;
    EXPECT_EQ(change.layout.size(), 3u);
    EXPECT_TRUE(uuid.starts_with("GPU-n2-")) << "GPUs already in MIG mode need no mode change";
  }
  ASSERT_EQ(o.plan.placements.size(), 6u);
  std::map<size_t, int> per_item;
  for (const Placement& p : o.plan.placements) {
    ++per_item[p.item];
    EXPECT_EQ(p.profile, req.items[p.item].profile);
  }
  EXPECT_EQ(per_item, (std::map<size_t, int>{{0, 1}, {1, 1}, {2, 2}, {3, 2}}));
  // Applied, the pool owns exactly its six instances on those two GPUs.
  ApplyPlan(f, req, o.plan);
  int owned = 0;
  for (const GpuState& g : f.gpus) {
    for (const InstanceState& i : g.instances) owned += i.owner == "p/a" ? 1 : 0;
  }
  EXPECT_EQ(owned, 6);
}

// Every cycle goes through the profile's plugins, a planned MIG layout's too: a filter that
// refuses a GPU keeps layouts off it, and a scorer added to the profile moves them.
TEST(Allocator, PlannedLayoutsGoWhereThePluginsSay) {
  class AvoidGpu final : public FilterPlugin {
   public:
    explicit AvoidGpu(std::string uuid) : uuid_(std::move(uuid)) {}
    std::string_view Name() const override { return "AvoidGpu"; }
    std::string_view Filter(const CycleState&, const RequestItem&, const GpuState& g) const override {
      return g.uuid == uuid_ ? "are avoided" : "";
    }

   private:
    std::string uuid_;
  };
  class PreferLast final : public ScorePlugin {
   public:
    std::string_view Name() const override { return "PreferLast"; }
    int64_t Score(const CycleState& s, const RequestItem&, const GpuState& g, const Option&) const override {
      return s.layout != nullptr ? int64_t{g.index} * 1'000'000'000'000'000 : 0;
    }
  };
  FleetSnapshot f;
  for (int i = 0; i < 4; ++i) f.gpus.push_back(Gpu("n1", i, "-"));
  const Request req = Req("p/a", {{"H200-SXM-141GB", "3g.71gb", 2}});  // one layout of both
  auto gpus_of = [](const Outcome& o) {
    std::set<std::string> out;
    for (const Placement& p : o.plan.placements) out.insert(p.gpu_uuid);
    return out;
  };
  const Outcome plain = Allocate(f, req, Default());
  ASSERT_EQ(plain.code, Code::kSuccess) << plain.reason;
  ASSERT_EQ(plain.plan.placements.size(), 2u);
  EXPECT_EQ(gpus_of(plain), std::set<std::string>{"GPU-n1-0"}) << "one layout, on the first GPU among equals";

  Profile avoiding = Default();
  avoiding.filters.push_back(std::make_shared<AvoidGpu>("GPU-n1-0"));
  const Outcome moved = Allocate(f, req, avoiding);
  ASSERT_EQ(moved.code, Code::kSuccess) << moved.reason;
  EXPECT_EQ(gpus_of(moved), std::set<std::string>{"GPU-n1-1"});

  Profile scoring = Default();
  scoring.scorers.push_back(std::make_shared<PreferLast>());
  const Outcome last = Allocate(f, req, scoring);
  ASSERT_EQ(last.code, Code::kSuccess) << last.reason;
  EXPECT_EQ(gpus_of(last), std::set<std::string>{"GPU-n1-3"});
  EXPECT_EQ(gpus_of(Allocate(f, req, scoring, /*scan_fleet=*/true)), std::set<std::string>{"GPU-n1-3"});
}

// What exists comes first: a free instance and free slots on a GPU in use are taken before any
// idle GPU is laid out anew, and a GPU with running work is never reconfigured.
TEST(Allocator, ExistingRoomComesBeforeNewLayouts) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0, "3g.71gb@0 1g.18gb@4"), Gpu("n1", 1, "-"), Gpu("n1", 2, "7g.141gb@0")};
  f.gpus[0].instances[0].owner = "other/pool";
  f.gpus[2].instances[0].busy = true;  // someone's work, not a pool's
  Outcome o = Allocate(f, Req("p/a", {{"H200-SXM-141GB", "1g.18gb", 3}, {"H200-SXM-141GB", "3g.71gb", 1}}), Default());
  ASSERT_EQ(o.code, Code::kSuccess) << o.reason;
  int on_first = 0;
  for (const Placement& p : o.plan.placements) {
    on_first += p.gpu_uuid == "GPU-n1-0" ? 1 : 0;
    EXPECT_NE(p.gpu_uuid, "GPU-n1-2");
  }
  EXPECT_EQ(on_first, 3) << "the free 1g.18gb and two new ones in GPU 0's free slots";
  ASSERT_TRUE(o.plan.gpu_changes.count("GPU-n1-0"));
  EXPECT_FALSE(o.plan.gpu_changes.at("GPU-n1-0").reconfigure);
  EXPECT_TRUE(o.plan.gpu_changes.count("GPU-n1-1")) << "the 3g.71gb on the idle GPU";
}

TEST(MigPlan, PacksRandomDemandsLegallyAndExactly) {
  std::mt19937 rng(7);
  for (const char* name : {"H200-SXM-141GB", "H100-SXM5-80GB", "A100-SXM4-40GB", "A30-24GB"}) {
    const catalog::GpuModel& m = *catalog::FindModel(name);
    for (int c = 0; c < 200; ++c) {
      std::map<const catalog::MigProfile*, int> demand;
      const int n = 1 + static_cast<int>(rng() % 16);
      int slices = 0;
      for (int k = 0; k < n; ++k) {
        const catalog::MigProfile* p = &m.profiles[rng() % m.profiles.size()];
        ++demand[p];
        slices += p->memory_slices;
      }
      const std::vector<catalog::Layout> layouts = PackInstances(m, demand);
      ASSERT_FALSE(layouts.empty()) << name;
      std::map<const catalog::MigProfile*, int> got;
      for (const catalog::Layout& l : layouts) {
        EXPECT_TRUE(catalog::ValidateLayout(m, l).ok()) << name << ": " << catalog::FormatLayout(l);
        for (const catalog::Instance& i : l) ++got[i.profile];
      }
      EXPECT_EQ(got, demand) << name;
      // Never more GPUs than one a profile's worth of instances, nor fewer than memory allows.
      EXPECT_GE(static_cast<int>(layouts.size()), (slices + m.memory_slices - 1) / m.memory_slices) << name;
    }
  }
  const catalog::GpuModel& h200 = *catalog::FindModel("H200-SXM-141GB");
  EXPECT_TRUE(PackInstances(h200, {}).empty());
  EXPECT_TRUE(PackInstances(h200, {{&h200.profiles[0], 0}}).empty());
  const catalog::GpuModel& a100 = *catalog::FindModel("A100-SXM4-40GB");
  EXPECT_TRUE(PackInstances(h200, {{&a100.profiles[0], 1}}).empty()) << "another model's profile";
  // Seven 1g.18gb fill one H200; an eighth takes a second.
  EXPECT_EQ(PackInstances(h200, {{catalog::FindProfile(h200, "1g.18gb"), 7}}).size(), 1u);
  EXPECT_EQ(PackInstances(h200, {{catalog::FindProfile(h200, "1g.18gb"), 8}}).size(), 2u);
}

TEST(Defrag, FreesRoomForLargeProfilesAndLeavesHeldAndRunningInstancesAlone) {
  FleetSnapshot f;
  f.gpus = {Gpu("n1", 0, "3g.71gb@0 1g.18gb@4 1g.18gb@5"),  // a pool's 3g, two free 1g
            Gpu("n1", 1, "1g.18gb@0 1g.18gb@1 1g.18gb@2 1g.18gb@3 1g.18gb@4 1g.18gb@5 1g.18gb@6"),
            Gpu("n1", 2, "3g.71gb@0 1g.18gb@4"),  // the 3g runs someone's work
            Gpu("n1", 3, "4g.71gb@0 3g.71gb@4"),  // freeing the 3g gives room for no more than a 3g
            Gpu("n1", 4, "1g.18gb@0 1g.18gb@1"),  // unhealthy
            Gpu("n1", 5, "")};                     // MIG off
  f.gpus[0].instances[0].owner = "vision/train";
  f.gpus[2].instances[0].busy = true;
  f.gpus[3].instances[0].owner = "vision/train";
  f.gpus[4].healthy = false;
  f.gpus.push_back(Gpu("n1", 6, "1g.18gb@0 1g.18gb@1 1g.18gb@2 1g.18gb@4"));  // three free 1g, a pool's 1g@4
  f.gpus[6].instances[3].owner = "vision/infer";
  const DefragPlan plan = PlanDefrag(f);
  ASSERT_EQ(plan.moves.size(), 2u) << "GPU 1 is idle: the allocator lays it out anew itself";
  EXPECT_EQ(plan.moves[0].gpu_uuid, "GPU-n1-0");
  EXPECT_EQ(catalog::FormatLayout(plan.moves[0].after), "3g.71gb@0");
  EXPECT_EQ(catalog::FormatLayout(plan.moves[0].removed), "1g.18gb@4 1g.18gb@5");
  EXPECT_EQ(plan.moves[0].largest_before, "1g.35gb") << "slices 6-7 are free now (a 2g may not start at 6)";
  EXPECT_EQ(plan.moves[0].largest_after, "3g.71gb");
  EXPECT_EQ(plan.moves[1].gpu_uuid, "GPU-n1-6");
  EXPECT_EQ(catalog::FormatLayout(plan.moves[1].after), "1g.18gb@4");
  EXPECT_EQ(plan.moves[1].largest_after, "4g.71gb");
  const auto& before = plan.before.at("H200-SXM-141GB");
  const auto& after = plan.after.at("H200-SXM-141GB");
  EXPECT_EQ(after.at("7g.141gb"), before.at("7g.141gb")) << "no GPU a pool uses can be whole again";
  EXPECT_GT(after.at("3g.71gb"), before.at("3g.71gb"));
  EXPECT_EQ(RoomFor(*f.gpus[0].model, {}, {}, *catalog::FindProfile(*f.gpus[0].model, "1g.18gb")), 7);
}

TEST(DefragProperty, NeverTouchesAHeldInstanceOrABusyGpuAndEveryLayoutIsLegal) {
  std::mt19937 rng(20261204);
  int moves = 0;
  const char* models[] = {"H200-SXM-141GB", "H100-SXM5-80GB", "A100-80GB", "A30-24GB"};
  std::map<std::string, std::vector<catalog::Layout>> maximal;
  for (const char* model : models) maximal[model] = catalog::MaximalLayouts(*catalog::FindModel(model));
  for (int round = 0; round < 150; ++round) {
    FleetSnapshot f;
    for (const char* model : models) {
      const std::vector<catalog::Layout>& layouts = maximal[model];
      for (int i = 0; i < 4; ++i) {
        GpuState g = Gpu(std::string("node-") + model, i, rng() % 5 == 0 ? "" : "-", model);
        if (g.mig_enabled) {
          for (const catalog::Instance& inst : layouts[rng() % layouts.size()]) {
            if (rng() % 4 == 0) continue;
            g.instances.push_back({inst.profile, inst.start, "", rng() % 3 == 0 ? "ns/pool" : "", rng() % 9 == 0});
          }
        }
        g.healthy = rng() % 15 != 0;
        f.gpus.push_back(std::move(g));
      }
    }
    const DefragPlan plan = PlanDefrag(f);
    for (const DefragMove& mv : plan.moves) {
      ++moves;
      const GpuState& g = *std::find_if(f.gpus.begin(), f.gpus.end(), [&](const GpuState& x) { return x.uuid == mv.gpu_uuid; });
      ASSERT_TRUE(g.healthy);
      ASSERT_FALSE(g.busy);
      for (const InstanceState& i : g.instances) {
        ASSERT_FALSE(i.busy) << "a GPU where work runs is left alone";
        const bool kept = std::find(mv.after.begin(), mv.after.end(), catalog::Instance{i.profile, i.start}) != mv.after.end();
        const bool gone = std::find(mv.removed.begin(), mv.removed.end(), catalog::Instance{i.profile, i.start}) != mv.removed.end();
        ASSERT_NE(kept, gone) << "every instance is either kept or removed";
        if (!i.owner.empty()) {
          ASSERT_TRUE(kept) << "a held instance is never touched";
        }
      }
      ASSERT_TRUE(catalog::ValidateLayout(*g.model, mv.after).ok()) << catalog::FormatLayout(mv.after);
      ASSERT_FALSE(mv.removed.empty());
      const catalog::MigProfile* after = catalog::FindProfile(*g.model, mv.largest_after);
      ASSERT_NE(after, nullptr);
      const catalog::MigProfile* before = catalog::FindProfile(*g.model, mv.largest_before);
      ASSERT_TRUE(before == nullptr || after->memory_slices > before->memory_slices) << "each move gains room";
    }
    for (const auto& [model, rooms] : plan.after) {
      for (const auto& [profile, n] : rooms) {
        if (catalog::FindProfile(*catalog::FindModel(model), profile)->memory_slices >= 4) {
          ASSERT_GE(n, plan.before.at(model).at(profile)) << model << " " << profile;
        }
      }
    }
  }
  EXPECT_GT(moves, 100) << "the random fleets exercise the planner";
}

TEST(Defrag, APoolThatAllowsItMovesIdleInstancesToEmptyAGpu) {
  FleetSnapshot f;
  // GPU 0: the movable pool's 3g.71gb and a free one; GPU 1: another pool's 3g.71gb and a free
  // one; GPU 2: idle. Destroying a free instance gains nothing on either.
  f.gpus = {Gpu("n1", 0, "3g.71gb@0 3g.71gb@4"), Gpu("n1", 1, "3g.71gb@0 3g.71gb@4"), Gpu("n1", 2, "-")};
  f.gpus[0].instances[0].owner = "ns/movable";
  f.gpus[1].instances[0].owner = "ns/other";
  EXPECT_TRUE(PlanDefrag(f).moves.empty() || PlanDefrag(f).moves[0].relocations.empty()) << "only pools that allow it";
  DefragPlan plan = PlanDefrag(f, {"ns/movable"});
  const auto emptied = std::find_if(plan.moves.begin(), plan.moves.end(), [](const DefragMove& m) { return !m.relocations.empty(); });
  ASSERT_NE(emptied, plan.moves.end());
  EXPECT_EQ(emptied->gpu_uuid, "GPU-n1-0");
  ASSERT_EQ(emptied->relocations.size(), 1u);
  const Relocation& r = emptied->relocations[0];
  EXPECT_EQ(r.pool, "ns/movable");
  EXPECT_EQ(r.to_gpu, "GPU-n1-1");
  EXPECT_EQ(r.to_start, 4);
  EXPECT_EQ(r.to_instance, "GPU-n1-1-mig4") << "the free instance there, nothing created";
  EXPECT_EQ(emptied->largest_after, "7g.141gb");
  EXPECT_EQ(plan.after["H200-SXM-141GB"]["7g.141gb"], plan.before["H200-SXM-141GB"]["7g.141gb"] + 1);
  // Work on the instance, or nowhere to go, and it stays.
  f.gpus[0].instances[0].busy = true;
  for (const DefragMove& m : PlanDefrag(f, {"ns/movable"}).moves) EXPECT_TRUE(m.relocations.empty());
  f.gpus[0].instances[0].busy = false;
  f.gpus[1].instances[1].owner = "ns/other";
  for (const DefragMove& m : PlanDefrag(f, {"ns/movable"}).moves) EXPECT_TRUE(m.relocations.empty()) << "the idle GPU is no target";
}

TEST(DefragProperty, MovesOnlyIdleInstancesOfPoolsThatAllowItToLegalPlaces) {
  std::mt19937 rng(20261205);
  int relocated = 0;
  const char* models[] = {"H200-SXM-141GB", "A100-80GB"};
  const char* pools[] = {"ns/move", "ns/also", "ns/stay"};
  std::map<std::string, std::vector<catalog::Layout>> maximal;
  for (const char* model : models) maximal[model] = catalog::MaximalLayouts(*catalog::FindModel(model));
  for (int round = 0; round < 200; ++round) {
    FleetSnapshot f;
    for (const char* model : models) {
      const std::vector<catalog::Layout>& layouts = maximal[model];
      for (int i = 0; i < 6; ++i) {
        GpuState g = Gpu(std::string("node-") + model, i, "-", model, i % 3 == 0 ? "beta" : "alpha");
        for (const catalog::Instance& inst : layouts[rng() % layouts.size()]) {
          if (rng() % 3 == 0) continue;
          g.instances.push_back({inst.profile, inst.start, g.uuid + "-mig" + std::to_string(inst.start),
                                 rng() % 3 == 0 ? pools[rng() % 3] : "", rng() % 12 == 0});
        }
        g.healthy = rng() % 15 != 0;
        f.gpus.push_back(std::move(g));
      }
    }
    const DefragPlan plan = PlanDefrag(f, {"ns/move", "ns/also"});
    std::map<std::string, const GpuState*> by_uuid;
    for (const GpuState& g : f.gpus) by_uuid[g.uuid] = &g;
    std::set<std::string> emptied, destroyed;
    for (const DefragMove& mv : plan.moves) (mv.relocations.empty() ? destroyed : emptied).insert(mv.gpu_uuid);
    std::map<std::string, catalog::Layout> added;  // target GPU -> new instances
    std::set<std::string> taken;                   // free instances claimed
    for (const DefragMove& mv : plan.moves) {
      if (mv.relocations.empty()) continue;
      const GpuState& src = *by_uuid.at(mv.gpu_uuid);
      ASSERT_TRUE(src.healthy);
      std::multiset<std::tuple<std::string, std::string, int>> held, moved;
      for (const InstanceState& i : src.instances) {
        ASSERT_FALSE(i.busy) << "no work runs on an emptied GPU";
        if (i.owner.empty()) continue;
        ASSERT_TRUE(i.owner == "ns/move" || i.owner == "ns/also") << i.owner << " did not allow moves";
        held.insert({i.owner, std::string(i.profile->name), i.start});
      }
      for (const Relocation& r : mv.relocations) {
        ++relocated;
        moved.insert({r.pool, std::string(r.profile->name), r.from_start});
        const GpuState& t = *by_uuid.at(r.to_gpu);
        ASSERT_EQ(t.model, src.model);
        ASSERT_EQ(t.cluster, src.cluster);
        ASSERT_TRUE(t.healthy && !t.Idle());
        ASSERT_FALSE(emptied.contains(r.to_gpu) || destroyed.contains(r.to_gpu)) << "targets lose nothing";
        if (!r.to_instance.empty()) {
          ASSERT_TRUE(taken.insert(r.to_instance).second) << "a free instance is taken once";
          const auto it = std::find_if(t.instances.begin(), t.instances.end(), [&](const InstanceState& i) { return i.uuid == r.to_instance; });
          ASSERT_NE(it, t.instances.end());
          ASSERT_TRUE(it->owner.empty() && !it->busy && it->profile == r.profile && it->start == r.to_start);
        } else {
          added[r.to_gpu].push_back({r.profile, r.to_start});
        }
      }
      ASSERT_EQ(held, moved) << "every held instance moves, once";
    }
    for (const auto& [uuid, extra] : added) {
      catalog::Layout l = by_uuid.at(uuid)->Layout();
      l.insert(l.end(), extra.begin(), extra.end());
      ASSERT_TRUE(catalog::ValidateLayout(*by_uuid.at(uuid)->model, l).ok()) << catalog::FormatLayout(l);
    }
  }
  EXPECT_GT(relocated, 50) << "the random fleets exercise the moves";
}

}  // namespace
}  // namespace gpuaas::allocator
