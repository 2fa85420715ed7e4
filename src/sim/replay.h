// Trace replay: places a trace's pods on its nodes with a packing policy and measures how much
// of the cluster's GPU capacity gets used. Pure computation on parsed traces (sim/trace.h); the
// `gpuaas sim` command reads the files and prints the results. Thread-compatible: one Scheduler
// per thread.
//
// Arrival mode follows the protocol of the FGD paper (Weng et al., ATC'23, section 6.1): pods
// are sampled with replacement from the trace and added to it until their GPU requests reach
// `tune` (1.3) times the cluster's GPU capacity, the list is shuffled with the seed, and pods are
// placed one by one with no departures; a pod that fits nowhere is skipped. After each pod the
// allocation ratio (GPU milli in use / capacity) and the fragmentation ratio are recorded
// against the arrived GPU request (the sum over pods tried so far, placed or not, as a share of
// capacity); the curve value at x% is the mean over the pods at which the arrived share rounds
// to x, as the paper's analysis scripts compute it.
//
// Churn mode replays creation_time and deletion_time instead (arrivals optionally sped up):
// pods arrive and leave, pods that do not fit wait (first come, first served) and are retried
// whenever capacity is freed, and a pod that is still waiting at its deletion time gives up.
#ifndef GPUAAS_SIM_REPLAY_H_
#define GPUAAS_SIM_REPLAY_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/packing.h"
#include "sim/trace.h"

namespace gpuaas::sim {

inline constexpr int kMaxArrivedPercent = 130;

// A placement engine: the cluster's nodes and what is left on each, as the replay measures
// them. Where a pod goes is for the engine's kind to say: a node-level packing policy
// (PolicyScheduler) or the pool allocator (AllocatorScheduler, sim/allocated.h).
class Scheduler {
 public:
  Scheduler(std::vector<allocator::NodeSpec> nodes, allocator::TypicalPods typical);
  virtual ~Scheduler() = default;
  // Not copyable: contexts point into the object.
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Places a pod of shape id `shape` (from Intern); returns the node index, or -1 when the pod
  // fits nowhere. `gpus` receives the GPUs it got.
  int Schedule(int shape, allocator::GpuChoice* gpus);
  // Removes a pod placed by Schedule.
  void Remove(int node, int shape, const allocator::GpuChoice& gpus);

  // The id of a pod shape; equal shapes share an id and a cache column.
  int Intern(const allocator::PodShape& shape);
  const allocator::PodShape& Shape(int id) const { return shapes_[static_cast<size_t>(id)]; }
  int ShapeCount() const { return static_cast<int>(shapes_.size()); }

  int64_t CapacityMilli() const { return capacity_milli_; }
  int64_t UsedMilli() const { return used_milli_; }
  // Fragmented GPU milli of the cluster against the typical pods (FGD's measure), and idle milli.
  double FragMilli() const { return frag_total_; }
  int64_t IdleMilli() const { return capacity_milli_ - used_milli_; }
  const std::vector<allocator::NodeState>& States() const { return states_; }
  const std::vector<allocator::NodeSpec>& Nodes() const { return nodes_; }
  const allocator::TypicalPods& Typical() const { return typical_; }

 protected:
  // Where a pod of `shape` goes: the node index and its GPUs, or -1. The engine may book the
  // pod in its own state; Schedule then applies it to States().
  virtual int Choose(int shape, allocator::GpuChoice* gpus) = 0;
  // A pod placed by Choose leaves (called before States() change back).
  virtual void Released(int node, int shape, const allocator::GpuChoice& gpus) = 0;
  // A node's state changed (after a placement or a removal).
  virtual void Changed(size_t node) = 0;
  // FGD's fragmentation of a node now, against Typical().
  double FragOf(size_t node) const { return frag_[node]; }

 private:
  void Update(size_t node);

  std::vector<allocator::NodeSpec> nodes_;
  std::vector<allocator::NodeState> states_;
  std::vector<double> frag_;
  allocator::TypicalPods typical_;
  std::vector<allocator::PodShape> shapes_;
  int64_t capacity_milli_ = 0;
  int64_t used_milli_ = 0;
  double frag_total_ = 0;
};

// A node-level packing policy (allocator/packing.h) with a cache of its scores per (node, pod
// shape) that is dropped for a node whenever the node changes. Decisions are exactly those of
// scoring every feasible node afresh; the cache only saves the work. The best score wins; among
// equal scores, the first node in an order drawn once per seed.
class PolicyScheduler final : public Scheduler {
 public:
  PolicyScheduler(std::vector<allocator::NodeSpec> nodes, std::shared_ptr<const allocator::PackingPolicy> policy,
                  allocator::TypicalPods typical, uint64_t seed);

 private:
  struct Cached {
    uint32_t version = 0;  // 0: empty
    allocator::NodeScore score;
  };
  int Choose(int shape, allocator::GpuChoice* gpus) override;
  void Released(int, int, const allocator::GpuChoice&) override {}
  void Changed(size_t node) override { ++version_[node]; }
  const allocator::NodeScore& ScoreOf(size_t node, int shape);

