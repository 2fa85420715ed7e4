// Node-level packing: where a pod that asks for CPU, memory and GPUs (whole GPUs, or a share of
// one GPU in milli-GPU) goes among a cluster's nodes, and on which GPUs of that node. This is the
// placement problem of GPU-sharing clusters such as the Alibaba trace of Weng et al., "Beware of
// Fragmentation" (USENIX ATC'23), and the one the Kubernetes scheduler solves with a score plugin
// per policy. Part of the allocator layer: pure functions of their arguments, no I/O.
//
// Here: the shapes and node state the trace replay measures, FGD's fragmentation measure (which
// the pool allocator's Fragmentation score uses, allocator.h), and the baseline policies gpuaas
// is measured against. A policy scores one (node, pod) pair and names the GPUs it would use; the
// trace simulator filters nodes with Fits, asks every feasible node for a score, takes the first
// best in a fixed node order, and applies the choice with Place. Policies are chosen by name
// through PackingPolicyByName.
#ifndef GPUAAS_ALLOCATOR_PACKING_H_
#define GPUAAS_ALLOCATOR_PACKING_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpuaas::allocator {

inline constexpr int kMilliGpu = 1000;      // one whole GPU
inline constexpr int kMaxGpusPerNode = 16;  // the trace has at most 8

// A node as it was built: capacity that never changes.
struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string gpu_model;  // "V100M32", "T4", "H100-SXM5-80GB"; empty for a CPU-only node
};

// What is left on a node. GPUs keep their device index: the order matters for which GPU a pod
// gets, as it does for the device plugin.
struct NodeState {
  int64_t cpu_left = 0;
  int64_t memory_left = 0;
  int gpus = 0;
  std::array<int32_t, kMaxGpusPerNode> gpu_left{};  // milli-GPU left per device, 0..1000

  static NodeState Empty(const NodeSpec& spec);
  int64_t GpuLeftTotal() const;
  int FullyFreeGpus() const;
};

// What a pod asks for. `num_gpu` GPUs of `gpu_milli` each: a sharing pod has num_gpu == 1 and
// gpu_milli < 1000; a pod with several GPUs takes whole ones (gpu_milli == 1000).
struct PodShape {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int32_t gpu_milli = 0;
  // Allowed GPU models joined by '|' as the trace's gpu_spec writes them ("V100M16|V100M32");
  // empty: any model.
  std::string gpu_models;

  bool Shares() const { return num_gpu == 1 && gpu_milli < kMilliGpu; }
  int64_t TotalGpuMilli() const { return static_cast<int64_t>(num_gpu) * gpu_milli; }
};

// True when a node of `model` may run a pod limited to `allowed` ('|'-separated; empty: any).
// A node without GPUs matches only pods that name no model.
bool ModelAllowed(std::string_view allowed, std::string_view model);

// The GPUs a pod would use on a node: device indices, ascending for whole GPUs.
struct GpuChoice {
  std::array<int8_t, kMaxGpusPerNode> index{};
  int count = 0;
};

// True when `pod` fits on the node now: CPU, memory, GPU model, and enough GPUs with room
// (one with gpu_milli left for a sharing pod, num_gpu fully free ones otherwise).
bool Fits(const NodeSpec& spec, const NodeState& state, const PodShape& pod);

// The GPUs with the least room that still hold the pod (ties: lowest index) for a sharing pod;
// the first fully free GPUs by index for whole GPUs; none for a CPU-only pod. The pod must fit.
GpuChoice BestFitGpus(const NodeState& state, const PodShape& pod);

// Applies (sign +1) or removes (sign -1) a pod on the chosen GPUs. The caller guarantees the
// result stays within capacity (Fits before placing, the same choice when removing).
void Place(NodeState& state, const PodShape& pod, const GpuChoice& gpus, int sign = 1);

// The workload a fragmentation-aware policy expects: the most common pod shapes (by CPU, GPU
// share, GPU count and model; memory is not part of the shape, as in FGD) with their share of
// pods, summing to 1.
struct TypicalPod {
  PodShape shape;
  double weight = 0;
};
using TypicalPods = std::vector<TypicalPod>;

// The most popular shapes of `pods` covering at least `coverage` (0..1] of them, in decreasing
// popularity, renormalised to sum to 1. CPU-only pods are included, as in the paper's artifacts.
TypicalPods TypicalPodsOf(const std::vector<PodShape>& pods, double coverage = 0.95);

// FGD's fragmentation of one node against the expected workload, in milli-GPU: for each typical
// pod, the idle GPU share it could not use here (all of it when the pod cannot run on the node
// at all, or asks for no GPU; otherwise the idle share of GPUs too small for it), weighted by the
// pod's popularity.
// `gpu_model` is the node's (NodeSpec::gpu_model).
double NodeFragmentation(std::string_view gpu_model, const NodeState& state, const TypicalPods& typical);

// FGD's score of a placement that takes a node from fragmentation `before` to `after`:
// int(100 * sigmoid(decrease / 1000)), truncated as the FGD artifact's plugin does, 0..100.
int64_t FragmentationScore(double before, double after);

// A random GPU of the node that holds a sharing pod (`draw` is a uniform random number); the
// first fully free GPUs for whole GPUs, as BestFitGpus.
GpuChoice RandomGpus(const NodeState& state, const PodShape& pod, uint64_t draw);

// What a policy says about one feasible node.
struct NodeScore {
  int64_t score = 0;  // higher is better
  GpuChoice gpus;     // where the pod goes on this node
};

// What a policy may know beyond the node at hand: the expected workload. Read-only during
// decisions.
struct PackingContext {
  const TypicalPods* typical = nullptr;  // the expected workload (FGD)
};

class PackingPolicy {
 public:
  virtual ~PackingPolicy() = default;
  virtual std::string_view Name() const = 0;
  // Picks a node uniformly among the feasible ones, and a GPU uniformly among those that hold
  // a sharing pod, instead of scoring (the random baseline).
  virtual bool Random() const { return false; }
  // Min-max normalises the scores of a decision to 0..100 (integer), as kube-scheduler's
  // NormalizeScore extension does for the best-fit plugin.
  virtual bool Normalizes() const { return false; }
  // Scores a node on which `pod` fits. Must be a pure function of its arguments: callers cache
  // scores per (node state, pod shape).
  virtual NodeScore Score(const NodeSpec& spec, const NodeState& state, const PodShape& pod,
                          const PackingContext& ctx) const = 0;
};

// The registry: "random", "dotprod", "packing", "bestfit", "fgd", the baselines of the FGD paper,
// reimplemented from its description and artifact. nullptr for another name. (gpuaas's own
// placement is the pool allocator's, allocator.h; the trace replay runs both, sim/replay.h.)
std::shared_ptr<const PackingPolicy> PackingPolicyByName(std::string_view name);
std::vector<std::string_view> PackingPolicyNames();

// Min-max normalisation of scores in place (integer arithmetic, 0..100; all 0 when equal).
void NormalizeScores(std::vector<int64_t>& scores);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_PACKING_H_
