#include "telemetry/history.h"

#include <map>

#include "gtest/gtest.h"
#include "telemetry/hub.h"

namespace gpuaas::telemetry {
namespace {

constexpr int64_t kT = 1'800'000'000;  // a minute boundary (unix seconds)

// A receiver's query API in memory: buildinfo as given, and query_range answered from a map of
// evaluation time (ms) -> {sum, count, max}; every path asked is kept.
struct FakeReceiver {
  std::string buildinfo;
  std::map<int64_t, std::array<double, 3>> steps;
  std::vector<std::string> asked;
  bool down = false;
  HttpGet Get() {
    return [this](const std::string& path) -> absl::StatusOr<std::string> {
      asked.push_back(path);
      if (down) return absl::UnavailableError("Connection refused");
      if (path == "/api/v1/status/buildinfo") return buildinfo;
      if (path.find("/api/v1/query_range?") != 0) return absl::NotFoundError("HTTP 404");
      std::string out = R"({"status":"success","data":{"resultType":"matrix","result":[)";
      const char* names[] = {"sum", "count", "max"};
      for (int k = 0; k < 3; ++k) {
        out += std::string(k ? "," : "") + R"({"metric":{"agg":")" + names[k] + R"("},"values":[)";
        bool first = true;
        for (const auto& [t_ms, v] : steps) {
          out += std::string(first ? "" : ",") + "[" + std::to_string(t_ms / 1000) + "." +
                 std::to_string(1000 + t_ms % 1000).substr(1) + ",\"" + std::to_string(v[k]) + "\"]";
          first = false;
        }
        out += "]}";
      }
      return out + "]}}";
    };
  }
};

TEST(History, ReadsSumCountAndMaxPerStepIntoTheStoresShape) {
  FakeReceiver rx;
  rx.buildinfo = R"({"status":"success","data":{}})";  // VictoriaMetrics
  // Steps [kT, kT+60) and [kT+120, kT+180) have samples; the middle one has none.
  rx.steps[(kT + 60) * 1000 - 1] = {400, 4, 130};
  rx.steps[(kT + 180) * 1000 - 1] = {90, 3, 40};
  PromHistory h("http://vm:8428", rx.Get());
  absl::StatusOr<std::vector<Bucket>> b = h.Buckets("GPU-a/3", Field::kSmActive, kT, kT + 180, 60);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[0].t, kT);
  EXPECT_EQ((*b)[0].count, 4);
  EXPECT_DOUBLE_EQ((*b)[0].mean, 100);
  EXPECT_DOUBLE_EQ((*b)[0].max, 130);
  EXPECT_EQ((*b)[1].count, 0);
  EXPECT_EQ((*b)[2].t, kT + 120);
  EXPECT_DOUBLE_EQ((*b)[2].mean, 30);
  // Read at t + step - 1 ms with a full step's range (ranges leave out their start there).
  ASSERT_EQ(rx.asked.size(), 2u);
  EXPECT_NE(rx.asked[1].find("start=1800000059.999&end=1800000179.999&step=60"), std::string::npos) << rx.asked[1];
  EXPECT_NE(rx.asked[1].find("%5B60000ms%5D"), std::string::npos) << rx.asked[1];
  EXPECT_NE(rx.asked[1].find("mig_instance%3D%223%22"), std::string::npos) << rx.asked[1];
  // The receiver's kind is asked once.
  ASSERT_TRUE(h.Buckets("GPU-a", Field::kPowerW, kT, kT + 60, 60).ok());
  EXPECT_EQ(rx.asked.size(), 3u);
  EXPECT_NE(rx.asked[2].find("mig_instance%3D%22%22"), std::string::npos) << rx.asked[2];
}

TEST(History, PrometheusTwoGetsARangeOneMillisecondShorter) {
  FakeReceiver rx;
  rx.buildinfo = R"({"status":"success","data":{"version":"2.42.0+ds","revision":"x"}})";
  PromHistory h("http://prom:9090", rx.Get());
  ASSERT_TRUE(h.Buckets("GPU-a", Field::kPowerW, kT, kT + 60, 60).ok());
  EXPECT_NE(rx.asked.back().find("%5B59999ms%5D"), std::string::npos) << rx.asked.back();
  EXPECT_EQ(PromHistory::Expr("GPU-a", Field::kPowerW, 59999),
            "label_replace(sum(sum_over_time(gpuaas_power_w{gpu=\"GPU-a\",mig_instance=\"\"}[59999ms])), \"agg\", "
            "\"sum\", \"\", \"\") or label_replace(sum(count_over_time(gpuaas_power_w{gpu=\"GPU-a\",mig_instance=\"\"}"
            "[59999ms])), \"agg\", \"count\", \"\", \"\") or label_replace(max(max_over_time(gpuaas_power_w{gpu=\"GPU-a\","
            "mig_instance=\"\"}[59999ms])), \"agg\", \"max\", \"\", \"\")");
}

TEST(History, AReceiverDownOrAnsweringNonsenseIsUnavailableWithTheReason) {
  FakeReceiver rx;
  rx.down = true;
  PromHistory h("http://vm:8428", rx.Get());
  absl::StatusOr<std::vector<Bucket>> b = h.Buckets("GPU-a", Field::kPowerW, kT, kT + 60, 60);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("http://vm:8428"), std::string::npos);
  EXPECT_NE(b.status().message().find("Connection refused"), std::string::npos);
  PromHistory odd("http://odd", [](const std::string& path) -> absl::StatusOr<std::string> {
    if (path == "/api/v1/status/buildinfo") return std::string("{}");
    return std::string("<html>proxy error</html>");
  });
  EXPECT_EQ(odd.Buckets("GPU-a", Field::kPowerW, kT, kT + 60, 60).status().code(), absl::StatusCode::kUnavailable);
}

