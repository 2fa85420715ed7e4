#include "sim/replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "allocator/allocator.h"
#include "sim/allocated.h"
#include "sim/mig.h"

namespace gpuaas::sim {
namespace {

using allocator::GpuChoice;
using allocator::NodeSpec;
using allocator::PodShape;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kTraces = "test/testdata/traces/alibaba-gpu-v2023/";

// A small random cluster and workload shaped like the trace: mixed node sizes and models,
// sharing, whole-GPU and CPU-only pods, some limited to a model.
std::vector<NodeSpec> RandomNodes(std::mt19937_64& rng, int n) {
  std::vector<NodeSpec> nodes;
  const char* models[] = {"G2", "T4", "V100M32"};
  for (int i = 0; i < n; ++i) {
    const int gpus = 1 << (rng() % 4);
    nodes.push_back({"n" + std::to_string(i), static_cast<int64_t>(8000 + rng() % 120000),
                     static_cast<int64_t>(32768 + rng() % 500000), gpus, models[rng() % 3]});
  }
  return nodes;
}

std::vector<TracePod> RandomPods(std::mt19937_64& rng, int n) {
  std::vector<TracePod> pods;
  for (int i = 0; i < n; ++i) {
    TracePod p;
    p.name = "p" + std::to_string(i);
    p.shape.cpu_milli = static_cast<int64_t>(rng() % 32000);
    p.shape.memory_mib = static_cast<int64_t>(rng() % 65536);
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 2) {
      p.shape.num_gpu = 0;
    } else if (kind < 6) {
      p.shape.num_gpu = 1;
      p.shape.gpu_milli = static_cast<int32_t>(50 + rng() % 950);
    } else {
      p.shape.num_gpu = 1 << (rng() % 4);
      p.shape.gpu_milli = 1000;
    }
    if (rng() % 8 == 0) p.shape.gpu_models = "T4|G2";
    p.creation_time = static_cast<int64_t>(i * 10);
    p.deletion_time = p.creation_time + static_cast<int64_t>(rng() % 5000);
    pods.push_back(std::move(p));
  }
  return pods;
}

// The accounting never overcommits: after every placement and removal, each node's CPU, memory
// and per-GPU share equal its capacity minus what the pods recorded on it hold, and stay within
// capacity. Checked independently of the scheduler's own bookkeeping, for every policy.
TEST(Replay, NeverOvercommitsANodeOrGpu) {
  for (const std::string& name : PolicyNames()) {
    std::mt19937_64 rng(11);
    const std::vector<NodeSpec> nodes = RandomNodes(rng, 40);
    const std::vector<TracePod> pods = RandomPods(rng, 1500);
    std::vector<PodShape> shapes;
    for (const TracePod& p : pods) shapes.push_back(p.shape);
    const std::unique_ptr<Scheduler> engine = MakeScheduler(name, nodes, allocator::TypicalPodsOf(shapes), 3);
    Scheduler& sched = *engine;
    struct Held {
      int node;
      int shape;
      GpuChoice gpus;
    };
    std::vector<Held> held;
    int placed = 0, failed = 0;
    auto check = [&]() {
      for (size_t n = 0; n < nodes.size(); ++n) {
        int64_t cpu = 0, mem = 0;
        std::vector<int64_t> gpu(static_cast<size_t>(nodes[n].gpus));
        for (const Held& h : held) {
          if (h.node != static_cast<int>(n)) continue;
          const PodShape& s = sched.Shape(h.shape);
          cpu += s.cpu_milli;
          mem += s.memory_mib;
          for (int k = 0; k < h.gpus.count; ++k)
            gpu[static_cast<size_t>(h.gpus.index[k])] += s.gpu_milli;
        }
        const allocator::NodeState& st = sched.States()[n];
        ASSERT_LE(cpu, nodes[n].cpu_milli) << name;
        ASSERT_LE(mem, nodes[n].memory_mib) << name;
        ASSERT_EQ(st.cpu_left, nodes[n].cpu_milli - cpu) << name;
        ASSERT_EQ(st.memory_left, nodes[n].memory_mib - mem) << name;
        for (size_t g = 0; g < gpu.size(); ++g) {
          ASSERT_LE(gpu[g], 1000) << name << " node " << n << " gpu " << g;
          ASSERT_EQ(st.gpu_left[g], 1000 - gpu[g]) << name;
        }
      }
    };
    for (size_t i = 0; i < pods.size(); ++i) {
      const int shape = sched.Intern(pods[i].shape);
      GpuChoice gpus;
      const int node = sched.Schedule(shape, &gpus);
      if (node < 0) {
        ++failed;
      } else {
        ++placed;
        const PodShape& s = sched.Shape(shape);
        ASSERT_EQ(gpus.count, s.gpu_milli > 0 ? s.num_gpu : 0) << name;
        if (s.num_gpu > 0) {
          ASSERT_TRUE(
              allocator::ModelAllowed(s.gpu_models, nodes[static_cast<size_t>(node)].gpu_model))
              << name;
        }
        held.push_back({node, shape, gpus});
      }
      if (i % 7 == 6 && !held.empty()) {  // departures
        const size_t k = rng() % held.size();
        sched.Remove(held[k].node, held[k].shape, held[k].gpus);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      }
      if (i % 50 == 0) check();
    }
    check();
    // The allocator's own fleet agrees with what the replay measures, GPU by GPU.
    if (const auto* a = dynamic_cast<const AllocatorScheduler*>(&sched)) {
      std::map<std::string, size_t> by_name;
      for (size_t n = 0; n < nodes.size(); ++n) by_name[nodes[n].name] = n;
      for (const allocator::NodeRoom& room : a->Fleet().nodes) {
        const size_t n = by_name.at(room.name.substr(room.name.find('-') + 1));
        ASSERT_EQ(room.cpu_free_milli, sched.States()[n].cpu_left) << room.name;
        ASSERT_EQ(room.memory_free_mib, sched.States()[n].memory_left) << room.name;
      }
      for (const allocator::GpuState& g : a->Fleet().gpus) {
        const size_t n = by_name.at(g.node.substr(g.node.find('-') + 1));  // "n00012-<name>"
        const int32_t used = g.owner.empty() ? g.SharedMilli() : 1000;
        ASSERT_EQ(sched.States()[n].gpu_left[static_cast<size_t>(g.index)], 1000 - used) << g.uuid;
      }
    }
    EXPECT_GT(placed, 100) << name;
    EXPECT_GT(failed, 0) << name;  // the workload overflows the cluster
    int64_t used = 0;
    for (const Held& h : held) used += sched.Shape(h.shape).TotalGpuMilli();
    EXPECT_EQ(sched.UsedMilli(), used) << name;
    for (const Held& h : held) sched.Remove(h.node, h.shape, h.gpus);
    EXPECT_EQ(sched.UsedMilli(), 0);
    EXPECT_NEAR(sched.FragMilli(),
                MakeScheduler(name, nodes, allocator::TypicalPodsOf(shapes), 3)->FragMilli(), 1e-6);
  }
}

// The pool allocator with only the tier and FGD's fragmentation score decides every GPU pod as
// the node-level FGD policy does: the same node and the same GPUs, pod after pod. FGD's measure
// has one code path, in the allocator's plugin.
TEST(Replay, TheAllocatorsFragmentationScoreDecidesAsTheFgdPolicy) {
  std::mt19937_64 rng(17);
  const std::vector<NodeSpec> nodes = RandomNodes(rng, 100);
  std::vector<TracePod> pods = RandomPods(rng, 1500);
  std::erase_if(pods, [](const TracePod& p) { return p.shape.TotalGpuMilli() == 0; });
  std::vector<PodShape> shapes;
  for (const TracePod& p : pods) shapes.push_back(p.shape);
  const allocator::TypicalPods typical = allocator::TypicalPodsOf(shapes);
  auto fgd_only = std::make_shared<allocator::Profile>();
  fgd_only->filters = allocator::ProfileByName("default")->filters;
  for (const auto& sc : allocator::ProfileByName("default")->scorers) {
    if (sc->Name() == "Tier") fgd_only->scorers.push_back(sc);
  }
  fgd_only->scorers.push_back(allocator::FragmentationScorer(typical));
  AllocatorScheduler ours(nodes, typical, 5, fgd_only);
  PolicyScheduler theirs(nodes, allocator::PackingPolicyByName("fgd"), typical, 5);
  int placed = 0, failed = 0;
  for (size_t i = 0; i < pods.size(); ++i) {
    GpuChoice a, b;
    const int na = ours.Schedule(ours.Intern(pods[i].shape), &a);
    const int nb = theirs.Schedule(theirs.Intern(pods[i].shape), &b);
    ASSERT_EQ(na, nb) << "pod " << i;
    ASSERT_EQ(a.count, b.count) << "pod " << i;
    for (int k = 0; k < a.count; ++k) ASSERT_EQ(a.index[static_cast<size_t>(k)], b.index[static_cast<size_t>(k)]) << "pod " << i;
    (na >= 0 ? placed : failed) += 1;
  }
  EXPECT_GT(placed, 150);
  EXPECT_GT(failed, 50);
}

TEST(Replay, ArrivalOrderIsTheTracePlusSamplesUpToTheTarget) {
  std::mt19937_64 rng(5);
  const std::vector<TracePod> pods = RandomPods(rng, 300);
  int64_t trace_milli = 0;
  for (const TracePod& p : pods) trace_milli += p.shape.TotalGpuMilli();
  const int64_t capacity = trace_milli / 2;  // the trace alone asks for 200%
  std::vector<size_t> order = ArrivalOrder(pods, capacity, 3.0, 42);
  int64_t milli = 0;
  std::map<size_t, int> times;
  for (size_t i : order) {
    milli += pods[i].shape.TotalGpuMilli();
    ++times[i];
  }
  EXPECT_LE(milli, 3 * capacity);
  EXPECT_GT(milli, 3 * capacity - 8000);  // stops at the first sample that would overshoot
  for (size_t i = 0; i < pods.size(); ++i) EXPECT_GE(times[i], 1);
  EXPECT_EQ(order, ArrivalOrder(pods, capacity, 3.0, 42));  // the seed decides
  EXPECT_NE(order, ArrivalOrder(pods, capacity, 3.0, 43));
  EXPECT_EQ(ArrivalOrder(pods, capacity, 0, 42).size(), pods.size());  // no tuning
}

double Published(const std::string& workload, const std::string& policy, int column,
                 const std::vector<uint64_t>& seeds) {
  std::istringstream in(
      Read("test/testdata/traces/fgd-atc23-expected-results/analysis_allo_discrete.csv"));
  std::string line;
  std::getline(in, line);
  double sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    if (f.size() < 136 || f[0] != workload || f[1] != policy) continue;
    if (std::find(seeds.begin(), seeds.end(), std::stoull(f[3])) == seeds.end()) continue;
    sum += std::stod(f[5 + static_cast<size_t>(column)]);
    ++n;
  }
  return n > 0 ? sum / n : NAN;
}

