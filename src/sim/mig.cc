#include "sim/mig.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <unordered_map>

#include "absl/status/status.h"
#include "sim/replay.h"

namespace gpuaas::sim {

namespace {

constexpr double kMaxSpecCpu = 128000;

struct Gpu {
  bool whole = false;  // a whole-GPU pod holds it (MIG disabled)
  catalog::Layout layout;
  int used_compute = 0;
  int used_memory = 0;
  bool Empty() const { return !whole && layout.empty(); }
};

struct Node {
  int64_t cpu_left = 0;
  int64_t memory_left = 0;
  std::vector<Gpu> gpus;
};

// A pod as MIG mode sees it: CPU and memory, and a profile or a number of whole GPUs.
struct Demand {
  int64_t cpu = 0;
  int64_t memory = 0;
  const catalog::MigProfile* profile = nullptr;
  int whole = 0;
};

struct Choice {
  bool ok = false;
  double frag_increase = 0;  // own policy only
  double left = 0;           // best-fit measure of the node afterwards (lower: fuller)
  int gpu = -1;              // for a profile; first of `whole` otherwise
  int start = 0;
};

class MigSim {
 public:
  MigSim(const std::vector<allocator::NodeSpec>& specs, const MigModel& model, bool own,
         std::vector<std::pair<const catalog::MigProfile*, double>> typical, uint64_t seed)
      : model_(model),
        own_(own),
        typical_(std::move(typical)),
        order_(NodeOrder(specs.size(), seed)) {
    for (const allocator::NodeSpec& s : specs) {
      Node n;
      n.cpu_left = s.cpu_milli;
      n.memory_left = s.memory_mib;
      n.gpus.resize(static_cast<size_t>(s.gpus));
      nodes_.push_back(std::move(n));
    }
    version_.assign(nodes_.size(), 1);
  }

  // The id of a demand; equal demands share cached choices.
  int Intern(const Demand& d) {
    for (size_t i = 0; i < shapes_.size(); ++i) {
      const Demand& s = shapes_[i];
      if (s.cpu == d.cpu && s.memory == d.memory && s.profile == d.profile && s.whole == d.whole) {
        return static_cast<int>(i);
      }
    }
    shapes_.push_back(d);
    cache_.emplace_back(nodes_.size());
    return static_cast<int>(shapes_.size() - 1);
  }

  // Places a pod of demand `id` on the best node (the first in node order among equals); false
  // when it fits nowhere.
  bool Place(int id) {
    const Demand& d = shapes_[static_cast<size_t>(id)];
    Choice best;
    int best_node = -1;
    for (uint32_t i : order_) {
      Cached& cached = cache_[static_cast<size_t>(id)][i];
      if (cached.version != version_[i]) {
        cached.choice = Evaluate(nodes_[i], d);
        cached.version = version_[i];
      }
      const Choice& c = cached.choice;
      if (!c.ok) continue;
      if (best_node < 0 || Compare(c, best) > 0) {
        best = c;
        best_node = static_cast<int>(i);
      }
    }
    if (best_node < 0) return false;
    ++version_[static_cast<size_t>(best_node)];
    Node& n = nodes_[static_cast<size_t>(best_node)];
    n.cpu_left -= d.cpu;
    n.memory_left -= d.memory;
    if (d.profile != nullptr) {
      Gpu& g = n.gpus[static_cast<size_t>(best.gpu)];
      g.layout.push_back({d.profile, best.start});
      g.used_compute += d.profile->compute_slices;
      g.used_memory += d.profile->memory_slices;
    } else {
      int need = d.whole;
      for (Gpu& g : n.gpus) {
        if (need == 0) break;
        if (g.Empty()) {
          g.whole = true;
          --need;
        }
      }
    }
    return true;
  }

  int64_t GpusUsed() const {
    int64_t n = 0;
    for (const Node& node : nodes_) {
      for (const Gpu& g : node.gpus) n += g.Empty() ? 0 : 1;
    }
    return n;
  }

