// The fleet summary kept change by change (api/internal/summary_api.h) against the summary of
// the whole fleet as the store holds it, after every transaction of a random sequence.
#include "api/internal/summary_api.h"

#include <random>
#include <sstream>

#include "common/status.h"
#include "gtest/gtest.h"
#include "model/codec.h"
#include "store/sqlite_store.h"

namespace gpuaas::api::internal {
namespace {

std::string Text(const model::FleetSummary& s) {
  std::ostringstream out;
  auto count = [&](const model::FleetSummary::ModelCount& c) {
    out << c.gpus << "," << c.mig_enabled << "," << c.full << "," << c.unhealthy << "," << c.nodes << ";";
  };
  count(s.physical);
  for (const auto& [m, c] : s.by_model) out << m << ":", count(c);
  for (const auto& [m, c] : s.by_cluster) out << m << ":", count(c);
  for (const auto& [k, d] : s.logical) out << k.first << "/" << k.second << ":" << d.count << "," << d.allocated << "," << d.available << ";";
  out << s.logical_total.count << "," << s.logical_total.allocated << "," << s.logical_total.available;
  return out.str();
}

TEST(SummaryApi, FollowsEveryChangeOfGpusAndPools) {
  std::unique_ptr<store::Store> db = std::move(*store::OpenStore("sqlite::memory:"));
  store::ObjectCache cache(*db);
  ASSERT_TRUE(cache.Load({std::string(model::GpuCapacity::kKind), std::string(model::GpuPool::kKind)}).ok());
  SummaryApi summary(cache);
  std::mt19937 rng(11);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  auto gpu_name = [](int i) { return "gpu-" + std::to_string(i); };
  for (int step = 0; step < 120; ++step) {
    ASSERT_TRUE(db->Transact([&](store::Txn& txn) -> absl::Status {
                    for (int k = 0; k < 3; ++k) {
                      const int i = pick(10);
                      if (pick(2) == 0) {  // a GPU written or deleted
                        const store::Key key{std::string(model::GpuCapacity::kKind), "", gpu_name(i)};
                        if (pick(5) == 0) {
                          absl::Status s = txn.Delete(key, store::kAnyVersion);
                          if (!s.ok() && !absl::IsNotFound(s)) return s;
                          continue;
                        }
                        model::GpuCapacity g;
                        g.metadata.name = gpu_name(i);
                        g.spec.uuid = "GPU-" + std::to_string(i);
                        g.spec.model = pick(2) ? "H200-SXM-141GB" : "H100-SXM5-80GB";
                        g.spec.cluster = "c" + std::to_string(pick(2));
                        g.spec.node = "n" + std::to_string(pick(3));
                        g.status.health = pick(4) == 0 ? model::Health::kUnhealthy : model::Health::kHealthy;
                        if (pick(2) == 0) {
                          g.status.mig_mode = model::MigMode::kEnabled;
                          g.status.mig_instances = {{"3g.71gb", 0, 4, "", pick(3) == 0}, {"3g.71gb", 4, 4, "", false}};
                        } else {
                          g.status.allocated = pick(3) == 0;
                        }
                        RETURN_IF_ERROR(txn.Put(key, "", model::Encode(g), store::kAnyVersion));
                      } else {  // a pool takes devices, is rejected, or is deleted
                        const store::Key key{std::string(model::GpuPool::kKind), "p", "pool-" + std::to_string(i % 4)};
                        if (pick(6) == 0) {
                          absl::Status s = txn.Delete(key, store::kAnyVersion);
                          if (!s.ok() && !absl::IsNotFound(s)) return s;
                          continue;
                        }
                        model::GpuPool p;
                        p.metadata.ns = "p";
                        p.metadata.name = key.name;
                        p.status.approval = model::GpuPool::Approval{pick(4) != 0, "r", "ops", {}};
                        for (int d = 0; d < 2; ++d) {
                          const int j = pick(10);
                          const bool whole = pick(2) == 0;
                          p.status.allocation.push_back(
                              {"c0", "n0", "GPU-" + std::to_string(j), whole ? "full" : "3g.71gb", whole ? 0 : 4 * pick(2), ""});
                        }
                        RETURN_IF_ERROR(txn.Put(key, "", model::Encode(p), store::kAnyVersion));
                      }
                    }
                    return absl::OkStatus();
                  })
                    .ok());
    ASSERT_TRUE(cache.SyncNow().ok());
    if (pick(3) == 0) continue;  // changes pile up between reads too
    std::vector<model::GpuCapacity> gpus;
    const absl::StatusOr<std::vector<store::Record>> gpu_records = db->List(model::GpuCapacity::kKind, "");
    const absl::StatusOr<std::vector<store::Record>> pool_records = db->List(model::GpuPool::kKind, "");
    ASSERT_TRUE(gpu_records.ok() && pool_records.ok());
    for (const store::Record& r : *gpu_records) gpus.push_back(*model::Decode<model::GpuCapacity>(r.data));
    std::vector<model::GpuPool> pools;
    for (const store::Record& r : *pool_records) pools.push_back(*model::Decode<model::GpuPool>(r.data));
    ASSERT_EQ(Text(*summary.Get()), Text(model::Summarize(gpus, model::HeldByPools(pools)))) << "step " << step;
  }
}

}  // namespace
}  // namespace gpuaas::api::internal