// The simulator reproduces the paper: on the default trace, best fit and FGD land near the
// authors' own results (the full ten-seed comparison is in docs/packing.md; two seeds here keep
// the test quick, so the bound is looser than the 0.5 points measured over ten).
TEST(Replay, ReproducesThePublishedBestFitAndFgd) {
  if (!std::ifstream(kTraces + "openb_node_list_gpu_node.csv"))
    FAIL() << kTraces << " is not readable (the tests run from the repository's root)";
  auto nodes = ParseNodes(Read(kTraces + "openb_node_list_gpu_node.csv"));
  auto pods = ParsePods(Read(kTraces + "openb_pod_list_default.csv"));
  ASSERT_TRUE(nodes.ok() && pods.ok());
  const std::vector<uint64_t> seeds = {42, 43};
  for (const auto& [name, published] : std::vector<std::pair<std::string, std::string>>{
           {"bestfit", "05-BestFit"}, {"fgd", "06-FGD"}}) {
    std::vector<ArrivalResult> runs;
    for (uint64_t s : seeds)
      runs.push_back(RunArrival(*nodes, *pods, name, s));
    const Curve mean = MeanCurve(runs);
    for (int column : {100, 130}) {
      const double theirs = Published("openb_pod_list_default", published, column, seeds);
      ASSERT_FALSE(std::isnan(theirs));
      EXPECT_NEAR(mean.alloc[static_cast<size_t>(column)], theirs, 1.0) << name << " at " << column;
    }
    // Every pod fits until the cluster is nearly full.
    EXPECT_NEAR(mean.alloc[50], 50.0, 0.2) << name;
  }
}

