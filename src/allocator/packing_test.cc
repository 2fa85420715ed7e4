#include "allocator/packing.h"

#include <gtest/gtest.h>

namespace gpuaas::allocator {
namespace {

NodeSpec Node(int64_t cpu, int gpus, std::string model = "G2", int64_t mem = 1 << 20) {
  return NodeSpec{"n", cpu, mem, gpus, std::move(model)};
}

PodShape Pod(int64_t cpu, int num_gpu, int32_t milli, std::string models = "") {
  return PodShape{cpu, 0, num_gpu, milli, std::move(models)};
}

NodeState State(const NodeSpec& spec, int64_t cpu_left, std::vector<int32_t> gpu_left) {
  NodeState s = NodeState::Empty(spec);
  s.cpu_left = cpu_left;
  for (size_t i = 0; i < gpu_left.size(); ++i) s.gpu_left[i] = gpu_left[i];
  return s;
}

int64_t ScoreOf(std::string_view policy, const NodeSpec& spec, const NodeState& s,
                const PodShape& pod, const TypicalPods* typical = nullptr) {
  PackingContext ctx;
  ctx.typical = typical;
  return PackingPolicyByName(policy)->Score(spec, s, pod, ctx).score;
}

TEST(Packing, ModelAllowed) {
  EXPECT_TRUE(ModelAllowed("", "T4"));
  EXPECT_TRUE(ModelAllowed("V100M16|V100M32", "V100M32"));
  EXPECT_FALSE(ModelAllowed("V100M16|V100M32", "T4"));
  EXPECT_FALSE(ModelAllowed("V100M16|V100M32", "V100M3"));
  EXPECT_FALSE(ModelAllowed("T4", ""));
  EXPECT_TRUE(ModelAllowed("|", "T4"));  // names no model: any
}

TEST(Packing, FitsChecksCpuMemoryModelAndGpuRoom) {
  const NodeSpec spec = Node(16000, 2, "T4", 1000);
  NodeState s = State(spec, 16000, {1000, 300});
  EXPECT_TRUE(Fits(spec, s, Pod(16000, 1, 1000)));
  EXPECT_FALSE(Fits(spec, s, Pod(16001, 1, 1000)));
  EXPECT_FALSE(Fits(spec, s, Pod(1000, 2, 1000)));  // only one whole GPU free
  EXPECT_TRUE(Fits(spec, s, Pod(1000, 1, 300)));
  EXPECT_FALSE(Fits(spec, s, Pod(1000, 1, 1000, "V100M16")));
  PodShape big_memory = Pod(1000, 0, 0);
  big_memory.memory_mib = 1001;
  EXPECT_FALSE(Fits(spec, s, big_memory));
  EXPECT_TRUE(Fits(spec, s, Pod(1000, 0, 0)));  // CPU-only
}

TEST(Packing, BestFitGpusTakesTheTightestGpuOrTheFirstFreeOnes) {
  const NodeSpec spec = Node(64000, 4);
  const NodeState s = State(spec, 64000, {1000, 500, 300, 500});
  GpuChoice c = BestFitGpus(s, Pod(1000, 1, 300));
  ASSERT_EQ(c.count, 1);
  EXPECT_EQ(c.index[0], 2);
  c = BestFitGpus(s, Pod(1000, 1, 400));  // 500 twice: the lower index
  ASSERT_EQ(c.count, 1);
  EXPECT_EQ(c.index[0], 1);
  c = BestFitGpus(State(spec, 64000, {500, 1000, 1000, 1000}), Pod(1000, 2, 1000));
  ASSERT_EQ(c.count, 2);
  EXPECT_EQ(c.index[0], 1);
  EXPECT_EQ(c.index[1], 2);
}

TEST(Packing, PlaceAndRemoveAreExactInverses) {
  const NodeSpec spec = Node(64000, 2);
  NodeState s = NodeState::Empty(spec);
  const PodShape pod = Pod(8000, 1, 250);
  const GpuChoice c = BestFitGpus(s, pod);
  Place(s, pod, c);
  EXPECT_EQ(s.cpu_left, 56000);
  EXPECT_EQ(s.GpuLeftTotal(), 1750);
  Place(s, pod, c, -1);
  EXPECT_EQ(s.cpu_left, 64000);
  EXPECT_EQ(s.FullyFreeGpus(), 2);
}

TEST(Packing, TypicalPodsKeepTheMostPopularShapesAndRenormalise) {
  std::vector<PodShape> pods;
  for (int i = 0; i < 6; ++i) pods.push_back(Pod(1000, 1, 500));
  for (int i = 0; i < 3; ++i) pods.push_back(Pod(2000, 1, 1000));
  pods.push_back(Pod(4000, 8, 1000));
  const TypicalPods all = TypicalPodsOf(pods, 1.0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_DOUBLE_EQ(all[0].weight, 0.6);
  EXPECT_EQ(all[0].shape.gpu_milli, 500);
  const TypicalPods top = TypicalPodsOf(pods, 0.85);  // 6 + 3 = 90% covers 85%
  ASSERT_EQ(top.size(), 2u);
  EXPECT_DOUBLE_EQ(top[0].weight, 6.0 / 9.0);
  EXPECT_DOUBLE_EQ(top[1].weight, 3.0 / 9.0);
}

// A node with GPUs [1000, 400] and 10 CPUs, against: a 0.5-GPU pod with 1 CPU (weight 0.5), a
// whole-GPU pod with 20 CPUs (0.25) and a CPU-only pod (0.25). Idle GPU: 1400 milli.
TypicalPods HandTypical() {
  return {{Pod(1000, 1, 500), 0.5}, {Pod(20000, 1, 1000), 0.25}, {Pod(1000, 0, 0), 0.25}};
}

TEST(Packing, NodeFragmentationByHand) {
  const NodeSpec spec = Node(10000, 2);
  const TypicalPods typical = HandTypical();
  // 0.5-GPU pod: GPU 1 (400) is too small: 400 x 0.5; whole GPU pod lacks CPU: 1400 x 0.25;
  // CPU-only pod: all idle GPU x 0.25.
  EXPECT_DOUBLE_EQ(NodeFragmentation(spec.gpu_model, State(spec, 10000, {1000, 400}), typical), 900);
  EXPECT_DOUBLE_EQ(NodeFragmentation(spec.gpu_model, State(spec, 10000, {0, 0}), typical), 0);
  // The pod names another model: everything is a fragment for it.
  const TypicalPods other = {{Pod(1000, 1, 500, "T4"), 1.0}};
  EXPECT_DOUBLE_EQ(NodeFragmentation(spec.gpu_model, State(spec, 10000, {1000, 400}), other), 1400);
}

TEST(Packing, FgdPicksTheGpuThatLeavesTheLeastFragmentation) {
  const NodeSpec spec = Node(10000, 2);
  const TypicalPods typical = HandTypical();
  const NodeState s = State(spec, 10000, {1000, 400});
  PackingContext ctx;
  ctx.typical = &typical;
  // On GPU 1: fragmentation 900 -> 600 (sigmoid(0.3) = 0.574); on GPU 0: 900 -> 750 (0.537).
  const NodeScore score = PackingPolicyByName("fgd")->Score(spec, s, Pod(1000, 1, 300), ctx);
  EXPECT_EQ(score.score, 57);
  ASSERT_EQ(score.gpus.count, 1);
  EXPECT_EQ(score.gpus.index[0], 1);
  // A whole GPU: 900 -> 0.5-GPU pod 400 x 0.5 + (400 x 0.25) x 2 = 400: sigmoid(0.5) = 0.622.
  EXPECT_EQ(ScoreOf("fgd", spec, s, Pod(1000, 1, 1000), &typical), 62);
}

TEST(Packing, BaselineScoresByHand) {
  const NodeSpec spec = Node(64000, 2);
  const NodeState s = NodeState::Empty(spec);
  const PodShape pod = Pod(8000, 1, 1000);
  // Best fit: 1 - (0.5 x 56/128 + 0.5 x 1000/8000) = 0.71875.
  EXPECT_EQ(ScoreOf("bestfit", spec, s, pod), 71);
  // Dot product: 1 - (64/128 x 8/128 + 2000/8000 x 1000/8000) / 2 = 0.96875.
  EXPECT_EQ(ScoreOf("dotprod", spec, s, pod), 96);
  // GPU packing: an untouched node of 2 GPUs scores 100/3 - 2.
  EXPECT_EQ(ScoreOf("packing", spec, s, pod), 31);
  // A shared GPU with 400 left: 100 - 40/10.
  EXPECT_EQ(ScoreOf("packing", spec, State(spec, 64000, {1000, 400}), Pod(1000, 1, 300)), 96);
  // A free GPU of a node in use: 100/2 - 1.
  EXPECT_EQ(ScoreOf("packing", spec, State(spec, 64000, {1000, 400}), pod), 49);
  // CPU-only pods are indifferent to GPU packing.
  EXPECT_EQ(ScoreOf("packing", spec, s, Pod(1000, 0, 0)), 0);
}

TEST(Packing, NormalizeScoresMinMax) {
  std::vector<int64_t> v{10, 20, 30};
  NormalizeScores(v);
  EXPECT_EQ(v, (std::vector<int64_t>{0, 50, 100}));
  v = {7, 7};
  NormalizeScores(v);
  EXPECT_EQ(v, (std::vector<int64_t>{0, 0}));
  v = {0, 1, 3};
  NormalizeScores(v);
  EXPECT_EQ(v, (std::vector<int64_t>{0, 33, 100}));
}

TEST(Packing, RandomGpusDrawsAmongGpusThatHoldThePod) {
  const NodeSpec spec = Node(64000, 4);
  const NodeState s = State(spec, 64000, {100, 600, 50, 1000});
  std::vector<int> seen(4);
  for (uint64_t draw = 0; draw < 6; ++draw) {
    const GpuChoice c = RandomGpus(s, Pod(1000, 1, 500), draw);
    ASSERT_EQ(c.count, 1);
    ++seen[static_cast<size_t>(c.index[0])];
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 3, 0, 3}));
}

TEST(Packing, RegistryKnowsEveryPolicy) {
  for (std::string_view name : PackingPolicyNames()) {
    const auto p = PackingPolicyByName(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->Name(), name);
  }
  EXPECT_EQ(PackingPolicyByName("tetris"), nullptr);
}

}  // namespace
}  // namespace gpuaas::allocator
