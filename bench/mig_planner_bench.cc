// How many GPUs the pool allocator (allocator::Allocate, what the pool controller calls) uses
// for MIG pools against the exact optimum, found by an exhaustive branch-and-bound search of its
// own (the fewest GPUs whose legal layouts hold all the instances; it shares no code with the
// allocator's planner but catalog::PlaceProfiles, which checks a GPU's layout):
//   single: each case one pool of 3-16 random MIG instances of one MIG-capable H100 or H200
//           model (every profile but the +me ones), on 16 idle GPUs of that model;
//   sequence: 1-3 pools of 1-4 random H200 instances arrive one after another on 16 idle GPUs,
//           each placed as the pool controller would, against the offline optimum of all of
//           them at once.
//
//   build/release/bench/mig_planner_bench [cases=500] [seed=1]
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

// A fleet of 16 idle GPUs of `m`, two nodes of 8.
allocator::FleetSnapshot IdleFleet(const catalog::GpuModel& m) {
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
  return fleet;
}

int UsedGpus(const allocator::FleetSnapshot& fleet) {
  int used = 0;
  for (const allocator::GpuState& g : fleet.gpus) {
    used += std::any_of(g.instances.begin(), g.instances.end(),
                        [](const allocator::InstanceState& i) { return !i.owner.empty(); });
  }
  return used;
}

struct Tally {
  int cases = 0, equal = 0, planner = 0, exact = 0, worst = 0;
  void Add(int used, int best) {
    ++cases;
    equal += used == best;
    planner += used;
    exact += best;
    worst = std::max(worst, used - best);
  }
  void Print(const char* what, const char* instances) const {
    std::printf("%s,%d,%s,%d,%d,%.2f,%.1f,%d\n", what, cases, instances, planner, exact,
                100.0 * (planner - exact) / exact, 100.0 * equal / cases, worst);
  }
};

int main(int argc, char** argv) {
  const int cases = argc > 1 ? std::atoi(argv[1]) : 500;
  std::mt19937 rng(argc > 2 ? std::atoi(argv[2]) : 1);
  const auto& profile = *allocator::ProfileByName("default");
  std::vector<const catalog::GpuModel*> models;
  for (const catalog::GpuModel& m : catalog::AllModels()) {
    if (m.mig_capable && (m.name.starts_with("H100") || m.name.starts_with("H200"))) models.push_back(&m);
  }

  // One pool a case.
  Tally single;
  std::map<std::string, Tally> by_model;
  for (int c = 0; c < cases; ++c) {
    const catalog::GpuModel& m = *models[rng() % models.size()];
    std::vector<const catalog::MigProfile*> usable;
    for (const catalog::MigProfile& p : m.profiles) {
      if (!p.media_extensions()) usable.push_back(&p);
    }
    std::map<std::string, int> want;
    const int n = 3 + static_cast<int>(rng() % 14);
    for (int k = 0; k < n; ++k) ++want[std::string(usable[rng() % usable.size()]->name)];
    allocator::FleetSnapshot fleet = IdleFleet(m);
    allocator::Request req{"bench/p", "", {}};
    std::vector<std::string> all;
    for (const auto& [prof, count] : want) {
      req.items.push_back({std::string(m.name), prof, count});
      for (int k = 0; k < count; ++k) all.push_back(prof);
    }
    allocator::Outcome o = allocator::Allocate(fleet, req, profile);
    if (o.code != allocator::Code::kSuccess) {
      std::fprintf(stderr, "case %d: %s\n", c, o.reason.c_str());
      return 1;
    }
    allocator::ApplyPlan(fleet, req, o.plan);
    const int used = UsedGpus(fleet);
    Exact exact{m, all, {}, 0};
    const int best = static_cast<int>(exact.Solve());
    single.Add(used, best);
    by_model[std::string(m.name)].Add(used, best);
  }

  // Pools one after another, against the offline optimum.
  Tally sequence;
  const catalog::GpuModel& h200 = *catalog::FindModel("H200-SXM-141GB");
  const char* profiles[] = {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"};
  for (int c = 0; c < cases; ++c) {
    allocator::FleetSnapshot fleet = IdleFleet(h200);
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
        std::fprintf(stderr, "sequence %d: %s\n", c, o.reason.c_str());
        return 1;
      }
      allocator::ApplyPlan(fleet, req, o.plan);
    }
    Exact exact{h200, all, {}, 0};
    sequence.Add(UsedGpus(fleet), static_cast<int>(exact.Solve()));
  }
  std::printf("kind,cases,instances_per_case,allocator_gpus,optimal_gpus,excess_pct,cases_optimal_pct,worst_excess\n");
  single.Print("single", "3-16");
  for (const auto& [name, t] : by_model) t.Print(("single:" + name).c_str(), "3-16");
  sequence.Print("sequence", "1-12");
  return 0;
}
