#include "catalog/room.h"

#include <algorithm>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace gpuaas::catalog {
namespace {

const GpuModel& Model(std::string_view name) {
  const GpuModel* m = FindModel(name);
  EXPECT_NE(m, nullptr) << name;
  return *m;
}

Layout Parsed(const GpuModel& m, std::string_view text) {
  absl::StatusOr<Layout> l = ParseLayout(m, text);
  EXPECT_TRUE(l.ok()) << text << ": " << l.status();
  return l.ok() ? *l : Layout{};
}

// Every profile's FitsMore, the profiles that fit none left out.
std::map<std::string, int> Fits(const GpuModel& m, const Layout& used) {
  std::map<std::string, int> out;
  for (const MigProfile& p : m.profiles) {
    if (int n = FitsMore(m, used, p); n > 0) out[std::string(p.name)] = n;
  }
  return out;
}

TEST(Room, AnEmptyH100IsAllOpenAndFitsEachProfileUpToItsLimit) {
  const GpuModel& m = Model("H100-SXM5-80GB");
  EXPECT_EQ(OpenSlots(m, {}), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(Fits(m, {}), (std::map<std::string, int>{{"1g.10gb", 7},
                                                      {"1g.10gb+me", 1},
                                                      {"1g.20gb", 4},
                                                      {"2g.20gb", 3},
                                                      {"3g.40gb", 2},
                                                      {"4g.40gb", 1},
                                                      {"7g.80gb", 1}}));
}

TEST(Room, AFullLayoutHasNothingOpenAndFitsNothing) {
  const GpuModel& m = Model("H100-SXM5-80GB");
  for (std::string_view full : {"7g.80gb@0", "3g.40gb@0 3g.40gb@4"}) {
    SCOPED_TRACE(full);
    const Layout used = Parsed(m, full);
    EXPECT_TRUE(OpenSlots(m, used).empty());
    EXPECT_TRUE(Fits(m, used).empty());
  }
}

TEST(Room, FreeSlicesNoProfileCanUseAreStranded) {
  const GpuModel& m = Model("H100-SXM5-80GB");
  // Seven 1g: slice 7 is free, but no profile starts at 7 and the compute slices are spent.
  const Layout seven =
      Parsed(m, "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6");
  EXPECT_TRUE(OpenSlots(m, seven).empty());
  EXPECT_TRUE(Fits(m, seven).empty());
  // 4g + 2g + 1g use all seven compute slices: slice 7 is stranded.
  const Layout spent = Parsed(m, "4g.40gb@0 2g.20gb@4 1g.10gb@6");
  EXPECT_TRUE(OpenSlots(m, spent).empty());
  EXPECT_TRUE(Fits(m, spent).empty());
  // 4g + 2g leave one compute slice: 1g.20gb@6 covers slices 6 and 7, 1g.10gb@6 slice 6 only,
  // and each fits once.
  const Layout one_left = Parsed(m, "4g.40gb@0 2g.20gb@4");
  EXPECT_EQ(OpenSlots(m, one_left), (std::vector<int>{6, 7}));
  EXPECT_EQ(Fits(m, one_left),
            (std::map<std::string, int>{{"1g.10gb", 1}, {"1g.10gb+me", 1}, {"1g.20gb", 1}}));
  // A 3g at 4 leaves slices 0-3: only what starts there fits, and 2g.20gb stops at its start 2.
  const Layout half = Parsed(m, "3g.40gb@4");
  EXPECT_EQ(OpenSlots(m, half), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Fits(m, half), (std::map<std::string, int>{{"1g.10gb", 4},
                                                       {"1g.10gb+me", 1},
                                                       {"1g.20gb", 2},
                                                       {"2g.20gb", 2},
                                                       {"3g.40gb", 1},
                                                       {"4g.40gb", 1}}));
}

TEST(Room, AGpuHoldsOneMediaExtensionsInstance) {
  const GpuModel& h100 = Model("H100-SXM5-80GB");
  const Layout me = Parsed(h100, "1g.10gb+me@0");
  EXPECT_EQ(FitsMore(h100, me, *FindProfile(h100, "1g.10gb+me")), 0);
  EXPECT_EQ(FitsMore(h100, me, *FindProfile(h100, "1g.10gb")), 6);
  EXPECT_EQ(OpenSlots(h100, me), (std::vector<int>{1, 2, 3, 4, 5, 6, 7}));
  // On an A30 the rule spans profiles: a 2g+me keeps every other +me profile out.
  const GpuModel& a30 = Model("A30-24GB");
  const Layout a30_me = Parsed(a30, "2g.12gb+me@0");
  EXPECT_EQ(FitsMore(a30, a30_me, *FindProfile(a30, "1g.6gb+me")), 0);
  EXPECT_EQ(FitsMore(a30, a30_me, *FindProfile(a30, "1g.6gb")), 2);
  EXPECT_EQ(FitsMore(a30, a30_me, *FindProfile(a30, "2g.12gb")), 1);
}

TEST(Room, ALayoutTheCatalogueRefusesHasNoRoom) {
  const GpuModel& m = Model("H100-SXM5-80GB");
  const MigProfile& one = *FindProfile(m, "1g.10gb");
  const Layout overlapping = {{FindProfile(m, "3g.40gb"), 0}, {&one, 2}};
  EXPECT_TRUE(OpenSlots(m, overlapping).empty());
  EXPECT_EQ(FitsMore(m, overlapping, one), 0);
  const Layout unknown = {{nullptr, 0}};
  EXPECT_TRUE(OpenSlots(m, unknown).empty());
  EXPECT_EQ(FitsMore(m, unknown, one), 0);
  // A profile of another model fits nowhere.
  const GpuModel& h200 = Model("H200-SXM-141GB");
  EXPECT_EQ(FitsMore(m, {}, *FindProfile(h200, "1g.18gb")), 0);
  EXPECT_TRUE(OpenSlots(Model("L40S-48GB"), {}).empty());
}

// Against the definitions, checked with ValidateLayout alone: a free slice is open when adding
// one instance that covers it keeps the layout legal; FitsMore is the largest set of one
// profile's placements the layout takes. Every legal layout of an A30 and an H100.
TEST(Room, AgreesWithTheLayoutRulesOnEveryLayout) {
  for (std::string_view name : {"A30-24GB", "H100-SXM5-80GB"}) {
    const GpuModel& m = Model(name);
    std::vector<Layout> layouts = AllLayouts(m);
    layouts.emplace_back();
    for (const Layout& used : layouts) {
      SCOPED_TRACE(std::string(name) + ": " + FormatLayout(used));
      std::vector<int> want_open;
      for (int s = 0; s < m.memory_slices; ++s) {
        bool open = false;
        for (const MigProfile& p : m.profiles) {
          for (int start : p.starts) {
            if (open || s < start || s >= start + p.memory_slices) continue;
            Layout more = used;
            more.push_back({&p, start});
            open = ValidateLayout(m, more).ok();
          }
        }
        if (open) want_open.push_back(s);
      }
      EXPECT_EQ(OpenSlots(m, used), want_open);
      if (m.memory_slices > 4) continue;  // every subset of placements: the A30's 16 at most
      for (const MigProfile& p : m.profiles) {
        int most = 0;
        for (unsigned subset = 0; subset < (1u << p.starts.size()); ++subset) {
          Layout more = used;
          for (size_t k = 0; k < p.starts.size(); ++k) {
            if (subset & (1u << k)) more.push_back({&p, p.starts[k]});
          }
          if (ValidateLayout(m, more).ok()) {
            most = std::max(most, static_cast<int>(more.size() - used.size()));
          }
        }
        EXPECT_EQ(FitsMore(m, used, p), most) << p.name;
      }
    }
  }
}

}  // namespace
}  // namespace gpuaas::catalog
