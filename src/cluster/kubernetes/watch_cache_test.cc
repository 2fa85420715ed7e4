#include "cluster/kubernetes/watch_cache.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpuaas::cluster::kubernetes {
namespace {

// A pod as a cache test needs one: where it runs and something that changes.
struct Pod {
  std::string ns;
  std::string name;
  std::string node;  // empty: unscheduled
  int gpus = 0;
  friend bool operator==(const Pod&, const Pod&) = default;
};

constexpr char kByNode[] = "by-node";

WatchCache<Pod>::KeyFn Key() {
  return [](const Pod& p) { return p.ns + "/" + p.name; };
}

// Pods by node, as the driver files its GPU pods; an unscheduled pod is in no index.
WatchCache<Pod>::Indexes ByNode() {
  return {{kByNode, [](const Pod& p) {
             return p.node.empty() ? std::vector<std::string>{} : std::vector<std::string>{p.node};
           }}};
}

std::vector<std::string> Names(const std::vector<WatchCache<Pod>::Ptr>& pods) {
  std::vector<std::string> out;
  for (const WatchCache<Pod>::Ptr& p : pods) out.push_back(p->name);
  return out;
}

TEST(WatchCache, ApplyAddsModifiesAndDeletesAndSaysWhatWasThere) {
  WatchCache<Pod> cache(Key());
  EXPECT_EQ(cache.Get("ml/train"), nullptr);

  WatchCache<Pod>::Change added = cache.Apply("ADDED", {"ml", "train", "n1", 1});
  EXPECT_EQ(added.before, nullptr);
  ASSERT_NE(added.after, nullptr);
  EXPECT_TRUE(added.changed());
  ASSERT_NE(cache.Get("ml/train"), nullptr);
  EXPECT_EQ(cache.Get("ml/train")->gpus, 1);

  // The same object again (a status heartbeat the decoding drops) is no change.
  EXPECT_FALSE(cache.Apply("MODIFIED", {"ml", "train", "n1", 1}).changed());

  WatchCache<Pod>::Ptr held = cache.Get("ml/train");
  WatchCache<Pod>::Change modified = cache.Apply("MODIFIED", {"ml", "train", "n1", 2});
  EXPECT_TRUE(modified.changed());
  ASSERT_NE(modified.before, nullptr);
  EXPECT_EQ(modified.before->gpus, 1);
  EXPECT_EQ(modified.after->gpus, 2);
  EXPECT_EQ(cache.Get("ml/train")->gpus, 2);
  EXPECT_EQ(held->gpus, 1) << "a pointer handed out is never changed under its holder";

  WatchCache<Pod>::Change deleted = cache.Apply(kWatchDeleted, {"ml", "train", "n1", 2});
  EXPECT_TRUE(deleted.changed());
  ASSERT_NE(deleted.before, nullptr);
  EXPECT_EQ(deleted.after, nullptr);
  EXPECT_EQ(cache.Get("ml/train"), nullptr);
  EXPECT_EQ(cache.size(), 0u);

  // Deleting what is not there changes nothing.
  WatchCache<Pod>::Change again = cache.Apply(kWatchDeleted, {"ml", "train", "n1", 2});
  EXPECT_FALSE(again.changed());
  EXPECT_EQ(again.before, nullptr);
}

TEST(WatchCache, ListIsEveryObjectSortedByKey) {
  WatchCache<Pod> cache(Key());
  cache.Apply("ADDED", {"ml", "b", "n1", 1});
  cache.Apply("ADDED", {"cv", "z", "n2", 1});
  cache.Apply("ADDED", {"ml", "a", "n1", 1});
  EXPECT_EQ(Names(cache.List()), (std::vector<std::string>{"z", "a", "b"}));
  EXPECT_EQ(cache.size(), 3u);
}

TEST(WatchCache, DeleteByKeyForAnObjectThatDoesNotDecode) {
  WatchCache<Pod> cache(Key(), nullptr, ByNode());
  cache.Apply("ADDED", {"ml", "train", "n1", 1});
  WatchCache<Pod>::Change gone = cache.Delete("ml/train");
  ASSERT_NE(gone.before, nullptr);
  EXPECT_EQ(gone.after, nullptr);
  EXPECT_EQ(cache.Get("ml/train"), nullptr);
  EXPECT_TRUE(cache.ByIndex(kByNode, "n1").empty());
  EXPECT_FALSE(cache.Delete("ml/train").changed());
}

TEST(WatchCache, ARelistDropsObjectsThatAreGoneAndKeepsTheRest) {
  WatchCache<Pod> cache(Key(), nullptr, ByNode());
  EXPECT_FALSE(cache.synced());
  cache.Replace({{"ml", "a", "n1", 1}, {"ml", "b", "n1", 1}, {"ml", "c", "n2", 1}}, "100");
  EXPECT_TRUE(cache.synced());
  EXPECT_EQ(cache.resource_version(), "100");
  cache.Apply("ADDED", {"ml", "d", "n2", 1}, "101");
  EXPECT_EQ(cache.resource_version(), "101");

  // The watch missed b's deletion and d's, and a changed: the list is what is.
  cache.Replace({{"ml", "a", "n3", 4}, {"ml", "c", "n2", 1}, {"ml", "e", "n1", 1}}, "200");
  EXPECT_EQ(cache.resource_version(), "200");
  EXPECT_EQ(Names(cache.List()), (std::vector<std::string>{"a", "c", "e"}));
  EXPECT_EQ(cache.Get("ml/b"), nullptr);
  EXPECT_EQ(cache.Get("ml/d"), nullptr);
  EXPECT_EQ(cache.Get("ml/a")->gpus, 4);
  // The indexes are rebuilt with the objects: nothing of b, d or a's old node is left.
  EXPECT_EQ(Names(cache.ByIndex(kByNode, "n1")), (std::vector<std::string>{"e"}));
  EXPECT_EQ(Names(cache.ByIndex(kByNode, "n2")), (std::vector<std::string>{"c"}));
  EXPECT_EQ(Names(cache.ByIndex(kByNode, "n3")), (std::vector<std::string>{"a"}));
  EXPECT_EQ(cache.IndexValues(kByNode), (std::vector<std::string>{"n1", "n2", "n3"}));

  // An empty list empties the cache.
  cache.Replace({}, "300");
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_TRUE(cache.IndexValues(kByNode).empty());
}

TEST(WatchCache, ByIndexFollowsEveryChange) {
  WatchCache<Pod> cache(Key(), nullptr, ByNode());
  cache.Apply("ADDED", {"ml", "b", "n1", 1});
  cache.Apply("ADDED", {"ml", "a", "n1", 1});
  cache.Apply("ADDED", {"ml", "pending", "", 1});
  EXPECT_EQ(Names(cache.ByIndex(kByNode, "n1")), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(cache.IndexValues(kByNode), (std::vector<std::string>{"n1"}))
      << "an object the index gives no value is in no index";

  // Moved: filed under its new value only.
  cache.Apply("MODIFIED", {"ml", "b", "n2", 1});
  EXPECT_EQ(Names(cache.ByIndex(kByNode, "n1")), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Names(cache.ByIndex(kByNode, "n2")), (std::vector<std::string>{"b"}));

  // Scheduled at last.
  cache.Apply("MODIFIED", {"ml", "pending", "n2", 1});
  EXPECT_EQ(Names(cache.ByIndex(kByNode, "n2")), (std::vector<std::string>{"b", "pending"}));

  // Deleted: gone from the index, and a value with no objects left is no value.
  cache.Apply(kWatchDeleted, {"ml", "a", "n1", 1});
  EXPECT_TRUE(cache.ByIndex(kByNode, "n1").empty());
  EXPECT_EQ(cache.IndexValues(kByNode), (std::vector<std::string>{"n2"}));

  EXPECT_TRUE(cache.ByIndex("no-such-index", "n2").empty());
  EXPECT_TRUE(cache.IndexValues("no-such-index").empty());
}

TEST(WatchCache, AnObjectTheCacheDoesNotKeepLeavesIt) {
  // Only pods holding GPUs, as the driver keeps only what it reports.
  WatchCache<Pod> cache(
      Key(), [](const Pod& p) { return p.gpus > 0; }, ByNode());
  EXPECT_FALSE(cache.Apply("ADDED", {"ml", "web", "n1", 0}).changed());
  EXPECT_EQ(cache.Get("ml/web"), nullptr);

  cache.Apply("ADDED", {"ml", "train", "n1", 1});
  // Its GPUs released (it finished): it leaves the cache and the index, as if deleted.
  WatchCache<Pod>::Change done = cache.Apply("MODIFIED", {"ml", "train", "n1", 0});
  EXPECT_TRUE(done.changed());
  EXPECT_EQ(done.after, nullptr);
  EXPECT_EQ(cache.Get("ml/train"), nullptr);
  EXPECT_TRUE(cache.ByIndex(kByNode, "n1").empty());

  cache.Replace({{"ml", "web", "n1", 0}, {"ml", "train", "n1", 2}}, "7");
  EXPECT_EQ(Names(cache.List()), (std::vector<std::string>{"train"}));
}

TEST(WatchCache, OfObjectsListedTwiceTheLastCounts) {
  WatchCache<Pod> cache(Key());
  cache.Replace({{"ml", "a", "n1", 1}, {"ml", "a", "n2", 3}}, "1");
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Get("ml/a")->node, "n2");
}

TEST(WatchCache, ReadersAndAWriterAtOnce) {
  WatchCache<Pod> cache(Key(), nullptr, ByNode());
  constexpr int kPods = 500;
  std::thread writer([&] {
    for (int i = 0; i < kPods; ++i) {
      cache.Apply("ADDED", {"ml", std::to_string(i), i % 2 == 0 ? "n1" : "n2", 1});
    }
    for (int i = 0; i < kPods; i += 2)
      cache.Apply(kWatchDeleted, {"ml", std::to_string(i), "n1", 1});
  });
  // Every read sees a whole state: each object filed under the node it holds.
  for (int reads = 0; reads < 200; ++reads) {
    for (const WatchCache<Pod>::Ptr& p : cache.ByIndex(kByNode, "n1")) EXPECT_EQ(p->node, "n1");
    EXPECT_LE(cache.List().size(), static_cast<size_t>(kPods));
  }
  writer.join();
  EXPECT_EQ(cache.size(), static_cast<size_t>(kPods / 2));
  EXPECT_TRUE(cache.ByIndex(kByNode, "n1").empty());
  EXPECT_EQ(cache.ByIndex(kByNode, "n2").size(), static_cast<size_t>(kPods / 2));
}

}  // namespace
}  // namespace gpuaas::cluster::kubernetes
