// The fleet summary (GET /api/v1/summary) on a large fleet: 100,000 GPUs (a third in MIG mode)
// and 10,000 live pools holding 8 devices each, in an in-memory store and its cache. What one
// change costs the next summary, for a GPU's change and for a pool's, kept change by change
// (api/internal/summary_api.h) against recomputing it from every GPU and pool as the summary
// did before (the fleet's decoded view made again, every pool decoded, model::Summarize), in the
// same run; and the first summary (cold), which decodes the fleet either way. Also what the
// fleet's decoded view (DecodedGpus, read by the fleet, telemetry and alert routes) costs after a
// GPU's change.
//
// Usage: build/release/bench/summary_bench [GPUS [POOLS [CHANGES]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "api/internal/objects.h"
#include "api/internal/summary_api.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "model/summary.h"
#include "store/sqlite_store.h"

namespace {

using namespace gpuaas;  // NOLINT: a benchmark's main
using Steady = std::chrono::steady_clock;

double Ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

model::GpuCapacity Gpu(int i, bool allocated) {
  model::GpuCapacity g;
  g.metadata.name = fmt::format("gpu-{:06}", i);
  g.spec.uuid = fmt::format("GPU-{:06}", i);
  g.spec.model = i % 2 ? "H200-SXM-141GB" : "H100-SXM5-80GB";
  g.spec.cluster = fmt::format("c{}", i / 5000);
  g.spec.node = fmt::format("node-{:05}", i / 8);
  if (i % 3 == 0) {
    g.status.mig_mode = model::MigMode::kEnabled;
    const std::string p = i % 2 ? "3g.71gb" : "3g.40gb";
    g.status.mig_instances = {{p, 0, 4, "", false}, {p, 4, 4, "", false}};
  } else {
    g.status.allocated = allocated;
  }
  return g;
}

model::GpuPool Pool(int k, int gpus, int salt) {
  model::GpuPool p;
  p.metadata.ns = fmt::format("project-{}", k % 100);
  p.metadata.name = fmt::format("pool-{:05}", k);
  p.status.approval = model::GpuPool::Approval{true, "ok", "ops", {}};
  for (int d = 0; d < 8; ++d) {
    const int i = (k * 8 + d + salt) % gpus;
    const bool mig = i % 3 == 0;
    p.status.allocation.push_back({"c", "n", fmt::format("GPU-{:06}", i), mig ? "3g.71gb" : "full", mig ? 4 : 0, ""});
  }
  return p;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int gpus = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int pools = argc > 2 ? std::atoi(argv[2]) : 10000;
  const int changes = argc > 3 ? std::atoi(argv[3]) : 20;
  std::unique_ptr<store::Store> db = std::move(*store::OpenStore("sqlite::memory:"));
  auto put = [&](const store::Key& key, const std::string& json) {
    return db->Transact([&](store::Txn& txn) { return txn.Put(key, "", json, store::kAnyVersion); });
  };
  const std::string gpu_kind(model::GpuCapacity::kKind), pool_kind(model::GpuPool::kKind);
  if (!db->Transact([&](store::Txn& txn) -> absl::Status {
             for (int i = 0; i < gpus; ++i) {
               const model::GpuCapacity g = Gpu(i, false);
               if (absl::Status s = txn.Put({gpu_kind, "", g.metadata.name}, "", model::Encode(g), store::kAnyVersion); !s.ok()) return s;
             }
             for (int k = 0; k < pools; ++k) {
               const model::GpuPool p = Pool(k, gpus, 0);
               if (absl::Status s = txn.Put({pool_kind, p.metadata.ns, p.metadata.name}, "", model::Encode(p), store::kAnyVersion); !s.ok()) return s;
             }
             return absl::OkStatus();
           }).ok()) {
    std::fprintf(stderr, "writing the fleet failed\n");
    return 1;
  }
  store::ObjectCache cache(*db);
  if (!cache.Load({gpu_kind, pool_kind}).ok()) return 1;
  api::internal::SummaryApi kept(cache);
  api::internal::DecodedGpus decoded(cache);
  // The fleet's decoded view alone (what the fleet, telemetry and alert routes read), kept apart.
  api::internal::DecodedGpus fleet_view(cache);
  fleet_view.Get();
  // The summary as it was computed before: the fleet's decoded view (only changed GPUs decoded
  // again, the view's maps made anew), every pool decoded, every GPU summed.
  auto recomputed = [&] {
    std::shared_ptr<const api::internal::DecodedGpus::View> view = decoded.Get();
    return model::Summarize(view->in_order, model::HeldByPools(api::internal::DecodeAll<model::GpuPool>(cache)));
  };
  auto t0 = Steady::now();
  const int64_t cold_kept_gpus = kept.Get()->physical.gpus;
  const double cold_kept = Ms(Steady::now() - t0);
  t0 = Steady::now();
  const int64_t cold_recomputed_gpus = recomputed().physical.gpus;
  const double cold_recomputed = Ms(Steady::now() - t0);
  std::printf("fleet: %d GPUs, %d pools of 8 devices; %d changes of each kind\n", gpus, pools, changes);
  std::printf("cold (first summary): kept %.1f ms, recomputed %.1f ms (%lld and %lld GPUs)\n", cold_kept,
              cold_recomputed, static_cast<long long>(cold_kept_gpus), static_cast<long long>(cold_recomputed_gpus));
  std::vector<double> gpu_kept, gpu_recomputed, pool_kept, pool_recomputed, view_after_gpu;
  for (int c = 0; c < changes; ++c) {
    // A GPU changes (its allocation as the cluster reports it) ...
    const model::GpuCapacity g = Gpu(1 + 3 * c, c % 2 == 0);
    if (!put({gpu_kind, "", g.metadata.name}, model::Encode(g)).ok() || !cache.SyncNow().ok()) return 1;
    t0 = Steady::now();
    const model::FleetSummary a = *kept.Get();
    gpu_kept.push_back(Ms(Steady::now() - t0));
    t0 = Steady::now();
    if (fleet_view.Get()->in_order.size() != static_cast<size_t>(gpus)) return 1;
    view_after_gpu.push_back(Ms(Steady::now() - t0));
    t0 = Steady::now();
    const model::FleetSummary b = recomputed();
    gpu_recomputed.push_back(Ms(Steady::now() - t0));
    // ... and a pool takes other devices.
    const model::GpuPool p = Pool(c, gpus, c + 1);
    if (!put({pool_kind, p.metadata.ns, p.metadata.name}, model::Encode(p)).ok() || !cache.SyncNow().ok()) return 1;
    t0 = Steady::now();
    const model::FleetSummary x = *kept.Get();
    pool_kept.push_back(Ms(Steady::now() - t0));
    t0 = Steady::now();
    const model::FleetSummary y = recomputed();
    pool_recomputed.push_back(Ms(Steady::now() - t0));
    if (a.logical_total.allocated != b.logical_total.allocated || x.logical_total.allocated != y.logical_total.allocated) {
      std::fprintf(stderr, "the kept summary differs from the recomputed one\n");
      return 1;
    }
  }
  std::printf("after a GPU's change, median: kept %.3f ms, recomputed %.1f ms\n", Median(gpu_kept), Median(gpu_recomputed));
  std::printf("after a pool's change, median: kept %.3f ms, recomputed %.1f ms\n", Median(pool_kept), Median(pool_recomputed));
  std::printf("the fleet's decoded view after a GPU's change, median: %.3f ms\n", Median(view_after_gpu));
  return 0;
}
