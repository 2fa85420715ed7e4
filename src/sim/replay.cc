#include "sim/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "sim/allocated.h"

namespace gpuaas::sim {

using allocator::GpuChoice;
using allocator::NodeScore;
using allocator::NodeSpec;
using allocator::NodeState;
using allocator::PodShape;

namespace {

std::vector<PodShape> ShapesOf(const std::vector<TracePod>& pods) {
  std::vector<PodShape> out;
  out.reserve(pods.size());
  for (const TracePod& p : pods) out.push_back(p.shape);
  return out;
}

// Seeds of the independent random streams of one run: the workload (sampling and shuffling) is
// the same for every policy under a seed; tie-breaking has its own stream.
uint64_t WorkloadSeed(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ULL + 1; }
uint64_t TieSeed(uint64_t seed) { return seed * 0xD1B54A32D192ED03ULL + 7; }

}  // namespace

Scheduler::Scheduler(std::vector<NodeSpec> nodes, allocator::TypicalPods typical)
    : nodes_(std::move(nodes)), typical_(std::move(typical)) {
  states_.reserve(nodes_.size());
  for (const NodeSpec& n : nodes_) {
    states_.push_back(NodeState::Empty(n));
    capacity_milli_ += static_cast<int64_t>(states_.back().gpus) * allocator::kMilliGpu;
  }
  frag_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    frag_[i] = allocator::NodeFragmentation(nodes_[i].gpu_model, states_[i], typical_);
    frag_total_ += frag_[i];
  }
}

int Scheduler::Intern(const PodShape& shape) {
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const PodShape& s = shapes_[i];
    if (s.cpu_milli == shape.cpu_milli && s.memory_mib == shape.memory_mib &&
        s.num_gpu == shape.num_gpu && s.gpu_milli == shape.gpu_milli &&
        s.gpu_models == shape.gpu_models) {
      return static_cast<int>(i);
    }
  }
  shapes_.push_back(shape);
  return static_cast<int>(shapes_.size() - 1);
}

void Scheduler::Update(size_t node) {
  frag_total_ -= frag_[node];
  frag_[node] = allocator::NodeFragmentation(nodes_[node].gpu_model, states_[node], typical_);
  frag_total_ += frag_[node];
  Changed(node);
}

int Scheduler::Schedule(int shape, GpuChoice* gpus) {
  const int node = Choose(shape, gpus);
  if (node < 0) return -1;
  const PodShape& pod = shapes_[static_cast<size_t>(shape)];
  allocator::Place(states_[static_cast<size_t>(node)], pod, *gpus);
  used_milli_ += pod.TotalGpuMilli();
  Update(static_cast<size_t>(node));
  return node;
}

void Scheduler::Remove(int node, int shape, const GpuChoice& gpus) {
  Released(node, shape, gpus);
  const PodShape& pod = shapes_[static_cast<size_t>(shape)];
  allocator::Place(states_[static_cast<size_t>(node)], pod, gpus, -1);
  used_milli_ -= pod.TotalGpuMilli();
  Update(static_cast<size_t>(node));
}

PolicyScheduler::PolicyScheduler(std::vector<NodeSpec> nodes, std::shared_ptr<const allocator::PackingPolicy> policy,
                                 allocator::TypicalPods typical, uint64_t seed)
    : Scheduler(std::move(nodes), std::move(typical)), policy_(std::move(policy)), rng_(TieSeed(seed)) {
  ctx_.typical = &Typical();
  version_.assign(Nodes().size(), 1);
  order_ = NodeOrder(Nodes().size(), seed);
}

const NodeScore& PolicyScheduler::ScoreOf(size_t node, int shape) {
  if (cache_.size() <= static_cast<size_t>(shape)) cache_.resize(static_cast<size_t>(shape) + 1);
  std::vector<Cached>& column = cache_[static_cast<size_t>(shape)];
  if (column.empty()) column.resize(Nodes().size());
  Cached& c = column[node];
  if (c.version != version_[node]) {
    c.score = policy_->Score(Nodes()[node], States()[node], Shape(shape), ctx_);
    c.version = version_[node];
  }
  return c.score;
}