TEST(Replay, ChurnReleasesCapacityAndRetriesWaitingPods) {
  // One node with one GPU. p0 holds it 0..10, p1 (from 1) and p2 (from 2) want it for 10 s
  // each and wait; p3 arrives at 3 and gives up at 5.
  const std::vector<NodeSpec> nodes = {{"n", 64000, 1 << 20, 1, "G2"}};
  std::vector<TracePod> pods;
  const int64_t times[][2] = {{0, 10}, {1, 11}, {2, 12}, {3, 5}};
  for (const auto& t : times) {
    TracePod p;
    p.shape = {1000, 0, 1, 1000, ""};
    p.creation_time = t[0];
    p.deletion_time = t[1];
    pods.push_back(p);
  }
  auto r = RunChurn(nodes, pods, "bestfit", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->placed_at_once, 1);  // p0
  EXPECT_EQ(r->placed_late, 2);     // p1 at 10 (until 20), p2 at 20
  EXPECT_EQ(r->gave_up, 1);         // p3 at 5
  EXPECT_EQ(r->max_pending, 3);
  EXPECT_EQ(r->pending_end, 0);
  // The GPU is busy throughout the arrival window (0..3); 1 pod waits from 1, 2 from 2, 3 from 3.
  EXPECT_NEAR(r->time_avg_alloc, 100.0, 1e-9);
  EXPECT_NEAR(r->avg_pending, (0 * 1 + 1 * 1 + 2 * 1) / 3.0, 1e-9);
  // Twice the speed: arrivals at 0, 0.5 (rounds to 1), 1, 1.5 (2): the same outcome here.
  auto fast = RunChurn(nodes, pods, "bestfit", 1, 2.0);
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->placed_at_once + fast->placed_late + fast->gave_up, 4);
  EXPECT_FALSE(RunChurn(nodes, pods, "bestfit", 1, 0.5).ok());
  TracePod untimed;
  untimed.shape = {1000, 0, 0, 0, ""};
  EXPECT_FALSE(RunChurn(nodes, {untimed}, "fgd", 1).ok());
}

