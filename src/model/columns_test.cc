#include "model/columns.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuaas::model {
namespace {

const Time kNow = *ParseTime("2026-12-03T12:00:00Z");

TEST(Columns, EachKindHasItsColumnsAndRowsMatchThem) {
  for (const char* plural : {"clusters", "nodecapacities", "gpucapacities", "gpupools", "projects", "workloads",
                             "profiles", "ratecards", "usagerecords", "miglayouts", "specandcounts", "invoices", "loans"}) {
    const std::vector<std::string> cols = Columns(plural);
    ASSERT_FALSE(cols.empty()) << plural;
    EXPECT_EQ(cols[0], "NAME") << plural;
    absl::StatusOr<std::vector<std::string>> row = Row(plural, nlohmann::json::parse(R"({"metadata":{"name":"x"}})"), kNow);
    ASSERT_TRUE(row.ok()) << plural;
    EXPECT_EQ(row->size(), cols.size()) << plural << ": a sparse object still fills every column";
    EXPECT_EQ((*row)[0], "x") << plural;
  }
  EXPECT_EQ(Columns("invoices"), (std::vector<std::string>{"NAME", "AGE"}));
  EXPECT_TRUE(absl::IsInvalidArgument(Row("gpupools", nlohmann::json::parse("[1]"), kNow).status()));
}

TEST(Columns, CellsSayWhatTheObjectHolds) {
  auto row = [](const char* plural, const char* json) { return *Row(plural, nlohmann::json::parse(json), kNow); };
  EXPECT_EQ(row("projects", R"({"metadata":{"name":"vision","creationTimestamp":"2026-12-01T12:00:00Z"},
                                "spec":{"displayName":"Vision","quota":{"fullGpus":{"H200-SXM-141GB":4},
                                        "migComputeSlices":{"A100-80GB":14}}}})"),
            (std::vector<std::string>{"vision", "Vision", "4 full H200-SXM-141GB, 14 MIG slices A100-80GB", "2d"}));
  EXPECT_EQ(row("gpucapacities", R"({"metadata":{"name":"gpu-1"},"spec":{"node":"lab.n1","index":3,"model":"A100-80GB"},
                  "status":{"migMode":"Enabled","health":"Healthy","migInstances":[
                    {"profile":"3g.40gb","placement":{"start":4}},{"profile":"1g.10gb","placement":{"start":0}}]}})"),
            (std::vector<std::string>{"gpu-1", "lab.n1", "3", "A100-80GB", "Enabled", "3g.40gb@4 1g.10gb@0", "Healthy"}));
  EXPECT_EQ(row("gpupools", R"({"metadata":{"name":"train","namespace":"vision","creationTimestamp":"2026-12-03T11:59:00Z"},
                  "spec":{"items":[{"model":"H200-SXM-141GB","profile":"full","count":2}]},
                  "status":{"conditions":[{"type":"Approved","status":"True"}],"allocation":[{},{}]}})"),
            (std::vector<std::string>{"train", "vision", "2xH200-SXM-141GB/full", "True", "Unknown", "Unknown", "2", "60s"}));
  EXPECT_EQ(row("workloads", R"({"metadata":{"name":"w","namespace":"vision"},"spec":{"pool":"train",
                  "resources":{"nvidia.com/gpu":1},"priorityClassName":"high"},"status":{"phase":"Running"}})")[3],
            "nvidia.com/gpu=1");
  EXPECT_EQ(row("loans", R"({"metadata":{"name":"nlp.sweep-18"},"spec":{"borrower":"nlp","workload":"sweep",
                  "lender":"vision","pool":"train","model":"H200-SXM-141GB","profile":"full",
                  "devices":[{"gpuUUID":"GPU-1"}],"start":"2026-12-03T11:00:00Z","end":"2026-12-03T11:00:42Z",
                  "endReason":"Reclaimed"}})"),
            (std::vector<std::string>{"nlp.sweep-18", "nlp", "sweep", "vision", "train", "H200-SXM-141GB/full", "GPU-1",
                                      "2026-12-03T11:00:00Z", "2026-12-03T11:00:42Z", "Reclaimed", "-"}));
  EXPECT_EQ(row("loans", R"({"metadata":{"name":"nlp.sweep-18"},"spec":{"borrower":"nlp"},
                  "status":{"removedPods":["nlp/a","nlp/b"],"stuckPods":["nlp/a","nlp/b"]}})")[10],
            "nlp/a,nlp/b");
  EXPECT_EQ(row("ratecards", R"({"metadata":{"name":"list"},"spec":{"currency":"USD","prices":[
                  {"model":"H200-SXM-141GB","profile":"full","pricePerHourMicros":4500000}]}})")[4],
            "H200-SXM-141GB/full=4.500000");
}

TEST(Columns, Age) {
  EXPECT_EQ(Age("2026-12-03T11:59:20Z", kNow), "40s");
  EXPECT_EQ(Age("2026-12-03T11:48:00Z", kNow), "12m");
  EXPECT_EQ(Age("2026-12-03T09:00:00Z", kNow), "3h");
  EXPECT_EQ(Age("2026-11-28T12:00:00Z", kNow), "5d");
  EXPECT_EQ(Age("2026-12-04T12:00:00Z", kNow), "0s") << "a clock ahead is not a negative age";
  EXPECT_EQ(Age("yesterday", kNow), "<unknown>");
}

}  // namespace
}  // namespace gpuaas::model