int PolicyScheduler::Choose(int shape, GpuChoice* gpus) {
  const PodShape& pod = Shape(shape);
  scratch_nodes_.clear();
  for (uint32_t n : order_) {
    if (allocator::Fits(Nodes()[n], States()[n], pod)) scratch_nodes_.push_back(n);
  }
  if (scratch_nodes_.empty()) return -1;
  size_t chosen = 0;
  if (policy_->Random()) {
    chosen = scratch_nodes_[rng_() % scratch_nodes_.size()];
    *gpus = allocator::RandomGpus(States()[chosen], pod, rng_());
    return static_cast<int>(chosen);
  }
  scratch_scores_.clear();
  for (uint32_t n : scratch_nodes_) scratch_scores_.push_back(ScoreOf(n, shape).score);
  if (policy_->Normalizes()) allocator::NormalizeScores(scratch_scores_);
  // The highest score; the first in node order among equals.
  int64_t best = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < scratch_nodes_.size(); ++i) {
    if (scratch_scores_[i] > best) {
      best = scratch_scores_[i];
      chosen = scratch_nodes_[i];
    }
  }
  *gpus = ScoreOf(chosen, shape).gpus;
  return static_cast<int>(chosen);
}

std::unique_ptr<Scheduler> MakeScheduler(std::string_view policy, const std::vector<NodeSpec>& nodes,
                                         allocator::TypicalPods typical, uint64_t seed) {
  if (policy == "gpuaas") return std::make_unique<AllocatorScheduler>(nodes, std::move(typical), seed);
  auto p = allocator::PackingPolicyByName(policy);
  if (p == nullptr) return nullptr;
  return std::make_unique<PolicyScheduler>(nodes, std::move(p), std::move(typical), seed);
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> out;
  for (std::string_view n : allocator::PackingPolicyNames()) out.emplace_back(n);
  out.emplace_back("gpuaas");
  return out;
}

