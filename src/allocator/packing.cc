#include "allocator/packing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace gpuaas::allocator {

namespace {

// The normalisers of the baselines' scores: the largest node of the paper's cluster (128 CPUs,
// 8 GPUs), as in the FGD artifact (MaxSpecCpu, MaxSpecGpu).
constexpr double kMaxSpecCpu = 128000;
constexpr double kMaxSpecGpu = 8000;
constexpr int64_t kMaxNodeScore = 100;

// The node after `pod` takes its GPUs the way the FGD artifact's NodeResource.Sub packs them:
// each of the pod's GPUs from the GPU with the least room that still holds it.
NodeState PackedAfter(const NodeState& s, const PodShape& pod) {
  NodeState out = s;
  out.cpu_left -= pod.cpu_milli;
  out.memory_left -= pod.memory_mib;
  int need = pod.num_gpu;
  while (need > 0) {
    int best = -1;
    for (int i = 0; i < s.gpus; ++i) {
      if (out.gpu_left[i] < pod.gpu_milli) continue;
      if (best < 0 || out.gpu_left[i] < out.gpu_left[best]) best = i;
    }
    if (best < 0) break;  // callers only ask for pods that fit
    out.gpu_left[best] -= pod.gpu_milli;
    --need;
  }
  return out;
}

// Scores a node by the state the pod would leave it in (`key(after)`, higher is better): for a
// sharing pod each GPU that holds it is tried and the best wins (the lowest index among equals);
// otherwise the pod is packed as PackedAfter packs it and gets BestFitGpus.
template <typename Key>
NodeScore ScoreByStateAfter(const NodeState& state, const PodShape& pod, Key key) {
  if (!pod.Shares()) return {key(PackedAfter(state, pod)), BestFitGpus(state, pod)};
  NodeScore best{std::numeric_limits<int64_t>::min(), {}};
  for (int i = 0; i < state.gpus; ++i) {
    if (state.gpu_left[i] < pod.gpu_milli) continue;
    NodeState after = state;
    after.cpu_left -= pod.cpu_milli;
    after.memory_left -= pod.memory_mib;
    after.gpu_left[i] -= pod.gpu_milli;
    const int64_t s = key(after);
    if (best.gpus.count == 0 || s > best.score) {
      best.score = s;
      best.gpus.count = 1;
      best.gpus.index[0] = static_cast<int8_t>(i);
    }
  }
  return best;
}

// Random: a feasible node, and for a sharing pod a GPU that holds it, uniformly at random (the
// caller draws both; Score is not used).
class RandomPolicy final : public PackingPolicy {
 public:
  std::string_view Name() const override { return "random"; }
  bool Random() const override { return true; }
  NodeScore Score(const NodeSpec&, const NodeState& state, const PodShape& pod,
                  const PackingContext&) const override {
    return {0, BestFitGpus(state, pod)};
  }
};

// Tetris-style alignment of the request with what is left, both normalised by the largest node;
// the artifact ranks the smaller dot product higher.
class DotProductPolicy final : public PackingPolicy {
 public:
  std::string_view Name() const override { return "dotprod"; }
  NodeScore Score(const NodeSpec&, const NodeState& state, const PodShape& pod,
                  const PackingContext&) const override {
    const double dot = static_cast<double>(state.cpu_left) / kMaxSpecCpu *
                           (static_cast<double>(pod.cpu_milli) / kMaxSpecCpu) +
                       static_cast<double>(state.GpuLeftTotal()) / kMaxSpecGpu *
                           (static_cast<double>(pod.TotalGpuMilli()) / kMaxSpecGpu);
    const double score = 1.0 - dot / 2.0;
    return {static_cast<int64_t>(static_cast<double>(kMaxNodeScore) * score),
            BestFitGpus(state, pod)};
  }
};

// GPU packing: shared GPUs first (the fuller the better), then free GPUs of nodes already in
// use, then untouched nodes; CPU-only pods are indifferent.
class GpuPackingPolicy final : public PackingPolicy {
 public:
  std::string_view Name() const override { return "packing"; }
  NodeScore Score(const NodeSpec&, const NodeState& state, const PodShape& pod,
                  const PackingContext&) const override {
    NodeScore out{0, BestFitGpus(state, pod)};
    if (pod.TotalGpuMilli() <= 0) return out;
    const int free_gpus = state.FullyFreeGpus();
    if (free_gpus == state.gpus) {
      out.score = std::max<int64_t>(kMaxNodeScore / 3 - free_gpus, free_gpus);
      return out;
    }
    int free_used = 0;
    int64_t free_pct_on_used = 0;
    for (int k = 0; k < out.gpus.count; ++k) {
      const int32_t left = state.gpu_left[out.gpus.index[k]];
      if (left == kMilliGpu) ++free_used;
      free_pct_on_used += left * 100 / kMilliGpu;
    }
    if (free_used > 0) {
      out.score = std::max<int64_t>(kMaxNodeScore / 2 - free_used, kMaxNodeScore / 3);
    } else {
      out.score = std::max<int64_t>(kMaxNodeScore - free_pct_on_used / 10, kMaxNodeScore / 2);
    }
    return out;
  }
};

// Best fit: the node with the least CPU and GPU left after the pod (equal weights, normalised by
// the largest node), min-max normalised across the feasible nodes.
class BestFitPolicy final : public PackingPolicy {
 public:
  std::string_view Name() const override { return "bestfit"; }
  bool Normalizes() const override { return true; }
  NodeScore Score(const NodeSpec&, const NodeState& state, const PodShape& pod,
                  const PackingContext&) const override {
    const double left =
        0.5 * static_cast<double>(state.cpu_left - pod.cpu_milli) / kMaxSpecCpu +
        0.5 * static_cast<double>(state.GpuLeftTotal() - pod.TotalGpuMilli()) / kMaxSpecGpu;
    return {static_cast<int64_t>((1.0 - left) * static_cast<double>(kMaxNodeScore)),
            BestFitGpus(state, pod)};
  }
};

// FGD: the node (and, for a sharing pod, the GPU) whose fragmentation grows least, scored as
// sigmoid(decrease / 1000) * 100, truncated to an integer as the artifact's plugin does.
class FgdPolicy final : public PackingPolicy {
 public:
  std::string_view Name() const override { return "fgd"; }
  NodeScore Score(const NodeSpec& spec, const NodeState& state, const PodShape& pod,
                  const PackingContext& ctx) const override {
    const TypicalPods& typical = *ctx.typical;
    const double before = NodeFragmentation(spec.gpu_model, state, typical);
    return ScoreByStateAfter(state, pod, [&](const NodeState& after) {
      return FragmentationScore(before, NodeFragmentation(spec.gpu_model, after, typical));
    });
  }
};

}  // namespace

