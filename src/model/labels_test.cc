#include "model/labels.h"

#include "gtest/gtest.h"

namespace gpuaas::model {
namespace {

bool Sel(std::string_view s, const std::map<std::string, std::string>& labels) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(s);
  EXPECT_TRUE(sel.ok()) << s << ": " << sel.status();
  return sel.ok() && sel->Matches(labels);
}

TEST(LabelSelector, Operators) {
  std::map<std::string, std::string> l = {{"gpuaas.io/cluster", "alpha"}, {"tier", "gold"}};
  EXPECT_TRUE(Sel("", l));
  EXPECT_TRUE(Sel("gpuaas.io/cluster=alpha", l));
  EXPECT_TRUE(Sel("gpuaas.io/cluster==alpha,tier=gold", l));
  EXPECT_FALSE(Sel("gpuaas.io/cluster=beta", l));
  EXPECT_TRUE(Sel("tier!=silver", l));
  EXPECT_TRUE(Sel("missing!=x", l));
  EXPECT_FALSE(Sel("tier!=gold", l));
  EXPECT_TRUE(Sel("tier in (gold, silver)", l));
  EXPECT_FALSE(Sel("tier notin (gold)", l));
  EXPECT_TRUE(Sel("missing notin (gold)", l));
  EXPECT_TRUE(Sel("tier", l));
  EXPECT_FALSE(Sel("!tier", l));
  EXPECT_TRUE(Sel("!missing,tier in (gold)", l));
}

TEST(LabelSelector, RejectsMalformed) {
  for (std::string_view bad : {"tier in gold", "tier in (gold", "a=b,,c=d", "tier inn (x)",
                               "bad key=x", "k=bad value", "a)"}) {
    absl::StatusOr<LabelSelector> s = LabelSelector::Parse(bad);
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_NE(s.status().message().find("labelSelector"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gpuaas::model
