#include "telemetry/prom_text.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/metrics_text.h"
#include "gtest/gtest.h"
#include "telemetry/fields.h"

namespace gpuaas::telemetry {
namespace {

struct Collected {
  std::string name;
  std::string series;
  std::vector<std::pair<std::string, std::string>> labels;
  double value;
  std::optional<int64_t> ts;
  MetricType type;
  int64_t line;
};

class Collect final : public PromSink {
 public:
  absl::Status OnSample(const PromSample& s) override {
    Collected c{std::string(s.name), std::string(s.series), {}, s.value, s.timestamp_ms, s.type, s.line};
    for (const PromLabel& l : s.labels) c.labels.emplace_back(std::string(l.name), std::string(l.value));
    got.push_back(std::move(c));
    return absl::OkStatus();
  }
  void OnHelp(std::string_view name, std::string_view help) override { helps[std::string(name)] = std::string(help); }
  std::vector<Collected> got;
  std::map<std::string, std::string> helps;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kFixtures = "test/testdata/fixtures/";

absl::Status ParseError(std::string_view text) {
  Collect c;
  return ParsePromText(text, c);
}

TEST(PromText, ParsesNvidiasMigSampleFromTheDocs) {
  const std::string path = kFixtures + "nvidia-cloud-native-docs_gpu-telemetry_dcgm-exporter-rst_mig-a100-metrics.prom";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  Collect c;
  ASSERT_TRUE(ParsePromText(ReadFile(path), c).ok());
  // 17 GPU rows, an empty line, 4 rows of GPU instance 13.
  ASSERT_EQ(c.got.size(), 21u);
  EXPECT_EQ(c.got[0].name, "DCGM_FI_DEV_SM_CLOCK");
  EXPECT_EQ(c.got[0].value, 1215);
  EXPECT_EQ(c.got[4].name, "DCGM_FI_DEV_POWER_USAGE");
  EXPECT_DOUBLE_EQ(c.got[4].value, 409.692);
  EXPECT_EQ(c.got[5].value, 319159391);  // energy, mJ
  const Collected& mig = c.got[18];
  EXPECT_EQ(mig.name, "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
  EXPECT_EQ(mig.line, 20);
  ASSERT_EQ(mig.labels.size(), 6u);
  EXPECT_EQ(mig.labels[1], (std::pair<std::string, std::string>{"UUID", "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"}));
  EXPECT_EQ(mig.labels[3], (std::pair<std::string, std::string>{"GPU_I_PROFILE", "1g.5gb"}));
  EXPECT_EQ(mig.labels[4], (std::pair<std::string, std::string>{"GPU_I_ID", "13"}));
  EXPECT_DOUBLE_EQ(mig.value, 0.995687);
}

TEST(PromText, DcgmExporterCounterNamesAreTheOnesGpuaasMaps) {
  // Every field gpuaas maps must exist in dcgm-exporter's counter lists (default or DCP), so that
  // an exporter configured from them feeds gpuaas.
  std::string lists;
  for (const char* f : {"dcgm-exporter_etc_default-counters.csv", "dcgm-exporter_etc_dcp-metrics-included.csv"}) {
    ASSERT_TRUE(std::filesystem::exists(kFixtures + f)) << kFixtures + f;
    lists += ReadFile(kFixtures + f);
  }
  for (const FieldInfo& f : AllFields()) {
    // In dcgm_fields.h but in neither list (reference §1.2): recovery action 1523, FB total 250,
    // remap pending 396.
    if (f.field == Field::kRecoveryAction || f.field == Field::kFbTotalMib || f.field == Field::kRemapPending) continue;
    EXPECT_NE(lists.find(std::string(f.dcgm) + ","), std::string::npos) << f.dcgm;
  }
}

TEST(PromText, HelpTypeEscapesAndTimestamps) {
  Collect c;
  const std::string text =
      "# HELP m_total A help\\nwith a line \\\\ break\n"
      "# TYPE m_total counter\n"
      "m_total{a=\"x\\\"y\\\\z\\nw\",b=\"\",} 3 1700000000123\n"
      "m_total 4e3\n"
      "# just a comment\n"
      "\n"
      "g{x=\"1\"} +Inf\n"
      "g{x=\"2\"} -Inf -5\n"
      "g{x=\"3\"} NaN\n"
      "h_bucket{le=\"0.5\"} 1\n";
  ASSERT_TRUE(ParsePromText(text, c).ok()) << ParsePromText(text, c);
  ASSERT_EQ(c.got.size(), 6u);
  EXPECT_EQ(c.helps["m_total"], "A help\nwith a line \\ break");
  EXPECT_EQ(c.got[0].type, MetricType::kCounter);
  EXPECT_EQ(c.got[0].labels[0].second, "x\"y\\z\nw");
  EXPECT_EQ(c.got[0].labels[1].second, "");
  EXPECT_EQ(c.got[0].ts, 1700000000123);
  EXPECT_EQ(c.got[0].series, "m_total{a=\"x\\\"y\\\\z\\nw\",b=\"\",}");
  EXPECT_EQ(c.got[1].value, 4000);
  EXPECT_EQ(c.got[2].value, INFINITY);
  EXPECT_EQ(c.got[3].value, -INFINITY);
  EXPECT_EQ(c.got[3].ts, -5);
  EXPECT_TRUE(std::isnan(c.got[4].value));
  EXPECT_EQ(c.got[2].type, MetricType::kUntyped);
}

TEST(PromText, HistogramSuffixesBelongToTheirFamily) {
  Collect c;
  ASSERT_TRUE(ParsePromText("# TYPE lat histogram\nlat_bucket{le=\"1\"} 2\nlat_bucket{le=\"+Inf\"} 3\n"
                            "lat_sum 4.5\nlat_count 3\n",
                            c)
                  .ok());
  ASSERT_EQ(c.got.size(), 4u);
  for (const Collected& s : c.got) EXPECT_EQ(s.type, MetricType::kHistogram) << s.name;
}

TEST(PromText, ChunksMayCutLinesAnywhere) {
  const std::string text = "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"2\"} 2 17\nb 3\n";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Collect c;
    PromTextParser p(c);
    ASSERT_TRUE(p.Feed(text.substr(0, cut)).ok());
    ASSERT_TRUE(p.Feed(text.substr(cut)).ok());
    ASSERT_TRUE(p.Finish().ok());
    ASSERT_EQ(c.got.size(), 3u) << cut;
    EXPECT_EQ(c.got[1].series, "a{x=\"2\"}");
    EXPECT_EQ(c.got[1].ts, 17);
    EXPECT_EQ(c.got[2].line, 4);
  }
}

TEST(PromText, MalformedInputNamesTheLine) {
  struct Case {
    std::string text;
    std::string want;  // substring of the message
  };
  const std::vector<Case> cases = {
      {"a 1\nb{x=\"1\" 2\n", "line 2: expected ',' or '}' after label x"},
      {"a 1\n9b 2\n", "line 2: invalid character '9' at the start of a metric name"},
      {"a{x=\"\\t\"} 1\n", "line 1: label x: invalid escape \\t"},
      {"a{x=\"1\",x=\"2\"} 1\n", "line 1: duplicate label x"},
      {"a{x=1} 1\n", "line 1: label x: value must start with '\"'"},
      {"a{x=\"1} 1\n", "line 1: label x: value not closed"},
      {"a 1 2 3\n", "line 1: unexpected text after the timestamp"},
      {"a one\n", "line 1: invalid value \"one\""},
      {"a 1 1.5\n", "line 1: invalid timestamp \"1.5\""},
      {"a\n", "line 1: sample a has no value"},
      {"a 1", "line 1: the last line does not end with a line feed"},
      {"a 1\r\n", "line 1: carriage return"},
      {"# TYPE a gauge\n# TYPE a counter\na 1\n", "line 2: second TYPE line for a"},
      {"# HELP a x\n# HELP a y\n", "line 2: second HELP line for a"},
      {"a 1\n# TYPE a gauge\n", "line 2: TYPE line for a after its samples"},
      {"# TYPE a gouge\n", "line 1: unknown metric type \"gouge\" for a"},
      {"# TYPE a\n", "line 1: TYPE line for a has no type"},
      {"# HELP a bad \\q\n", "line 1: invalid escape \\q in HELP text"},
      {"{\"a.b\"} 1\n", "line 1: quoted (UTF-8) metric names are not supported"},
      {"a 1e999\n", "line 1: invalid value"},
      {"a -NaN\n", "line 1: invalid value"},
      {"a{} 1\nb{,} 2\n", "line 2: invalid character ','"},
      {"a{x=\"1\"}1\n", "line 1: invalid character '1' after a{x=\"1\"}"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseError(c.text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(std::string(s.message()).find(c.want), std::string::npos) << c.text << " -> " << s.message();
  }
}

TEST(PromText, SplitGroupsAreAcceptedAsPrometheusDoes) {
  Collect c;
  EXPECT_TRUE(ParsePromText("a 1\nb 2\na{x=\"y\"} 3\n", c).ok());
  EXPECT_EQ(c.got.size(), 3u);
}

TEST(PromText, SinkErrorsStopTheParseWithTheLine) {
  class Refuse final : public PromSink {
   public:
    absl::Status OnSample(const PromSample& s) override {
      return s.name == "bad" ? absl::InvalidArgumentError("no thanks") : absl::OkStatus();
    }
  } r;
  absl::Status s = ParsePromText("good 1\nbad 2\n", r);
  EXPECT_EQ(s.message(), "line 2: no thanks");
}

TEST(PromText, EscapeLabelValueRoundTrips) {
  const std::string v = "a\"b\\c\nd";
  Collect c;
  ASSERT_TRUE(ParsePromText("m{l=\"" + gpuaas::EscapeLabelValue(v) + "\"} 1\n", c).ok());
  EXPECT_EQ(c.got[0].labels[0].second, v);
}

}  // namespace
}  // namespace gpuaas::telemetry
