#include "cli/backup.h"

#include "gtest/gtest.h"

namespace gpuaas::cli {
namespace {

store::Snapshot Sample() {
  store::Snapshot s;
  s.revision = 42;
  s.records = {{{"GpuPool", "demo", "p"}, "uid-1", 40, R"({"spec":{"note":"line\nbreak \"quoted\""}})"},
               {{"Project", "", "demo"}, "uid-2", 3, "{}"}};
  s.rollups = {{"GPU-1|power", 60, 123, 101.5, 180}};
  return s;
}

TEST(BackupFile, RoundTripsExactly) {
  const std::string text = EncodeBackup(Sample(), "2026-12-04T10:00:00Z");
  absl::StatusOr<store::Snapshot> back = DecodeBackup(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->revision, 42);
  ASSERT_EQ(back->records.size(), 2u);
  EXPECT_EQ(back->records[0].data, Sample().records[0].data);
  EXPECT_EQ(back->records[0].resource_version, 40);
  EXPECT_EQ(back->records[1].key.ns, "");
  ASSERT_EQ(back->rollups.size(), 1u);
  EXPECT_EQ(back->rollups[0].mean, 101.5);
}

// A file that is not a whole backup is refused, saying which line and why.
TEST(BackupFile, ACutOrForeignFileIsRefusedWithTheLine) {
  const std::string text = EncodeBackup(Sample(), "2026-12-04T10:00:00Z");
  const std::string without_end = text.substr(0, text.rfind("{\"end\""));
  struct Case {
    std::string text, says;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty"},
           {without_end, "cut short"},
           {text.substr(0, text.size() / 2), "line"},
           {"{\"hello\":1}\n", "not a gpuaas backup"},
           {text + "{\"kind\":\"X\"}\n", "after the end"},
           {R"({"gpuaasBackup":1,"revision":5,"taken":""})"
            "\n"
            R"({"kind":"K","namespace":"","name":"n","uid":"u","resourceVersion":9,"data":"{}"})"
            "\n",
            "not within the backup's revision 5"},
           {R"({"gpuaasBackup":1,"revision":5,"taken":""})"
            "\n"
            R"({"end":true,"objects":3,"rollups":0})"
            "\n",
            "says 3 objects"},
       }) {
    absl::StatusOr<store::Snapshot> got = DecodeBackup(c.text);
    ASSERT_FALSE(got.ok()) << c.says;
    EXPECT_TRUE(absl::IsInvalidArgument(got.status()));
    EXPECT_NE(std::string(got.status().message()).find(c.says), std::string::npos) << got.status();
  }
}

}  // namespace
}  // namespace gpuaas::cli
