// How many GPUs the allocator's MIG planning uses against the exact optimum, on small random
// instances: pools of random H200 MIG instances arrive one after another on a fleet of idle
// whole GPUs; the planner places each pool as the pool controller would, and an exhaustive
// branch-and-bound search finds the fewest GPUs whose legal layouts hold all the instances.
//
//   build/release/bench/mig_planner_bench [instances=200] [seed=1]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "catalog/catalog.h"

namespace {

using namespace gpuaas;

// Exact: the fewest bins (GPUs) such that each bin's profiles form a legal layout.
struct Exact {
  const catalog::GpuModel& m;
  std::vector<std::string> items;  // sorted largest first
  std::vector<std::vector<std::string>> bins;
  size_t best = 0;

  bool Fits(std::vector<std::string> bin, const std::string& p) const {
    bin.push_back(p);
    return catalog::PlaceProfiles(m, bin).ok();
  }
  void Search(size_t i) {
    if (bins.size() >= best) return;
    if (i == items.size()) {
      best = bins.size();
      return;
    }
    std::set<std::vector<std::string>> tried;  // identical bins are symmetric
    // By index: deeper calls open new bins, which may move the vector.
    for (size_t b = 0; b < bins.size(); ++b) {
      std::vector<std::string> key = bins[b];
      std::sort(key.begin(), key.end());
      if (!tried.insert(key).second) continue;
      if (!Fits(bins[b], items[i])) continue;
      bins[b].push_back(items[i]);
      Search(i + 1);
      bins[b].pop_back();
    }
    bins.push_back({items[i]});
    Search(i + 1);
    bins.pop_back();
  }
  size_t Solve() {
    std::sort(items.begin(), items.end(), [&](const std::string& a, const std::string& b) {
      return catalog::FindProfile(m, a)->memory_slices > catalog::FindProfile(m, b)->memory_slices;
    });
    best = items.size() + 1;
    Search(0);
    return best;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int cases = argc > 1 ? std::atoi(argv[1]) : 200;
  std::mt19937 rng(argc > 2 ? std::atoi(argv[2]) : 1);
  const catalog::GpuModel& m = *catalog::FindModel("H200-SXM-141GB");
  const char* profiles[] = {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"};
  const auto& profile = *allocator::ProfileByName("default");
  int equal = 0, total_planner = 0, total_exact = 0, worst = 0;
  for (int c = 0; c < cases; ++c) {
    allocator::FleetSnapshot fleet;
    for (int i = 0; i < 16; ++i) {
      allocator::GpuState g;
      g.cluster = "bench";
      g.node = "node-" + std::to_string(i / 8);
      g.index = i % 8;
      g.uuid = "GPU-" + std::to_string(i);
      g.model = &m;
      fleet.gpus.push_back(g);
    }
    std::vector<std::string> all;
    const int pools = 1 + static_cast<int>(rng() % 3);
    for (int p = 0; p < pools; ++p) {
      std::map<std::string, int> want;
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < n; ++k) ++want[profiles[rng() % 5 == 0 ? 3 + rng() % 3 : rng() % 4]];
      allocator::Request req{"bench/p" + std::to_string(p), "", {}};
      for (const auto& [prof, count] : want) {
        req.items.push_back({"H200-SXM-141GB", prof, count});
        for (int k = 0; k < count; ++k) all.push_back(prof);
      }
      allocator::Outcome o = allocator::Allocate(fleet, req, profile);
      if (o.code != allocator::Code::kSuccess) {
        std::fprintf(stderr, "case %d: %s\n", c, o.reason.c_str());
        return 1;
      }
      allocator::ApplyPlan(fleet, req, o.plan);
    }
    int used = 0;
    for (const allocator::GpuState& g : fleet.gpus) {
      used += std::any_of(g.instances.begin(), g.instances.end(),
                          [](const allocator::InstanceState& i) { return !i.owner.empty(); });
    }
    Exact exact{m, all, {}, 0};
    const int best = static_cast<int>(exact.Solve());
    equal += used == best;
    total_planner += used;
    total_exact += best;
    worst = std::max(worst, used - best);
  }
  std::printf("cases,instances_per_case,planner_gpus,optimal_gpus,excess_pct,cases_optimal_pct,worst_excess\n");
  std::printf("%d,1-12,%d,%d,%.1f,%.1f,%d\n", cases, total_planner, total_exact,
              100.0 * (total_planner - total_exact) / total_exact, 100.0 * equal / cases, worst);
  return 0;
}