TEST(Replay, MigModeMapsSharesToTheSmallestProfileByMemory) {
  const MigModel* h100 = *FindMigModel("H100-SXM5-80GB");
  EXPECT_EQ(ProfileForShare(*h100, 100)->name, "1g.10gb");  // 1/8 of memory
  EXPECT_EQ(ProfileForShare(*h100, 230)->name, "1g.20gb");  // 2/8
  EXPECT_EQ(ProfileForShare(*h100, 460)->name, "3g.40gb");  // 4/8: 3g before 4g
  EXPECT_EQ(ProfileForShare(*h100, 810), nullptr);          // more than half: a whole GPU
  EXPECT_FALSE(FindMigModel("L40S-48GB").ok());
  // Seven 1g.10gb pods fill one GPU of a one-GPU node; the eighth does not fit.
  const std::vector<NodeSpec> nodes = {{"n", 640000, 1 << 30, 1, "G2"}};
  std::vector<TracePod> pods(8);
  for (TracePod& p : pods) p.shape = {1000, 0, 1, 100, ""};
  const MigResult r = RunMig(nodes, pods, *h100, 1, 0);
  EXPECT_EQ(r.accepted, 7);
  EXPECT_EQ(r.gpus_used, 1);
  EXPECT_NEAR(r.used_gpu_util, 100.0, 1e-9);
}