NodeState NodeState::Empty(const NodeSpec& spec) {
  NodeState s;
  s.cpu_left = spec.cpu_milli;
  s.memory_left = spec.memory_mib;
  s.gpus = std::min(spec.gpus, kMaxGpusPerNode);
  for (int i = 0; i < s.gpus; ++i) s.gpu_left[i] = kMilliGpu;
  return s;
}

int64_t NodeState::GpuLeftTotal() const {
  int64_t t = 0;
  for (int i = 0; i < gpus; ++i) t += gpu_left[i];
  return t;
}

int NodeState::FullyFreeGpus() const {
  int n = 0;
  for (int i = 0; i < gpus; ++i) n += gpu_left[i] == kMilliGpu ? 1 : 0;
  return n;
}

bool ModelAllowed(std::string_view allowed, std::string_view model) {
  if (allowed.empty()) return true;
  if (model.empty()) return false;
  bool named_any = false;
  size_t pos = 0;
  while (pos <= allowed.size()) {
    size_t bar = allowed.find('|', pos);
    if (bar == std::string_view::npos) bar = allowed.size();
    const std::string_view m = allowed.substr(pos, bar - pos);
    if (!m.empty()) {
      named_any = true;
      if (m == model) return true;
    }
    pos = bar + 1;
  }
  return !named_any;
}

bool Fits(const NodeSpec& spec, const NodeState& state, const PodShape& pod) {
  if (state.cpu_left < pod.cpu_milli || state.memory_left < pod.memory_mib) return false;
  if (pod.num_gpu == 0 || pod.gpu_milli == 0) return true;
  if (state.gpus < pod.num_gpu) return false;
  if (!ModelAllowed(pod.gpu_models, spec.gpu_model)) return false;
  int room = 0;
  for (int i = 0; i < state.gpus; ++i) room += state.gpu_left[i] >= pod.gpu_milli ? 1 : 0;
  return room >= pod.num_gpu;
}

GpuChoice BestFitGpus(const NodeState& state, const PodShape& pod) {
  GpuChoice c;
  if (pod.num_gpu == 0 || pod.gpu_milli == 0) return c;
  if (pod.Shares()) {
    int best = -1;
    for (int i = 0; i < state.gpus; ++i) {
      if (state.gpu_left[i] < pod.gpu_milli) continue;
      if (best < 0 || state.gpu_left[i] < state.gpu_left[best]) best = i;
    }
    if (best >= 0) {
      c.index[0] = static_cast<int8_t>(best);
      c.count = 1;
    }
    return c;
  }
  for (int i = 0; i < state.gpus && c.count < pod.num_gpu; ++i) {
    if (state.gpu_left[i] == kMilliGpu) c.index[c.count++] = static_cast<int8_t>(i);
  }
  return c;
}

