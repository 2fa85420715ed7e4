// Reclaim latency on the real control plane: a SQLite store on disk, the controllers on their
// own threads, a simulated fleet and the real clock. A pool of 100 H200s lends them all; then
// its project submits two workloads of 50 GPUs that need all 100 back. Measured: the time from
// that submission to both Running, with 1 borrower (of 1 GPU, the other 99 idle) and with
// 100 borrowers (one on each GPU), `--trials` times each. Reclaim tells every borrower in one
// pass, so both should sit at the grace plus the controllers' own time; the target is p99 at most
// the grace plus 5 s, the same for both.
//
//   build/release/bench/lending_bench [--trials 10] [--grace 2]
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cluster/simulated/fleet.h"
#include "controller/control_plane.h"
#include "fmt/format.h"
#include "service/pools.h"
#include "store/cache.h"
#include "store/objects.h"
#include "telemetry/hub.h"

namespace gpuaas {
namespace {

using model::Workload;
using model::WorkloadPhase;

constexpr int kGpus = 100;

// Waits until `pred` holds for the workloads of `ns`, read from the store; false after 120 s.
template <typename Pred>
bool WaitFor(store::Store& store, const std::string& ns, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<Workload> ws;
    absl::Status s = store.Transact([&](store::Txn& tx) -> absl::Status {
      ASSIGN_OR_RETURN(ws, store::ListObjects<Workload>(tx, ns));
      return absl::OkStatus();
    });
    if (s.ok() && pred(ws)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int Fail(const absl::Status& s) {
  fmt::print(stderr, "lending_bench: {}\n", s.ToString());
  return 1;
}

int Run(int trials, int grace) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("gpuaas-lend-{}", getpid());
  std::filesystem::create_directories(dir);
  std::unique_ptr<store::Store> st = std::move(*store::OpenStore("sqlite:" + (dir / "lend.db").string()));
  cluster::simulated::NodePoolSpec h200;
  h200.name = "h200";
  h200.count = 13;
  h200.model = "H200-SXM-141GB";
  cluster::simulated::ClusterSpec spec{"lab", "Lab", "local", {h200}};
  cluster::simulated::SimulatedCluster sim(spec);
  RealClock clock;
  store::ObjectCache cache(*st);
  if (absl::Status s = cache.Start(controller::ControlPlaneKinds()); !s.ok()) return Fail(s);
  telemetry::Hub hub;
  controller::ControlPlane cp(*st, cache, clock, {{"lab", &sim}}, hub);
  cp.Start();
  service::PoolService pools(*st, clock, [] { return std::map<std::string, int64_t>{{"H200-SXM-141GB", 104}}; });
  for (const char* p : {"vision", "nlp"}) {
    model::Project pr;
    pr.metadata.name = p;
    if (absl::Status s = pools.CreateProject(pr, "bench").status(); !s.ok()) return Fail(s);
  }
  model::GpuPool pool;
  pool.metadata.ns = "vision";
  pool.metadata.name = "train";
  pool.spec.items = {{"H200-SXM-141GB", "full", kGpus}};
  pool.spec.lending = model::GpuPool::Spec::Lending{true, 0, grace};
  if (absl::Status s = pools.CreatePool(pool, "bench").status(); !s.ok()) return Fail(s);
  if (absl::Status s = pools.Approve("vision", "train", true, "bench", "bench").status(); !s.ok()) return Fail(s);

  int serial = 0;
  for (const int borrowers : {1, 100}) {
    // The borrowers, one GPU each; they queue again when reclaimed.
    for (int i = 0; i < borrowers; ++i) {
      Workload b;
      b.metadata.ns = "nlp";
      b.metadata.name = fmt::format("b{}-{}", borrowers, i);
      b.spec = {"", "nvidia.com/gpu", 1, model::PriorityClass::kPreemptible};
      if (absl::Status s = pools.CreateWorkload(b, "bench").status(); !s.ok()) return Fail(s);
    }
    std::vector<double> took;
    for (int t = 0; t < trials; ++t) {
      if (!WaitFor(*st, "nlp", [&](const std::vector<Workload>& ws) {
            return std::count_if(ws.begin(), ws.end(), [&](const Workload& w) {
                     return w.status.phase == WorkloadPhase::kRunning &&
                            w.metadata.name.rfind(fmt::format("b{}-", borrowers), 0) == 0;
                   }) == borrowers;
          })) {
        fmt::print(stderr, "the borrowers did not all run\n");
        return 1;
      }
      // Two workloads of 50 GPUs (a workload asks for at most 64), submitted together.
      const std::string a = fmt::format("big-{}", ++serial), b = fmt::format("big-{}", ++serial);
      const auto t0 = std::chrono::steady_clock::now();
      for (const std::string& name : {a, b}) {
        Workload owner;
        owner.metadata.ns = "vision";
        owner.metadata.name = name;
        owner.spec = {"train", "nvidia.com/gpu", kGpus / 2, model::PriorityClass::kBatch};
        if (absl::Status s = pools.CreateWorkload(owner, "bench").status(); !s.ok()) return Fail(s);
      }
      if (!WaitFor(*st, "vision", [&](const std::vector<Workload>& ws) {
            int running = 0;
            for (const Workload& w : ws) {
              running += (w.metadata.name == a || w.metadata.name == b) && w.status.phase == WorkloadPhase::kRunning;
            }
            return running == 2;
          })) {
        fmt::print(stderr, "the owner did not run\n");
        return 1;
      }
      took.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      // The owner's run ends; the borrowers come back for the next trial.
      for (const std::string& name : {a, b}) {
        if (absl::Status s = pools.DeleteWorkload("vision", name, "bench").status(); !s.ok()) return Fail(s);
      }
    }
    std::sort(took.begin(), took.end());
    const double p50 = took[took.size() / 2];
    const double p99 = took[std::min(took.size() - 1, static_cast<size_t>(took.size() * 0.99))];
    fmt::print("{{\"borrowers\": {}, \"trials\": {}, \"grace_s\": {}, \"p50_s\": {:.3f}, \"p99_s\": {:.3f}, "
               "\"max_s\": {:.3f}, \"target_s\": {}, \"reclaims\": {}}}\n",
               borrowers, trials, grace, p50, p99, took.back(), grace + 5, cp.workloads().stats().reclaimed);
    // Those borrowers leave before the next case.
    for (int i = 0; i < borrowers; ++i) {
      if (absl::Status s = pools.DeleteWorkload("nlp", fmt::format("b{}-{}", borrowers, i), "bench").status(); !s.ok()) {
        return Fail(s);
      }
    }
  }
  cp.Stop();
  cache.Stop();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace gpuaas

int main(int argc, char** argv) {
  int trials = 10, grace = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--trials") trials = std::atoi(argv[i + 1]);
    else if (a == "--grace") grace = std::atoi(argv[i + 1]);
    else return fmt::print(stderr, "usage: lending_bench [--trials N] [--grace SECONDS]\n"), 2;
  }
  return gpuaas::Run(std::max(1, trials), std::max(0, grace));
}