  std::vector<uint32_t> version_;
  std::vector<uint32_t> order_;  // node indices in scoring order
  std::shared_ptr<const allocator::PackingPolicy> policy_;
  allocator::PackingContext ctx_;
  std::vector<std::vector<Cached>> cache_;  // [shape][node], grown as shapes are interned
  std::mt19937_64 rng_;
  std::vector<int64_t> scratch_scores_;
  std::vector<uint32_t> scratch_nodes_;
};

// The engine a policy name stands for: "gpuaas" is the pool allocator (sim/allocated.h) with
// FGD's fragmentation score against `typical`; the others are PackingPolicyByName's. nullptr for
// an unknown name.
std::unique_ptr<Scheduler> MakeScheduler(std::string_view policy, const std::vector<allocator::NodeSpec>& nodes,
                                         allocator::TypicalPods typical, uint64_t seed);
// Every name MakeScheduler knows, the baselines first.
std::vector<std::string> PolicyNames();

// A curve over arrived GPU request 0..130%: NaN where no pod landed in that bucket.
struct Curve {
  std::vector<double> alloc;       // allocation ratio, %
  std::vector<double> frag;        // fragmented GPU, % of capacity
  std::vector<double> frag_ratio;  // fragmented GPU, % of idle GPU
};

struct ArrivalResult {
  uint64_t seed = 0;
  Curve curve;
  int64_t pods = 0;  // pods tried (trace plus samples)
  int64_t placed = 0;
  int64_t failed = 0;
  double seconds = 0;  // time spent placing
};

struct ArrivalConfig {
  double tune = 1.3;
};

// The order in which a run scores nodes, drawn once per seed: the first best node in it wins.
// A fixed order makes equally good choices consolidate onto the same nodes, as the FGD
// artifact's node list does (named with a random prefix per run, then sorted); drawing anew for
// every pod spreads them, and costs FGD 5 points of allocation on the default trace.
std::vector<uint32_t> NodeOrder(size_t nodes, uint64_t seed);

// The arrival protocol's workload for a seed: indices into `pods`, the trace once plus samples
// with replacement while their GPU requests stay within `tune` x `capacity_milli`, shuffled.
// The same for every policy under a seed.
std::vector<size_t> ArrivalOrder(const std::vector<TracePod>& pods, int64_t capacity_milli,
                                 double tune, uint64_t seed);

// One seed of the arrival protocol with the engine `policy` names (MakeScheduler, which must
// know it). The typical pods come from the trace's own pods (TypicalPodsOf).
ArrivalResult RunArrival(const std::vector<allocator::NodeSpec>& nodes,
                         const std::vector<TracePod>& pods, std::string_view policy,
                         uint64_t seed, const ArrivalConfig& config = {});

// The pointwise mean of per-seed curves (buckets missing in a seed are left out of the mean).
Curve MeanCurve(const std::vector<ArrivalResult>& runs);

struct ChurnResult {
  uint64_t seed = 0;
  double time_avg_alloc = 0;  // GPU allocation ratio averaged over the trace's time span, %
  int64_t pods = 0;
  int64_t placed_at_once = 0;  // placed when they arrived
  int64_t placed_late = 0;     // waited, then placed
  int64_t gave_up = 0;         // still waiting at their deletion time
  int64_t pending_end = 0;     // waiting when the trace ends
  int64_t max_pending = 0;
  double avg_pending = 0;  // time-averaged number of waiting pods
};

// Churn's timeline: each pod arrives at creation_time / `speedup` and leaves its lifetime later;
// in time order, departures first at equal times (they free room), then arrivals in file order.
// InvalidArgument for a speedup outside 1..1,000,000 or a pod without both times.
struct ChurnEvent {
  int64_t time = 0;
  int kind = 0;  // 0 departure, 1 arrival
  size_t pod = 0;
};
struct ChurnTimeline {
  std::vector<ChurnEvent> events;
  int64_t first_arrival = 0;
  int64_t last_arrival = 0;
};
absl::StatusOr<ChurnTimeline> MakeChurnTimeline(const std::vector<TracePod>& pods, double speedup);

// Churn mode. Needs creation_time and deletion_time on every pod. `speedup` divides arrival
// times and keeps lifetimes: the trace's own timing loads its cluster to a fraction of a percent
// on average, so contention needs arrivals sped up (x100 to x1000). Averages are over the
// arrival window (first to last arrival).
absl::StatusOr<ChurnResult> RunChurn(const std::vector<allocator::NodeSpec>& nodes,
                                     const std::vector<TracePod>& pods, std::string_view policy,
                                     uint64_t seed, double speedup = 1.0);

}  // namespace gpuaas::sim

#endif  // GPUAAS_SIM_REPLAY_H_
