#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/ids.h"
#include "common/metrics_text.h"
#include "common/problem.h"
#include "common/strings.h"
#include "gtest/gtest.h"

namespace gpuaas {
namespace {

TEST(Strings, SplitAndParse) {
  EXPECT_EQ(SplitAny(" a, b ,,c ", ", "), (std::vector<std::string_view>{"a", "b", "c"}));
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(ParseInt("42"), 42);
  EXPECT_EQ(ParseInt("-7"), -7);
  EXPECT_FALSE(ParseInt("4x").has_value());
  EXPECT_FALSE(ParseInt("").has_value());
  EXPECT_FALSE(ParseInt("99999999999999999999").has_value());
  EXPECT_TRUE(EqualsIgnoreCase("NVIDIA-h200", "nvidia-H200"));
  EXPECT_EQ(Trim("  x y \n"), "x y");
}

TEST(Strings, ClosestWordNamesWhatWasMeant) {
  const std::vector<std::string> verbs = {"request", "list", "get", "approve", "reject", "release", "delete"};
  EXPECT_EQ(ClosestWord("aprove", verbs), "approve");
  EXPECT_EQ(ClosestWord("relase", verbs), "release");
  EXPECT_EQ(ClosestWord("APPROVE", verbs), "approve");
  EXPECT_EQ(ClosestWord("del", verbs), "delete") << "a prefix";
  EXPECT_EQ(ClosestWord("frobnicate", verbs), "");
  EXPECT_EQ(ClosestWord("audt", {"alerts", "audit", "agent"}), "audit");
  EXPECT_EQ(ClosestWord("x", {}), "");
}

TEST(Strings, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("gpu-0 H200"));
  EXPECT_TRUE(IsValidUtf8("\xea\xb0\x80\xec\x9e\x90"));          // Korean, 3 bytes each
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9"));                          // e acute
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x9a\x80"));                  // U+1F680
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));                  // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\x80"));                              // a continuation first
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));                          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));                      // overlong, 3 bytes
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));                      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));                  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("ab\xe2\x82"));                        // cut short
  EXPECT_FALSE(IsValidUtf8("\xe2\x28\xa1"));                      // a bad continuation
}

TEST(Strings, Base64UrlRoundTrips) {
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("ns\0name", 7)}) {
    EXPECT_EQ(Base64UrlDecode(Base64UrlEncode(s)), s);
  }
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
  EXPECT_FALSE(Base64UrlDecode("a+b").has_value());
  EXPECT_FALSE(Base64UrlDecode("a").has_value());
}

TEST(Clock, FormatAndParseRoundTrip) {
  Time t = std::chrono::system_clock::from_time_t(1764688445);  // 2025-12-02T15:14:05Z
  EXPECT_EQ(FormatTime(t), "2025-12-02T15:14:05Z");
  EXPECT_EQ(ParseTime("2025-12-02T15:14:05Z"), t);
  EXPECT_EQ(ParseTime("2025-12-02T15:14:05.123456Z"), t);
  EXPECT_FALSE(ParseTime("2025-12-02 15:14:05").has_value());
  EXPECT_FALSE(ParseTime("2025-13-02T15:14:05Z").has_value());
  EXPECT_FALSE(ParseTime("2025-12-02T15:14:05Zjunk").has_value());
  // Regression (found by fuzz/model_json_fuzz): year 2620 overflowed the nanosecond count.
  EXPECT_FALSE(ParseTime("2620-12-02T15:47:45Z").has_value());
  EXPECT_FALSE(ParseTime("1969-12-31T23:59:59Z").has_value());
  // Dates that do not exist are refused, not rolled over into the next month.
  for (const char* bad : {"2027-02-31T00:00:00Z", "2027-02-29T00:00:00Z", "2026-04-31T12:00:00Z", "2026-00-10T00:00:00Z",
                          "2026-12-32T00:00:00Z", "2026-12-02T24:00:00Z", "2026-12-02T15:60:00Z", "2026-12-02T15:14:05",
                          "2026-12-02T15:14:05+02:00", "2026-12-02t15:14:05z", ""}) {
    EXPECT_FALSE(ParseTime(bad).has_value()) << bad;
  }
  EXPECT_EQ(ParseTime("2028-02-29T00:00:00Z"), ParseTime("2028-02-28T00:00:00Z").value() + std::chrono::hours(24))
      << "a leap day is a day";
  EXPECT_EQ(FormatTime(*ParseTime("2026-12-31T23:59:59.999999999Z")), "2026-12-31T23:59:59Z");
}

TEST(Clock, FakeClockMovesOnlyWhenAdvanced) {
  FakeClock clock(std::chrono::system_clock::from_time_t(1000));
  Time a = clock.Now();
  EXPECT_EQ(clock.Now(), a);
  clock.Advance(std::chrono::seconds(5));
  EXPECT_EQ(clock.Now() - a, std::chrono::seconds(5));
}