// The hub answers the steps before its hot window from the history, the rest from memory, in one
// shape; without a history, all from memory.
TEST(History, TheHubSplitsARangeAtItsHotWindow) {
  SeriesLimits limits;
  limits.hot_window_s = 3600;
  Hub hub(limits);
  const int64_t now = kT + 7200;
  std::vector<Sample> samples;
  const SeriesId id = *hub.series().Intern("GPU-a", Field::kPowerW);
  for (int64_t t = kT; t < now; t += 15) samples.push_back({id, t * 1000, 200});
  hub.series().Append(samples);
  FakeReceiver rx;
  rx.buildinfo = "{}";
  for (int64_t t = kT; t < kT + 3600; t += 600) rx.steps[(t + 600) * 1000 - 1] = {40 * 100.0, 40, 150};
  hub.SetHistory(std::make_shared<PromHistory>("http://vm", rx.Get()));
  absl::StatusOr<std::vector<Bucket>> b = hub.Query("GPU-a", Field::kPowerW, kT, now, 600, now);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ((*b)[i].t, kT + static_cast<int64_t>(i) * 600);
    EXPECT_DOUBLE_EQ((*b)[i].mean, i < 6 ? 100 : 200) << i;  // the first hour from the receiver
    EXPECT_EQ((*b)[i].count, 40);
  }
  // Inside the hot window the receiver is not asked.
  const size_t asked = rx.asked.size();
  ASSERT_TRUE(hub.Query("GPU-a", Field::kPowerW, now - 600, now, 60, now).ok());
  EXPECT_EQ(rx.asked.size(), asked);
  // The receiver down: the older range is Unavailable, the hot one still answers.
  rx.down = true;
  EXPECT_EQ(hub.Query("GPU-a", Field::kPowerW, kT, now, 600, now).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(hub.Query("GPU-a", Field::kPowerW, now - 600, now, 60, now).ok());
}

}  // namespace
}  // namespace gpuaas::telemetry