std::vector<uint32_t> NodeOrder(size_t nodes, uint64_t seed) {
  std::vector<uint32_t> order(nodes);
  for (size_t i = 0; i < nodes; ++i) order[i] = static_cast<uint32_t>(i);
  std::mt19937_64 rng(TieSeed(seed));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

std::vector<size_t> ArrivalOrder(const std::vector<TracePod>& pods, int64_t capacity_milli,
                                 double tune, uint64_t seed) {
  std::mt19937_64 rng(WorkloadSeed(seed));
  std::vector<size_t> order(pods.size());
  int64_t requested = 0;
  for (size_t i = 0; i < pods.size(); ++i) {
    order[i] = i;
    requested += pods[i].shape.TotalGpuMilli();
  }
  const double target = tune * static_cast<double>(capacity_milli);
  while (tune > 0 && !pods.empty()) {
    const size_t pick = rng() % pods.size();
    if (static_cast<double>(requested + pods[pick].shape.TotalGpuMilli()) > target) break;
    requested += pods[pick].shape.TotalGpuMilli();
    order.push_back(pick);
  }
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

ArrivalResult RunArrival(const std::vector<NodeSpec>& nodes, const std::vector<TracePod>& pods,
                         std::string_view policy, uint64_t seed, const ArrivalConfig& config) {
  ArrivalResult out;
  out.seed = seed;
  const std::vector<PodShape> shapes = ShapesOf(pods);
  const std::unique_ptr<Scheduler> engine = MakeScheduler(policy, nodes, allocator::TypicalPodsOf(shapes), seed);
  Scheduler& sched = *engine;

  std::vector<int> shape_of;
  shape_of.reserve(shapes.size());
  for (const PodShape& s : shapes) shape_of.push_back(sched.Intern(s));
  std::vector<int> ids;
  for (size_t i : ArrivalOrder(pods, sched.CapacityMilli(), config.tune, seed)) {
    ids.push_back(shape_of[i]);
  }

  const size_t buckets = kMaxArrivedPercent + 1;
  std::vector<double> alloc_sum(buckets), frag_sum(buckets), ratio_sum(buckets);
  std::vector<int64_t> count(buckets);
  const double cap = static_cast<double>(sched.CapacityMilli());
  int64_t arrived = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int id : ids) {
    GpuChoice gpus;
    arrived += sched.Shape(id).TotalGpuMilli();
    if (sched.Schedule(id, &gpus) >= 0) {
      ++out.placed;
    } else {
      ++out.failed;
    }
    const double pct = std::nearbyint(static_cast<double>(arrived) / cap * 100.0);
    if (pct < 0 || pct > kMaxArrivedPercent) continue;
    const size_t b = static_cast<size_t>(pct);
    alloc_sum[b] += static_cast<double>(sched.UsedMilli()) / cap * 100.0;
    frag_sum[b] += sched.FragMilli() / cap * 100.0;
    const double idle = static_cast<double>(sched.IdleMilli());
    ratio_sum[b] += idle > 0 ? sched.FragMilli() / idle * 100.0 : 0.0;
    ++count[b];
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.pods = static_cast<int64_t>(ids.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.curve.alloc.assign(buckets, nan);
  out.curve.frag.assign(buckets, nan);
  out.curve.frag_ratio.assign(buckets, nan);
  for (size_t b = 0; b < buckets; ++b) {
    if (count[b] == 0) continue;
    const double n = static_cast<double>(count[b]);
    out.curve.alloc[b] = alloc_sum[b] / n;
    out.curve.frag[b] = frag_sum[b] / n;
    out.curve.frag_ratio[b] = ratio_sum[b] / n;
  }
  return out;
}

Curve MeanCurve(const std::vector<ArrivalResult>& runs) {
  const size_t buckets = kMaxArrivedPercent + 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Curve out{std::vector<double>(buckets, nan), std::vector<double>(buckets, nan),
            std::vector<double>(buckets, nan)};
  auto mean = [&](auto member, std::vector<double>& dst) {
    for (size_t b = 0; b < buckets; ++b) {
      double sum = 0;
      int n = 0;
      for (const ArrivalResult& r : runs) {
        const double v = (r.curve.*member)[b];
        if (std::isnan(v)) continue;
        sum += v;
        ++n;
      }
      if (n > 0) dst[b] = sum / n;
    }
  };
  mean(&Curve::alloc, out.alloc);
  mean(&Curve::frag, out.frag);
  mean(&Curve::frag_ratio, out.frag_ratio);
  return out;
}

absl::StatusOr<ChurnTimeline> MakeChurnTimeline(const std::vector<TracePod>& pods, double speedup) {
  if (!(speedup >= 1.0 && speedup <= 1e6)) {
    return absl::InvalidArgumentError("the speedup must be between 1 and 1,000,000");
  }
  for (const TracePod& p : pods) {
    if (p.creation_time < 0 || p.deletion_time < 0) {
      return absl::InvalidArgumentError(
          fmt::format("churn mode needs creation_time and deletion_time; pod {} has none", p.name));
    }
  }
  ChurnTimeline t;
  t.events.reserve(pods.size() * 2);
  t.first_arrival = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < pods.size(); ++i) {
    const int64_t arrival =
        static_cast<int64_t>(std::llround(static_cast<double>(pods[i].creation_time) / speedup));
    const int64_t life = std::max<int64_t>(pods[i].deletion_time - pods[i].creation_time, 0);
    t.events.push_back({arrival, 1, i});
    t.events.push_back({arrival + life, 0, i});
    t.first_arrival = std::min(t.first_arrival, arrival);
    t.last_arrival = std::max(t.last_arrival, arrival);
  }
  if (pods.empty()) t.first_arrival = 0;
  std::stable_sort(t.events.begin(), t.events.end(), [](const ChurnEvent& a, const ChurnEvent& b) {
    return std::tie(a.time, a.kind) < std::tie(b.time, b.kind);
  });
  return t;
}

absl::StatusOr<ChurnResult> RunChurn(const std::vector<NodeSpec>& nodes,
                                     const std::vector<TracePod>& pods,
                                     std::string_view policy, uint64_t seed, double speedup) {
  absl::StatusOr<ChurnTimeline> timeline = MakeChurnTimeline(pods, speedup);
  if (!timeline.ok()) return timeline.status();
  const std::vector<ChurnEvent>& events = timeline->events;
  const int64_t first_arrival = timeline->first_arrival, last_arrival = timeline->last_arrival;
  ChurnResult out;
  out.seed = seed;
  out.pods = static_cast<int64_t>(pods.size());
  const std::unique_ptr<Scheduler> engine = MakeScheduler(policy, nodes, allocator::TypicalPodsOf(ShapesOf(pods)), seed);
  if (engine == nullptr) return absl::InvalidArgumentError(fmt::format("unknown policy \"{}\"", policy));
  Scheduler& sched = *engine;
  std::vector<int> shape(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) shape[i] = sched.Intern(pods[i].shape);

  struct Running {
    int node = -1;
    GpuChoice gpus;
  };
  std::vector<Running> where(pods.size());
  std::vector<char> waiting(pods.size(), 0);
  std::deque<size_t> queue;  // waiting pods, first come first served
  int64_t pending = 0;
  const double cap = static_cast<double>(sched.CapacityMilli());
  const int64_t start = first_arrival, end = last_arrival;
  double used_integral = 0, pending_integral = 0;
  int64_t last = start;
  // The part of [last, t) inside the arrival window.
  auto window = [&](int64_t t) {
    return static_cast<double>(std::max<int64_t>(0, std::min(t, end) - std::max(last, start)));
  };

  auto retry = [&]() {
    // Shapes that failed in this pass fail again until something else is freed.
    std::vector<char> failed(static_cast<size_t>(sched.ShapeCount()), 0);
    std::deque<size_t> keep;
    while (!queue.empty()) {
      const size_t i = queue.front();
      queue.pop_front();
      if (!waiting[i]) continue;
      const int s = shape[i];
      if (failed[static_cast<size_t>(s)]) {
        keep.push_back(i);
        continue;
      }
      const int node = sched.Schedule(s, &where[i].gpus);
      if (node < 0) {
        failed[static_cast<size_t>(s)] = 1;
        keep.push_back(i);
        continue;
      }
      where[i].node = node;
      waiting[i] = 0;
      --pending;
      ++out.placed_late;
    }
    queue.swap(keep);
  };

  for (const ChurnEvent& e : events) {
    used_integral += static_cast<double>(sched.UsedMilli()) * window(e.time);
    pending_integral += static_cast<double>(pending) * window(e.time);
    last = std::max(last, e.time);
    const size_t i = e.pod;
    if (e.kind == 1) {
      const int node = sched.Schedule(shape[i], &where[i].gpus);
      if (node >= 0) {
        where[i].node = node;
        ++out.placed_at_once;
      } else {
        waiting[i] = 1;
        queue.push_back(i);
        ++pending;
        out.max_pending = std::max(out.max_pending, pending);
      }
      continue;
    }
    if (waiting[i]) {  // gave up while waiting
      waiting[i] = 0;
      --pending;
      ++out.gave_up;
      continue;
    }
    if (where[i].node >= 0) {  // each pod has one departure
      sched.Remove(where[i].node, shape[i], where[i].gpus);
      if (!queue.empty()) retry();
    }
  }
  out.pending_end = pending;
  const double span = static_cast<double>(end - start);
  if (span > 0) {
    out.time_avg_alloc = used_integral / span / cap * 100.0;
    out.avg_pending = pending_integral / span;
  }
  return out;
}

}  // namespace gpuaas::sim
