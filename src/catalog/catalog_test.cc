#include "catalog/catalog.h"

#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::catalog {
namespace {

const GpuModel& Model(std::string_view name) {
  const GpuModel* m = FindModel(name);
  EXPECT_NE(m, nullptr) << name;
  return *m;
}

absl::Status Check(std::string_view model, std::string_view layout) {
  const GpuModel& m = Model(model);
  // Parse without auto-placement: every token names its start, so ParseLayout only validates.
  absl::StatusOr<Layout> l = ParseLayout(m, layout);
  return l.status();
}

TEST(Catalog, CompiledTableMatchesJson) {
  std::ifstream in("test/testdata/gpu-catalog/mig-profiles.json");
  ASSERT_TRUE(in.good()) << "test/testdata/gpu-catalog/mig-profiles.json (the tests run from the repository's root)";
  nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_TRUE(doc.is_array());
  size_t mig_models = 0;
  for (const auto& jm : doc) {
    std::string raw = jm.at("gpu_model");
    std::string name = raw.substr(0, raw.find(' '));
    SCOPED_TRACE(name);
    const GpuModel* m = FindModel(name);
    ASSERT_NE(m, nullptr);
    ++mig_models;
    EXPECT_TRUE(m->mig_capable);
    EXPECT_EQ(m->memory_gb, jm.at("memory_gb").get<int>());
    EXPECT_EQ(m->compute_slices, jm.at("compute_slices").get<int>());
    EXPECT_EQ(m->memory_slices, jm.at("memory_slices").get<int>());
    ASSERT_EQ(m->profiles.size(), jm.at("profiles").size());
    for (size_t i = 0; i < m->profiles.size(); ++i) {
      const auto& jp = jm["profiles"][i];
      const MigProfile& p = m->profiles[i];
      SCOPED_TRACE(p.name);
      EXPECT_EQ(p.name, jp.at("name").get<std::string>());
      EXPECT_EQ(p.id, jp.at("id").get<int>());
      EXPECT_EQ(p.compute_slices, jp.at("compute_slices").get<int>());
      EXPECT_EQ(p.memory_slices, jp.at("memory_slices").get<int>());
      EXPECT_EQ(p.memory_gb, jp.at("memory_gb").get<int>());
      EXPECT_EQ(p.max_count, jp.at("max_count").get<int>());
      EXPECT_EQ(p.memory_mib, jp.value("memory_mib", nlohmann::json()).is_null()
                                  ? 0 : jp["memory_mib"].get<int>());
      ASSERT_EQ(p.starts.size(), jp.at("placements").size());
      for (size_t k = 0; k < p.starts.size(); ++k) {
        EXPECT_EQ(p.starts[k], jp["placements"][k].at("start").get<int>());
        EXPECT_EQ(p.memory_slices, jp["placements"][k].at("size").get<int>());
      }
    }
  }
  size_t compiled_mig = 0;
  for (const GpuModel& m : AllModels()) compiled_mig += m.mig_capable ? 1 : 0;
  EXPECT_EQ(compiled_mig, mig_models) << "compiled table has models the JSON lacks";
}

TEST(Catalog, ADevicesShareOfAGpuIsItsComputeSlices) {
  EXPECT_DOUBLE_EQ(GpuShare("H200-SXM-141GB", "full"), 1);
  EXPECT_DOUBLE_EQ(GpuShare("H200-SXM-141GB", "3g.71gb"), 3.0 / 7);
  EXPECT_DOUBLE_EQ(GpuShare("H200-SXM-141GB", "1g.18gb"), 1.0 / 7);
  EXPECT_DOUBLE_EQ(GpuShare("no-such-gpu", "1g.18gb"), 1);
}

TEST(Catalog, FullGpuOnlyModels) {
  for (std::string_view name : {"L40S-48GB", "A10-24GB", "T4-16GB"}) {
    const GpuModel& m = Model(name);
    EXPECT_FALSE(m.mig_capable);
    EXPECT_TRUE(m.profiles.empty());
    EXPECT_TRUE(AllLayouts(m).empty());
  }
  EXPECT_FALSE(ParseLayout(Model("T4-16GB"), "1g.5gb@0").ok());
}

TEST(Catalog, ProductLabelsMapToModels) {
  struct Case { std::string_view product, model; };
  for (const Case& c : std::initializer_list<Case>{
           {"NVIDIA-H200", "H200-SXM-141GB"},
           {"NVIDIA-H200-MIG-7g.141gb", "H200-SXM-141GB"},
           {"NVIDIA H200", "H200-SXM-141GB"},
           {"NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"},
           {"NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "H100-SXM5-80GB"},
           {"NVIDIA-A100-SXM4-80GB", "A100-80GB"},
           {"NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB"},
           {"A100-SXM4-40GB-MIG-1g.5gb-SHARED", "A100-SXM4-40GB"},
           {"NVIDIA-H100-NVL", "H100-NVL-94GB"},
           {"NVIDIA-B200", "B200-180GB"},
           {"NVIDIA-A30", "A30-24GB"},
           {"NVIDIA-L40S", "L40S-48GB"},
           {"Tesla-T4", "T4-16GB"},
           {"NVIDIA-A10", "A10-24GB"}}) {
    absl::StatusOr<const GpuModel*> m = ModelFromProduct(c.product);
    ASSERT_TRUE(m.ok()) << c.product << ": " << m.status();
    EXPECT_EQ((*m)->name, c.model) << c.product;
  }
  absl::StatusOr<const GpuModel*> none = ModelFromProduct("NVIDIA-GeForce-RTX-3080");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("RTX-3080"), std::string::npos);
}

TEST(Catalog, A100LegalAndIllegalLayouts) {
  EXPECT_TRUE(Check("A100-SXM4-40GB", "7g.40gb@0").ok());
  EXPECT_TRUE(Check("A100-SXM4-40GB", "4g.20gb@0 3g.20gb@4").ok());
  EXPECT_TRUE(Check("A100-SXM4-40GB", "3g.20gb@0 3g.20gb@4").ok());
  EXPECT_TRUE(Check("A100-SXM4-40GB",
                    "1g.5gb@0 1g.5gb@1 1g.5gb@2 1g.5gb@3 1g.5gb@4 1g.5gb@5 1g.5gb@6").ok());
  EXPECT_TRUE(Check("A100-SXM4-40GB", "2g.10gb@0 2g.10gb@2 2g.10gb@4 1g.5gb@6").ok());
  EXPECT_TRUE(Check("A100-SXM4-40GB", "1g.10gb@0 1g.10gb@2 1g.10gb@4 1g.10gb@6").ok());
  // 3g takes four memory slices, so it can only start at 0 or 4.
  absl::Status bad_start = Check("A100-SXM4-40GB", "3g.20gb@2");
  EXPECT_EQ(bad_start.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_start.message().find("legal starts are 0,4"), std::string::npos) << bad_start;
  EXPECT_NE(Check("A100-SXM4-40GB", "7g.40gb@0 1g.5gb@3").message().find("overlaps"),
            std::string::npos);
  // The eighth memory slice has no 1g.5gb placement.
  EXPECT_FALSE(Check("A100-SXM4-40GB", "1g.5gb@7").ok());
  EXPECT_FALSE(Check("A100-SXM4-40GB", "4g.20gb@0 4g.20gb@4").ok());
  EXPECT_NE(Check("A100-SXM4-40GB", "1g.5gb+me@0 1g.5gb+me@1").message().find("at most 1"),
            std::string::npos);
  EXPECT_FALSE(Check("A100-SXM4-40GB", "3g.71gb@0").ok());  // an H200 profile
}

TEST(Catalog, H100LegalAndIllegalLayouts) {
  // The mixed layout of the GPU Operator docs' H100 node (fixture mig-mixed-nvidia-smi.txt).
  EXPECT_TRUE(Check("H100-SXM5-80GB", "3g.40gb@4 2g.20gb@0 1g.10gb@2 1g.10gb@3").ok());
  EXPECT_TRUE(Check("H100-SXM5-80GB", "1g.20gb@0 1g.20gb@2 1g.20gb@4 1g.20gb@6").ok());
  EXPECT_FALSE(Check("H100-SXM5-80GB", "1g.20gb@1").ok());
  EXPECT_FALSE(Check("H100-SXM5-80GB", "2g.20gb@6").ok());
  EXPECT_FALSE(Check("H100-SXM5-80GB", "3g.40gb@0 2g.20gb@2").ok());
  EXPECT_FALSE(Check("H100-SXM5-80GB", "1g.20gb@0 1g.20gb@2 1g.20gb@4 1g.20gb@6 1g.10gb@1").ok());
}

TEST(Catalog, H200LegalAndIllegalLayouts) {
  EXPECT_TRUE(Check("H200-SXM-141GB", "3g.71gb@0 3g.71gb@4").ok());
  EXPECT_TRUE(Check("H200-SXM-141GB", "4g.71gb@0 2g.35gb@4 1g.18gb@6").ok());
  EXPECT_TRUE(Check("H200-SXM-141GB", "2g.35gb@0 2g.35gb@2 2g.35gb@4 1g.35gb@6").ok());
  EXPECT_TRUE(Check("H200-SXM-141GB", "1g.18gb+me@0 1g.18gb@1 3g.71gb@4").ok());
  EXPECT_FALSE(Check("H200-SXM-141GB", "3g.71gb@0 3g.71gb@4 1g.18gb@6").ok());
  EXPECT_FALSE(Check("H200-SXM-141GB", "4g.71gb@4").ok());
  EXPECT_FALSE(Check("H200-SXM-141GB", "7g.141gb@0 7g.141gb@0").ok());
  EXPECT_FALSE(Check("H200-SXM-141GB", "1g.18gb+me@0 1g.18gb+me@1").ok());
}

TEST(Catalog, A30LegalAndIllegalLayouts) {
  EXPECT_TRUE(Check("A30-24GB", "4g.24gb@0").ok());
  EXPECT_TRUE(Check("A30-24GB", "2g.12gb@0 2g.12gb@2").ok());
  EXPECT_TRUE(Check("A30-24GB", "2g.12gb+me@0 1g.6gb@2 1g.6gb@3").ok());
  EXPECT_FALSE(Check("A30-24GB", "2g.12gb@1").ok());
  EXPECT_FALSE(Check("A30-24GB", "1g.6gb@4").ok());
  // A30 has one set of media engines: two +me instances of different profiles still clash.
  EXPECT_NE(Check("A30-24GB", "2g.12gb+me@0 1g.6gb+me@2").message().find("+me"),
            std::string::npos);
}

TEST(Catalog, ComputeSlicesMustFit) {
  // No real profile uses more compute than memory slices, so the compute rule is checked on a
  // made-up GPU with 2 compute and 4 memory slices.
  static constexpr int kStarts[] = {0, 1, 2, 3};
  static const MigProfile kProfiles[] = {{"1c", 1, 1, 1, 1, 4, kStarts, 0, 0}};
  GpuModel m{"TEST", "test", 4, 2, 4, true, kProfiles, {}};
  Layout ok = {{&kProfiles[0], 0}, {&kProfiles[0], 1}};
  EXPECT_TRUE(ValidateLayout(m, ok).ok());
  Layout over = {{&kProfiles[0], 0}, {&kProfiles[0], 1}, {&kProfiles[0], 2}};
  absl::Status s = ValidateLayout(m, over);
  EXPECT_NE(s.message().find("compute slices"), std::string::npos) << s;
}

TEST(Catalog, A30MaximalLayoutsCountedByHand) {
  // Each half of the A30 (slices 0-1 and 2-3) holds a 2g or two 1g; at most one of all instances
  // may be +me: 2x2 layouts without +me, 2 halves x 3 +me choices x 2 for the other half = 12,
  // plus 4g.24gb alone: 17.
  std::vector<Layout> maximal = MaximalLayouts(Model("A30-24GB"));
  EXPECT_EQ(maximal.size(), 17u);
}

TEST(Catalog, MaximalLayoutsAreLegalAndCannotGrow) {
  for (const GpuModel& m : AllModels()) {
    if (!m.mig_capable) continue;
    SCOPED_TRACE(m.name);
    std::vector<Layout> all = AllLayouts(m);
    std::vector<Layout> maximal = MaximalLayouts(m);
    ASSERT_FALSE(maximal.empty());
    std::set<std::string> seen;
    for (const Layout& l : all) {
      EXPECT_TRUE(ValidateLayout(m, l).ok()) << FormatLayout(l);
      EXPECT_TRUE(seen.insert(FormatLayout(l)).second) << "duplicate " << FormatLayout(l);
    }
    for (const Layout& l : maximal) {
      EXPECT_TRUE(seen.count(FormatLayout(l)));
      for (const MigProfile& p : m.profiles) {
        EXPECT_TRUE(FreeStarts(m, l, p).empty()) << FormatLayout(l) << " + " << p.name;
      }
    }
  }
  // Known maximal layouts of an H200 are present, a non-maximal one is not.
  std::set<std::string> h200;
  for (const Layout& l : MaximalLayouts(Model("H200-SXM-141GB"))) h200.insert(FormatLayout(l));
  EXPECT_TRUE(h200.count("7g.141gb@0"));
  EXPECT_TRUE(h200.count("3g.71gb@0 3g.71gb@4"));
  EXPECT_TRUE(h200.count("4g.71gb@0 3g.71gb@4"));
  EXPECT_TRUE(h200.count(
      "1g.18gb@0 1g.18gb@1 1g.18gb@2 1g.18gb@3 1g.18gb@4 1g.18gb@5 1g.18gb@6"));
  EXPECT_FALSE(h200.count("3g.71gb@0"));
}

TEST(Catalog, FreeStartsOnPartlyUsedGpu) {
  const GpuModel& m = Model("H200-SXM-141GB");
  absl::StatusOr<Layout> used = ParseLayout(m, "3g.71gb@0 1g.18gb@4");
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(FreeStarts(m, *used, *FindProfile(m, "3g.71gb")), std::vector<int>{});
  EXPECT_EQ(FreeStarts(m, *used, *FindProfile(m, "1g.18gb")), (std::vector<int>{5, 6}));
  EXPECT_EQ(FreeStarts(m, *used, *FindProfile(m, "1g.35gb")), (std::vector<int>{6}));
  EXPECT_EQ(FreeStarts(m, *used, *FindProfile(m, "2g.35gb")), std::vector<int>{});
}

TEST(Catalog, PlaceProfilesFindsALayoutOrExplains) {
  const GpuModel& m = Model("H200-SXM-141GB");
  std::vector<std::string> want = {"1g.18gb", "3g.71gb", "2g.35gb", "1g.18gb"};
  absl::StatusOr<Layout> l = PlaceProfiles(m, want);
  ASSERT_TRUE(l.ok()) << l.status();
  // Largest first: 3g@0, 2g@4 and 1g@6 leave no slot for the second 1g (slot 7 has no 1g
  // placement), so the search moves the 3g to slot 4 and packs the rest below it.
  EXPECT_EQ(FormatLayout(*l), "2g.35gb@0 1g.18gb@2 1g.18gb@3 3g.71gb@4");
  EXPECT_TRUE(ValidateLayout(m, *l).ok());
  EXPECT_EQ(l->size(), 4u);
  std::vector<std::string> too_much = {"4g.71gb", "4g.71gb"};
  EXPECT_EQ(PlaceProfiles(m, too_much).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Layout> mixed = ParseLayout(m, "3g.71gb@4 2g.35gb 1g.18gb");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(FormatLayout(*mixed), "2g.35gb@0 1g.18gb@2 3g.71gb@4");
}

TEST(Catalog, ResourceNames) {
  EXPECT_EQ(ResourceName("full"), "nvidia.com/gpu");
  EXPECT_EQ(ResourceName("3g.71gb"), "nvidia.com/mig-3g.71gb");
  EXPECT_EQ(ResourceName("1g.18gb+me"), "nvidia.com/mig-1g.18gb.me");
}

}  // namespace
}  // namespace gpuaas::catalog
