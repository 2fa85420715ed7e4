#include "api/internal/pages.h"

#include "gtest/gtest.h"

namespace gpuaas::api::internal {
namespace {

std::shared_ptr<const store::KindSnapshot> Snap(int64_t rev) {
  auto s = std::make_shared<store::KindSnapshot>();
  s->revision = rev;
  return s;
}

TEST(PageSnapshots, HeldUntilUnusedForTheTtlOrPushedOut) {
  using std::chrono::seconds;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  PageSnapshots pages(2, seconds(60));
  auto a = Snap(10);
  pages.Hold("GpuCapacity", a, t0);
  EXPECT_EQ(pages.Find("GpuCapacity", 10, t0 + seconds(59)), a);  // reading it restarts its time
  EXPECT_EQ(pages.Find("GpuCapacity", 10, t0 + seconds(118)), a);
  EXPECT_EQ(pages.Find("GpuCapacity", 11, t0 + seconds(118)), nullptr);
  EXPECT_EQ(pages.Find("NodeCapacity", 10, t0 + seconds(118)), nullptr);  // per kind
  EXPECT_EQ(pages.Find("GpuCapacity", 10, t0 + seconds(179)), nullptr);   // unused for 61 s
  EXPECT_EQ(pages.held(), 0u);

  // At most two held: the least recently used goes first.
  pages.Hold("GpuCapacity", Snap(1), t0);
  pages.Hold("GpuCapacity", Snap(2), t0 + seconds(1));
  EXPECT_NE(pages.Find("GpuCapacity", 1, t0 + seconds(2)), nullptr);
  pages.Hold("GpuCapacity", Snap(3), t0 + seconds(3));
  EXPECT_EQ(pages.held(), 2u);
  EXPECT_NE(pages.Find("GpuCapacity", 1, t0 + seconds(4)), nullptr);
  EXPECT_EQ(pages.Find("GpuCapacity", 2, t0 + seconds(4)), nullptr);
  EXPECT_NE(pages.Find("GpuCapacity", 3, t0 + seconds(4)), nullptr);
}

}  // namespace
}  // namespace gpuaas::api::internal