 private:
  // >0 when a is better than b.
  int Compare(const Choice& a, const Choice& b) const {
    if (own_ && a.frag_increase != b.frag_increase)
      return a.frag_increase < b.frag_increase ? 1 : -1;
    if (a.left != b.left) return a.left < b.left ? 1 : -1;
    return 0;
  }

  double NodeLeft(const Node& n, int64_t cpu_after, int gpu_slices_taken) const {
    int free_slices = -gpu_slices_taken;
    for (const Gpu& g : n.gpus) free_slices += g.whole ? 0 : model_.compute_slices - g.used_compute;
    return 0.5 * static_cast<double>(cpu_after) / kMaxSpecCpu +
           0.5 * static_cast<double>(free_slices) / (8.0 * model_.compute_slices);
  }

  Choice Evaluate(const Node& n, const Demand& d) {
    Choice c;
    if (n.cpu_left < d.cpu || n.memory_left < d.memory) return c;
    if (d.profile == nullptr && d.whole == 0) {
      c.ok = true;
      c.left = NodeLeft(n, n.cpu_left - d.cpu, 0);
      return c;
    }
    if (d.profile == nullptr) {
      int empty = 0;
      for (const Gpu& g : n.gpus) empty += g.Empty() ? 1 : 0;
      if (empty < d.whole) return c;
      c.ok = true;
      c.left = NodeLeft(n, n.cpu_left - d.cpu, d.whole * model_.compute_slices);
      return c;
    }
    // A profile: each GPU that can take it, at each free start (own) or the first (best fit).
    int best_free = std::numeric_limits<int>::max();
    for (size_t gi = 0; gi < n.gpus.size(); ++gi) {
      const Gpu& g = n.gpus[gi];
      if (g.whole) continue;
      const std::vector<int> starts = catalog::FreeStarts(model_, g.layout, *d.profile);
      if (starts.empty()) continue;
      const int free_after = model_.compute_slices - g.used_compute - d.profile->compute_slices;
      if (!own_) {
        // Best fit: the MIG GPU in use with the fewest free slices; an empty GPU last.
        const int key = g.layout.empty() ? std::numeric_limits<int>::max() - 1 : free_after;
        if (key < best_free) {
          best_free = key;
          c.ok = true;
          c.gpu = static_cast<int>(gi);
          c.start = starts.front();
        }
        continue;
      }
      const double before = Frag(g.layout);
      for (int start : starts) {
        catalog::Layout after = g.layout;
        after.push_back({d.profile, start});
        const double inc = Frag(after) - before;
        if (!c.ok || inc < c.frag_increase || (inc == c.frag_increase && free_after < best_free)) {
          c.ok = true;
          c.frag_increase = inc;
          c.gpu = static_cast<int>(gi);
          c.start = start;
          best_free = free_after;
        }
      }
    }
    if (c.ok) c.left = NodeLeft(n, n.cpu_left - d.cpu, d.profile->compute_slices);
    return c;
  }

  // Memory slices of a GPU that the expected profiles could not use, weighted by popularity.
  double Frag(const catalog::Layout& layout) {
    if (layout.empty()) return 0;
    uint64_t key = 0;
    int used = 0;
    for (const catalog::Instance& inst : layout) {
      const size_t idx = static_cast<size_t>(inst.profile - model_.profiles.data());
      key |= static_cast<uint64_t>(idx + 1) << (4 * inst.start);
      used += inst.profile->memory_slices;
    }
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    const int free = model_.memory_slices - used;
    double frag = 0;
    for (const auto& [profile, weight] : typical_) {
      int unusable = free;
      if (profile != nullptr) {
        uint32_t covered = 0;
        for (int s : catalog::FreeStarts(model_, layout, *profile)) {
          for (int k = 0; k < profile->memory_slices; ++k) covered |= 1u << (s + k);
        }
        unusable = free - std::popcount(covered);
      }
      frag += weight * unusable;
    }
    memo_.emplace(key, frag);
    return frag;
  }