TEST(Ids, UidsAreUniqueAndShaped) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string u = NewUid();
    ASSERT_EQ(u.size(), 36u);
    EXPECT_EQ(u[14], '4');
    EXPECT_TRUE(seen.insert(u).second);
  }
  EXPECT_EQ(StableUuid("cluster/node/0"), StableUuid("cluster/node/0"));
  EXPECT_NE(StableUuid("cluster/node/0"), StableUuid("cluster/node/1"));
}

TEST(MetricsText, WritesEachFamilyOnceAndEscapesLabelsAndHelp) {
  std::string out = "# earlier text stays\n";
  MetricsText w(out);
  w.Family("jobs_total", "counter", "Jobs run, by queue.\nSee \\docs \"here\".");
  w.Sample("jobs_total", {{"queue", "a\"b\\c\nd"}, {"code", "200"}}, 3);
  w.Family("jobs_total", "gauge", "a second call is a no-op");
  const std::vector<std::pair<std::string, std::string>> labels = {{"queue", "q"}, {"le", "+Inf"}};
  w.Sample("jobs_total", labels, 4, 1764000000000);
  w.Sample("up", {}, 1);
  EXPECT_EQ(out,
            "# earlier text stays\n"
            "# HELP jobs_total Jobs run, by queue.\\nSee \\\\docs \"here\".\n"
            "# TYPE jobs_total counter\n"
            "jobs_total{queue=\"a\\\"b\\\\c\\nd\",code=\"200\"} 3\n"
            "jobs_total{queue=\"q\",le=\"+Inf\"} 4 1764000000000\n"
            "up 1\n");
  // Families are remembered per writer: another writer on the same text starts afresh.
  std::string other;
  MetricsText again(other);
  again.Family("jobs_total", "counter", "x");
  EXPECT_EQ(other, "# HELP jobs_total x\n# TYPE jobs_total counter\n");
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(MetricsText, WritesValuesAsTheFormatReadsThem) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatMetricValue(kInf), "+Inf");
  EXPECT_EQ(FormatMetricValue(-kInf), "-Inf");
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(1), "1");
  EXPECT_EQ(FormatMetricValue(-42), "-42");
  EXPECT_EQ(FormatMetricValue(1.2e9), "1200000000");
  EXPECT_EQ(FormatMetricValue(1e16), "10000000000000000") << "an exact integer never takes an exponent";
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(0.00025), "0.00025");
  EXPECT_EQ(FormatMetricValue(2.5), "2.5");
  EXPECT_EQ(FormatMetricValue(1e-5), "1e-05");
  EXPECT_EQ(FormatMetricValue(1e22), "1e+22");
  EXPECT_EQ(FormatMetricValue(0.0123), "0.0123");
  EXPECT_EQ(FormatMetricValue(1.0 / 3), "0.3333333333333333") << "the shortest text that reads back the same";
  std::string out;
  MetricsText w(out);
  w.Sample("m", {{"le", FormatMetricValue(kInf)}}, std::numeric_limits<double>::quiet_NaN());
  w.Sample("m", {}, -kInf, -5);
  EXPECT_EQ(out, "m{le=\"+Inf\"} NaN\nm -Inf -5\n");
}

TEST(Problem, AClientReadsBackTheStatusTheServerMeant) {
  // Every code and every named outcome crosses the wire and back with its HTTP status and reason,
  // so that a client keeps its meaning: a 409 Conflict is Aborted (run it again), not Unknown.
  const std::vector<absl::Status> sent = {
      absl::InvalidArgumentError("m"),  absl::UnauthenticatedError("m"), absl::PermissionDeniedError("m"),
      absl::NotFoundError("m"),         absl::AlreadyExistsError("m"),   absl::AbortedError("m"),
      absl::FailedPreconditionError("m"), absl::OutOfRangeError("m"),    absl::ResourceExhaustedError("m"),
      absl::UnimplementedError("m"),    absl::UnavailableError("m"),     absl::DeadlineExceededError("m"),
      absl::InternalError("m"),         MethodNotAllowed("m"),           ContentTooLarge("m"),
      UnsupportedMediaType("m"),        TooManyRequests("m"),            HeaderFieldsTooLarge("m"),
      NotReady("m")};
  std::set<std::pair<int, std::string>> seen;
  for (const absl::Status& s : sent) {
    const Problem p = ProblemFor(s);
    const absl::Status back = StatusFromProblem(p.status, p.reason, p.detail);
    EXPECT_EQ(back.code(), s.code()) << s;
    const Problem again = ProblemFor(back);
    EXPECT_EQ(again.status, p.status) << s;
    EXPECT_EQ(again.reason, p.reason) << s;
    EXPECT_EQ(again.detail, "m");
    EXPECT_TRUE(seen.insert({p.status, p.reason}).second) << "two outcomes answer alike: " << p.status << " " << p.reason;
  }
  EXPECT_EQ(StatusFromProblem(409, "Conflict", "x").code(), absl::StatusCode::kAborted);
  // A reason it does not know keeps the status's nearest code, and the reason itself.
  const absl::Status odd = StatusFromProblem(422, "Invalid", "x");
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProblemFor(odd).reason, "Invalid");
  EXPECT_EQ(ProblemFor(odd).status, 422);
}

}  // namespace
}  // namespace gpuaas