TEST(Replay, MigModeHoldsPodsToTheirNodesCpuAndMemory) {
  const MigModel* h100 = *FindMigModel("H100-SXM5-80GB");
  // 2.5 CPUs: two 1-CPU pods fit, the third does not, though the GPU has room; a CPU-only pod
  // takes the same CPU.
  std::vector<TracePod> pods(3);
  for (TracePod& p : pods) p.shape = {1000, 10, 1, 100, ""};
  EXPECT_EQ(RunMig({{"n", 2500, 1 << 20, 1, "G2"}}, pods, *h100, 1, 0).accepted, 2);
  pods[0].shape = {1000, 10, 0, 0, ""};
  const MigResult r = RunMig({{"n", 2500, 1 << 20, 1, "G2"}}, pods, *h100, 1, 0);
  EXPECT_EQ(r.accepted, 2);
  EXPECT_NEAR(r.accepted_gpus, 1.0 / 7, 1e-9);  // the CPU-only pod and one MIG pod
  // Memory likewise.
  for (TracePod& p : pods) p.shape = {1, 600, 1, 100, ""};
  EXPECT_EQ(RunMig({{"n", 64000, 1000, 1, "G2"}}, pods, *h100, 1, 0).accepted, 1);
  // A pod of two whole GPUs needs both on one node.
  std::vector<TracePod> two(1);
  two[0].shape = {1000, 0, 2, 1000, ""};
  EXPECT_EQ(RunMig({{"a", 64000, 1 << 20, 1, "G2"}, {"b", 64000, 1 << 20, 1, "G2"}}, two, *h100, 1, 0).accepted, 0);
  EXPECT_EQ(RunMig({{"a", 64000, 1 << 20, 1, "G2"}, {"b", 64000, 1 << 20, 2, "G2"}}, two, *h100, 1, 0).accepted, 1);
}

TEST(Replay, MigChurnDefragmentsWhenFreeInstancesStandInTheWay) {
  const MigModel* h100 = *FindMigModel("H100-SXM5-80GB");
  const std::vector<NodeSpec> nodes = {{"n", 64000, 1 << 20, 1, "G2"}};
  // Seven 1g.10gb pods fill the GPU; six leave, their instances stay, free; a 3g.40gb pod then
  // finds no room, though 6 of 7 compute slices are free.
  std::vector<TracePod> pods(8);
  for (int i = 0; i < 7; ++i) {
    pods[static_cast<size_t>(i)].shape = {1000, 0, 1, 100, ""};
    pods[static_cast<size_t>(i)].creation_time = i;
    pods[static_cast<size_t>(i)].deletion_time = i == 6 ? 100 : 10;
  }
  pods[7].shape = {1000, 0, 1, 460, ""};
  pods[7].creation_time = 20;
  pods[7].deletion_time = 30;
  TracePod cpu_only;  // the last arrival: the averages run to it
  cpu_only.shape = {1000, 0, 0, 0, ""};
  cpu_only.creation_time = 25;
  cpu_only.deletion_time = 26;
  pods.push_back(cpu_only);
  const MigChurnResult off = *RunMigChurn(nodes, pods, *h100, 1, 1, false);
  EXPECT_EQ(off.requests, 8);
  EXPECT_EQ(off.accepted, 7);
  EXPECT_EQ(off.failed, 1);
  EXPECT_EQ(off.failed_fragmented, 1);
  EXPECT_EQ(off.failed_fragmented_mig, 1);
  EXPECT_EQ(off.defrags, 0);
  const MigChurnResult on = *RunMigChurn(nodes, pods, *h100, 1, 1, true);
  EXPECT_EQ(on.accepted, 8);
  EXPECT_EQ(on.failed, 0);
  EXPECT_EQ(on.recovered, 1);
  EXPECT_EQ(on.defrags, 1);
  EXPECT_EQ(on.instances_removed, 6);
  EXPECT_GT(on.time_avg_alloc, off.time_avg_alloc);
  // A failure with too few slices free is not fragmentation, and defragmenting does not help.
  pods[7].shape = {1000, 0, 2, 1000, ""};
  const MigChurnResult full = *RunMigChurn(nodes, pods, *h100, 1, 1, true);
  EXPECT_EQ(full.failed, 1);
  EXPECT_EQ(full.failed_fragmented, 0);
  EXPECT_EQ(full.defrags, 0);
  EXPECT_FALSE(RunMigChurn(nodes, pods, *h100, 1, 0.5, false).ok());
  pods[8].deletion_time = -1;
  EXPECT_FALSE(RunMigChurn(nodes, pods, *h100, 1, 1, false).ok());
}

}  // namespace
}  // namespace gpuaas::sim