  const MigModel& model_;
  bool own_;
  std::vector<std::pair<const catalog::MigProfile*, double>> typical_;  // nullptr: whole GPU
  std::vector<Node> nodes_;
  std::vector<uint32_t> order_;    // scoring order (NodeOrder)
  std::vector<uint32_t> version_;  // bumped when a node changes
  struct Cached {
    uint32_t version = 0;
    Choice choice;
  };
  std::vector<Demand> shapes_;
  std::vector<std::vector<Cached>> cache_;     // [demand][node]
  std::unordered_map<uint64_t, double> memo_;  // GPU fragmentation by layout
};

}  // namespace

absl::StatusOr<const MigModel*> FindMigModel(std::string_view name) {
  const catalog::GpuModel* m = catalog::FindModel(name);
  if (m == nullptr || !m->mig_capable) {
    return absl::InvalidArgumentError(
        fmt::format("--mig-model \"{}\": not a MIG-capable model of the catalogue", name));
  }
  return m;
}

const catalog::MigProfile* ProfileForShare(const MigModel& model, int32_t gpu_milli) {
  const catalog::MigProfile* best = nullptr;
  for (const catalog::MigProfile& p : model.profiles) {
    if (p.media_extensions() || p.memory_slices >= model.memory_slices) continue;
    if (p.memory_slices * allocator::kMilliGpu < gpu_milli * model.memory_slices) continue;
    if (best == nullptr || p.memory_slices < best->memory_slices ||
        (p.memory_slices == best->memory_slices && p.compute_slices < best->compute_slices)) {
      best = &p;
    }
  }
  return best;
}

MigResult RunMig(const std::vector<allocator::NodeSpec>& nodes, const std::vector<TracePod>& pods,
                 const MigModel& model, bool own, uint64_t seed, double tune) {
  MigResult out;
  out.seed = seed;
  std::vector<Demand> demand;
  demand.reserve(pods.size());
  std::vector<std::pair<const catalog::MigProfile*, double>> typical;
  for (const TracePod& p : pods) {
    Demand d{p.shape.cpu_milli, p.shape.memory_mib, nullptr, 0};
    if (p.shape.Shares()) d.profile = ProfileForShare(model, p.shape.gpu_milli);
    if (d.profile == nullptr) d.whole = p.shape.num_gpu;
    demand.push_back(d);
    if (p.shape.num_gpu == 0) continue;
    auto it = std::find_if(typical.begin(), typical.end(),
                           [&](const auto& t) { return t.first == d.profile; });
    if (it == typical.end()) {
      typical.emplace_back(d.profile, 1.0);
    } else {
      it->second += 1.0;
    }
  }
  double total = 0;
  for (const auto& t : typical) total += t.second;
  for (auto& t : typical) t.second /= total;

  int64_t capacity = 0;
  for (const allocator::NodeSpec& n : nodes) capacity += int64_t{n.gpus} * allocator::kMilliGpu;
  MigSim sim(nodes, model, own, std::move(typical), seed);
  std::vector<int> ids;
  ids.reserve(demand.size());
  for (const Demand& d : demand) ids.push_back(sim.Intern(d));
  for (size_t i : ArrivalOrder(pods, capacity, tune, seed)) {
    ++out.pods;
    if (!sim.Place(ids[i])) continue;
    ++out.accepted;
    const Demand& d = demand[i];
    out.accepted_gpus += d.profile != nullptr
                             ? static_cast<double>(d.profile->compute_slices) / model.compute_slices
                             : d.whole;
  }
  out.gpus_used = sim.GpusUsed();
  out.used_gpu_util =
      out.gpus_used > 0 ? out.accepted_gpus / static_cast<double>(out.gpus_used) * 100 : 0;
  return out;
}

}  // namespace gpuaas::sim
