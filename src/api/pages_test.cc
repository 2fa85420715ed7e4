#include "api/internal/pages.h"

#include "common/strings.h"
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

TEST(ContinueToken, NamesTheRevisionAndTheLastItemOfItsList) {
  absl::StatusOr<ContinueAt> at = ParseContinue("gpupools", ContinueToken("gpupools", 42, "vision", "train"));
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->revision, 42);
  EXPECT_EQ(at->after, std::make_pair(std::string("vision"), std::string("train")));
  // Another list's token, or one that is not a token, is refused; an earlier format's is gone.
  EXPECT_EQ(ParseContinue("workloads", ContinueToken("gpupools", 42, "vision", "train")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseContinue("gpupools", "not-a-token").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseContinue("gpupools", Base64UrlEncode("v1\x1fgpupools\x1fvision\x1ftrain")).status().code(),
            absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace gpuaas::api::internal