GpuChoice RandomGpus(const NodeState& state, const PodShape& pod, uint64_t draw) {
  if (!pod.Shares()) return BestFitGpus(state, pod);
  int fits = 0;
  for (int i = 0; i < state.gpus; ++i) fits += state.gpu_left[i] >= pod.gpu_milli ? 1 : 0;
  GpuChoice c;
  if (fits == 0) return c;
  int k = static_cast<int>(draw % static_cast<uint64_t>(fits));
  for (int i = 0; i < state.gpus; ++i) {
    if (state.gpu_left[i] < pod.gpu_milli) continue;
    if (k-- == 0) {
      c.index[0] = static_cast<int8_t>(i);
      c.count = 1;
      break;
    }
  }
  return c;
}

void Place(NodeState& state, const PodShape& pod, const GpuChoice& gpus, int sign) {
  state.cpu_left -= sign * pod.cpu_milli;
  state.memory_left -= sign * pod.memory_mib;
  for (int k = 0; k < gpus.count; ++k) state.gpu_left[gpus.index[k]] -= sign * pod.gpu_milli;
}

TypicalPods TypicalPodsOf(const std::vector<PodShape>& pods, double coverage) {
  using Key = std::tuple<int64_t, int32_t, int, std::string>;
  std::map<Key, int64_t> counts;
  for (const PodShape& p : pods) ++counts[{p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_models}];
  std::vector<std::pair<Key, int64_t>> order(counts.begin(), counts.end());
  // Most popular first; equal counts: larger shapes first (a stable, documented order).
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  const double total = static_cast<double>(pods.size());
  TypicalPods out;
  double covered = 0;
  for (const auto& [key, n] : order) {
    if (covered >= coverage * total) break;
    TypicalPod t;
    t.shape.cpu_milli = std::get<0>(key);
    t.shape.gpu_milli = std::get<1>(key);
    t.shape.num_gpu = std::get<2>(key);
    t.shape.gpu_models = std::get<3>(key);
    t.weight = static_cast<double>(n);
    covered += static_cast<double>(n);
    out.push_back(std::move(t));
  }
  for (TypicalPod& t : out) t.weight /= covered;
  return out;
}

int64_t FragmentationScore(double before, double after) {
  const double x = (before - after) / kMilliGpu;
  return static_cast<int64_t>(1.0 / (1.0 + std::exp(-x)) * static_cast<double>(kMaxNodeScore));
}

double NodeFragmentation(std::string_view gpu_model, const NodeState& state, const TypicalPods& typical) {
  const int64_t idle = state.GpuLeftTotal();
  if (idle == 0) return 0;
  double frag = 0;
  for (const TypicalPod& t : typical) {
    const PodShape& p = t.shape;
    int64_t unusable = idle;
    if (p.gpu_milli > 0 && (p.gpu_models.empty() || ModelAllowed(p.gpu_models, gpu_model)) &&
        state.cpu_left >= p.cpu_milli) {
      int room = 0;
      int64_t small = 0;
      for (int i = 0; i < state.gpus; ++i) {
        if (state.gpu_left[i] >= p.gpu_milli) {
          ++room;
        } else {
          small += state.gpu_left[i];
        }
      }
      if (room >= p.num_gpu) unusable = small;
    }
    frag += t.weight * static_cast<double>(unusable);
  }
  return frag;
}

void NormalizeScores(std::vector<int64_t>& scores) {
  if (scores.empty()) return;
  const auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
  const int64_t low = *lo, range = *hi - *lo;
  for (int64_t& s : scores) s = range == 0 ? 0 : (s - low) * kMaxNodeScore / range;
}

std::shared_ptr<const PackingPolicy> PackingPolicyByName(std::string_view name) {
  if (name == "random") return std::make_shared<RandomPolicy>();
  if (name == "dotprod") return std::make_shared<DotProductPolicy>();
  if (name == "packing") return std::make_shared<GpuPackingPolicy>();
  if (name == "bestfit") return std::make_shared<BestFitPolicy>();
  if (name == "fgd") return std::make_shared<FgdPolicy>();
  return nullptr;
}

std::vector<std::string_view> PackingPolicyNames() {
  return {"random", "dotprod", "packing", "bestfit", "fgd"};
}

}  // namespace gpuaas::allocator
