// The fleet's decoded view (api/internal/objects.h): a new snapshot decodes only what changed and
// keeps the rest, and finds GPUs by UUID in either letter case.
#include "api/internal/objects.h"

#include "common/strings.h"
#include "gtest/gtest.h"
#include "model/codec.h"
#include "store/sqlite_store.h"

namespace gpuaas::api::internal {
namespace {

model::GpuCapacity Gpu(const std::string& uuid, const std::string& node) {
  model::GpuCapacity g;
  g.metadata.name = ToLower(uuid);
  g.spec.uuid = uuid;
  g.spec.model = "H200-SXM-141GB";
  g.spec.node = node;
  return g;
}

TEST(DecodedGpus, ANewSnapshotDecodesOnlyWhatChanged) {
  std::unique_ptr<store::Store> db = std::move(*store::OpenStore("sqlite::memory:"));
  const std::string kind(model::GpuCapacity::kKind);
  auto put = [&](const model::GpuCapacity& g) {
    ASSERT_TRUE(db->Transact([&](store::Txn& tx) {
                    return tx.Put({kind, "", g.metadata.name}, "", model::Encode(g), store::kAnyVersion);
                  }).ok());
  };
  for (const char* u : {"GPU-A1", "GPU-B2", "GPU-C3"}) put(Gpu(u, "n1"));
  store::ObjectCache cache(*db);
  ASSERT_TRUE(cache.Load({kind}).ok());
  DecodedGpus gpus(cache);
  std::shared_ptr<const DecodedGpus::View> first = gpus.Get();
  ASSERT_EQ(first->in_order.size(), 3u);
  EXPECT_EQ(gpus.Get(), first) << "the same snapshot, the same view";
  EXPECT_EQ(first->Find("GPU-B2"), first->in_order[1]);
  EXPECT_EQ(first->Find("gpu-b2"), first->in_order[1]) << "either letter case";
  EXPECT_EQ(first->Find("GPU-Z9"), nullptr);

  // One changes, one goes, one comes, and one that does not decode is left out.
  put(Gpu("GPU-B2", "n2"));
  ASSERT_TRUE(db->Transact([&](store::Txn& tx) { return tx.Delete({kind, "", "gpu-c3"}, store::kAnyVersion); }).ok());
  put(Gpu("GPU-D4", "n1"));
  ASSERT_TRUE(db->Transact([&](store::Txn& tx) {
                  return tx.Put({kind, "", "gpu-e5"}, "", R"({"kind":"GpuCapacity","metadata":{"name":"gpu-e5"},"spec":7})",
                                store::kAnyVersion);
                }).ok());
  ASSERT_TRUE(cache.SyncNow().ok());
  std::shared_ptr<const DecodedGpus::View> second = gpus.Get();
  ASSERT_EQ(second->in_order.size(), 3u);
  EXPECT_EQ(second->in_order[0], first->in_order[0]) << "GPU-A1 did not change: decoded once";
  EXPECT_EQ(second->Find("GPU-B2")->spec.node, "n2");
  EXPECT_NE(second->Find("GPU-B2"), first->Find("GPU-B2"));
  EXPECT_EQ(second->Find("GPU-C3"), nullptr);
  EXPECT_EQ(second->Find("GPU-D4")->spec.uuid, "GPU-D4");
  EXPECT_EQ(second->Find("GPU-E5"), nullptr) << "an object that does not decode is no GPU";
  EXPECT_EQ(first->Find("GPU-B2")->spec.node, "n1") << "a view held keeps what it showed";
}

}  // namespace
}  // namespace gpuaas::api::internal
