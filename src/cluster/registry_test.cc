#include "cluster/registry.h"

#include <vector>

#include "gtest/gtest.h"

namespace gpuaas::cluster {
namespace {

class NamedDriver final : public ClusterDriver {
 public:
  explicit NamedDriver(std::string name) : name_(std::move(name)) {}
  std::string_view ClusterName() const override { return name_; }
  absl::StatusOr<ObservedCluster> Observe() override { return ObservedCluster{name_, "", "", "fake", {}}; }
  absl::Status ApplyMigLayout(const std::string&, const std::string&, bool, const std::vector<ObservedMigInstance>&) override {
    return absl::OkStatus();
  }
  MigState NodeMigState(const std::string&) override { return {}; }

 private:
  std::string name_;
};

TEST(Registry, FixedClustersStayRegisteredOnesComeAndGoListenersHearEachInOrder) {
  NamedDriver alpha("alpha");
  Registry r({{"alpha", &alpha}});
  std::vector<std::string> heard;
  Registry::Subscription sub =
      r.Subscribe([&](const std::string& name, ClusterDriver* added) { heard.push_back((added ? "+" : "-") + name); });
  EXPECT_EQ(heard, std::vector<std::string>{"+alpha"}) << "a subscriber hears of the clusters already there";

  auto lab = std::make_shared<NamedDriver>("lab");
  ASSERT_TRUE(r.Add(lab, Source::kRegistered).ok());
  EXPECT_EQ(r.Add(std::make_shared<NamedDriver>("lab"), Source::kRegistered).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Add(std::make_shared<NamedDriver>("alpha"), Source::kRegistered).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.size(), 2u);
  EXPECT_EQ(r.SourceOf("alpha"), Source::kFixed);
  EXPECT_EQ(r.SourceOf("lab"), Source::kRegistered);
  EXPECT_EQ(r.SourceOf("zeta"), std::nullopt);

  // A reconcile holding the driver keeps it alive after it is removed.
  std::shared_ptr<ClusterDriver> held = r.Get("lab");
  std::weak_ptr<NamedDriver> watch = lab;
  lab.reset();
  std::shared_ptr<ClusterDriver> removed;
  ASSERT_TRUE(r.Remove("lab", &removed).ok());
  EXPECT_EQ(removed, held);
  EXPECT_EQ(r.Get("lab"), nullptr);
  removed.reset();
  EXPECT_FALSE(watch.expired());
  held.reset();
  EXPECT_TRUE(watch.expired());

  EXPECT_EQ(r.Remove("alpha").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.Get("alpha"), nullptr);
  EXPECT_TRUE(r.Remove("zeta").ok()) << "removing what is not there changes nothing";
  EXPECT_EQ(heard, (std::vector<std::string>{"+alpha", "+lab", "-lab"}));
  EXPECT_EQ(r.Names(), std::vector<std::string>{"alpha"});

  // A subscription that ends hears nothing more; another still does.
  std::vector<std::string> other;
  {
    Registry::Subscription second =
        r.Subscribe([&](const std::string& name, ClusterDriver* added) { other.push_back((added ? "+" : "-") + name); });
    sub.Reset();
    ASSERT_TRUE(r.Add(std::make_shared<NamedDriver>("lab2"), Source::kRegistered).ok());
  }
  ASSERT_TRUE(r.Remove("lab2").ok());
  EXPECT_EQ(heard, (std::vector<std::string>{"+alpha", "+lab", "-lab"}));
  EXPECT_EQ(other, (std::vector<std::string>{"+alpha", "+lab2"}));
}

}  // namespace
}  // namespace gpuaas::cluster
