#include "telemetry/series.h"

#include "gtest/gtest.h"

namespace gpuaas::telemetry {
namespace {

constexpr int64_t kT0 = 1'800'000'000;  // a whole hour: 1800000000 / 3600 = 500000

TEST(SeriesStore, RawQueryAveragesPerStep) {
  SeriesStore st;
  SeriesId id = *st.Intern("GPU-a", Field::kPowerW);
  std::vector<Sample> s;
  for (int i = 0; i < 60; ++i) s.push_back({id, (kT0 + i) * 1000, static_cast<double>(i)});
  EXPECT_EQ(st.Append(s), 60u);
  std::vector<Bucket> b = st.Query("GPU-a", Field::kPowerW, kT0, kT0 + 60, 10, kT0 + 60);
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[0].t, kT0);
  EXPECT_DOUBLE_EQ(b[0].mean, 4.5);  // 0..9
  EXPECT_DOUBLE_EQ(b[0].max, 9);
  EXPECT_EQ(b[0].count, 10);
  EXPECT_DOUBLE_EQ(b[5].mean, 54.5);
  EXPECT_TRUE(st.Query("GPU-b", Field::kPowerW, kT0, kT0 + 60, 10, kT0).empty());
}

TEST(SeriesStore, OutOfOrderDroppedAndRepeatsKeptOnce) {
  SeriesStore st;
  SeriesId id = *st.Intern("GPU-a", Field::kPowerW);
  // The same reading repeated on every MIG row of one scrape: kept once, not summed.
  EXPECT_EQ(st.Append({{id, kT0 * 1000, 300}, {id, kT0 * 1000, 300}, {id, kT0 * 1000, 300}}), 1u);
  EXPECT_EQ(st.Append({{id, (kT0 - 5) * 1000, 1}}), 0u);
  EXPECT_EQ(st.dropped_out_of_order(), 1);
  auto b = st.Query("GPU-a", Field::kPowerW, kT0, kT0 + 1, 1, kT0);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].count, 1);
  EXPECT_EQ(b[0].mean, 300);
}

TEST(SeriesStore, RingsAreBoundedAndOlderRangesUseRollups) {
  SeriesLimits lim;
  lim.raw_points = 100;
  SeriesStore st(lim);
  SeriesId id = *st.Intern("GPU-a", Field::kSmActive);
  std::vector<Sample> s;
  // Three hours at 10 s: hour 0 at 0.2, hour 1 at 0.6, hour 2 at 1.0.
  for (int i = 0; i < 3 * 360; ++i) s.push_back({id, (kT0 + i * 10) * 1000, 0.2 + 0.4 * (i / 360)});
  st.Append(s);
  const int64_t now = kT0 + 3 * 3600;
  // Two hours back reaches past raw retention: minute rollups answer.
  auto b = st.Query("GPU-a", Field::kSmActive, kT0, now, 3600, now);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_NEAR(b[0].mean, 0.2, 1e-6);
  EXPECT_NEAR(b[1].mean, 0.6, 1e-6);
  EXPECT_NEAR(b[2].mean, 1.0, 1e-6);
  // The last 100 raw samples only.
  auto r = st.Query("GPU-a", Field::kSmActive, now - 1000, now, 1000, now);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].count, 100);
  // Closed rollups: 179 whole minutes and 2 whole hours.
  std::vector<RollupRow> rows = st.TakeClosedRollups();
  int minutes = 0, hours = 0;
  for (const RollupRow& row : rows) (row.step_s == 60 ? minutes : hours)++;
  EXPECT_EQ(minutes, 179);
  EXPECT_EQ(hours, 2);
  EXPECT_TRUE(st.TakeClosedRollups().empty());
  // Memory stays bounded: the raw ring holds 100 points whatever was appended.
  EXPECT_LT(st.MemoryBytes(), 100 * 16 + 256 * 12 + 8 * 12 + 1024);  // rings grow by doubling
}

TEST(SeriesStore, RollupsSurviveAReload) {
  SeriesStore a;
  SeriesId id = *a.Intern("GPU-a/3", Field::kFbUsedMib);
  std::vector<Sample> s;
  for (int i = 0; i < 2 * 360 + 1; ++i) s.push_back({id, (kT0 + i * 10) * 1000, i < 360 ? 100.0 : 300.0});
  a.Append(s);
  std::vector<RollupRow> rows = a.TakeClosedRollups();
  SeriesStore b;
  b.LoadRollups(rows);
  const int64_t now = kT0 + 10 * 86400;  // ten days later: hour rollups answer
  auto q = b.Query("GPU-a/3", Field::kFbUsedMib, kT0, kT0 + 7200, 3600, now);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_FLOAT_EQ(q[0].mean, 100);
  EXPECT_FLOAT_EQ(q[1].mean, 300);
}

TEST(SeriesStore, AYoungSeriesAnswersFromItsRawSamples) {
  SeriesStore st;
  SeriesId id = *st.Intern("GPU-a", Field::kTempC);
  st.Append({{id, (kT0 + 290) * 1000, 40}, {id, (kT0 + 295) * 1000, 42}});
  // Five minutes asked, ten seconds of history: the raw samples, at the step asked for.
  auto b = st.Query("GPU-a", Field::kTempC, kT0, kT0 + 300, 10, kT0 + 300);
  ASSERT_EQ(b.size(), 30u);
  EXPECT_EQ(b[29].count, 2);
  EXPECT_EQ(b[29].mean, 41);
}

TEST(SeriesStore, TheHotWindowAnswersFromCompressedRawSamplesExactly) {
  SeriesStore st;
  SeriesId id = *st.Intern("GPU-a", Field::kEnergyMj);
  // Six hours at 15 s of an energy counter in mJ: past what a float holds, kept to the unit.
  std::vector<Sample> s;
  std::vector<double> v;
  double e = 319159391123.0;
  for (int i = 0; i < 1440; ++i) {
    e += 6'000'000 + (i * 7919) % 100'000;
    v.push_back(e);
    s.push_back({id, (kT0 + i * 15) * 1000, e});
  }
  ASSERT_EQ(st.Append(s), 1440u);
  const int64_t now = kT0 + 1440 * 15;
  // The whole window, a step a sample: every sample as it went in.
  std::vector<Bucket> all = st.Query("GPU-a", Field::kEnergyMj, kT0, now, 15, now);
  ASSERT_EQ(all.size(), 1440u);
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i].count, 1) << i;
    ASSERT_EQ(all[i].mean, v[i]) << i;
  }
  // Five minutes in the middle: twenty samples.
  std::vector<Bucket> mid = st.Query("GPU-a", Field::kEnergyMj, kT0 + 3 * 3600, kT0 + 3 * 3600 + 300, 300, now);
  ASSERT_EQ(mid.size(), 1u);
  EXPECT_EQ(mid[0].count, 20);
  // Rollup rings included, less than the plain 16-byte pairs of the raw samples alone.
  EXPECT_LT(st.MemoryBytes(), 1440u * 16);
}

TEST(SeriesStore, AfterARestartTheRollupsAnswerWhatTheRawSamplesLost) {
  SeriesStore a;
  SeriesId id = *a.Intern("GPU-a", Field::kPowerW);
  std::vector<Sample> s;
  for (int i = 0; i < 720; ++i) s.push_back({id, (kT0 + i * 10) * 1000, 250});  // two hours at 10 s
  a.Append(s);
  SeriesStore b;  // restarted: the rollups are loaded, the raw samples are gone
  b.LoadRollups(a.TakeClosedRollups());
  SeriesId again = *b.Intern("GPU-a", Field::kPowerW);
  b.Append({{again, (kT0 + 7200) * 1000, 300}});
  const int64_t now = kT0 + 7210;
  // Within the hot window, but the one raw sample does not reach back: the minutes answer.
  std::vector<Bucket> q = b.Query("GPU-a", Field::kPowerW, kT0 + 3600, now, 600, now);
  ASSERT_EQ(q.size(), 7u);
  EXPECT_EQ(q[0].count, 10) << "ten closed minutes";
  EXPECT_FLOAT_EQ(q[0].mean, 250);
}

TEST(SeriesStore, SeriesLimitIsEnforced) {
  SeriesLimits lim;
  lim.max_series = 2;
  SeriesStore st(lim);
  EXPECT_TRUE(st.Intern("a", Field::kPowerW));
  EXPECT_TRUE(st.Intern("b", Field::kPowerW));
  EXPECT_TRUE(st.Intern("a", Field::kPowerW));  // existing
  EXPECT_FALSE(st.Intern("c", Field::kPowerW));
  EXPECT_EQ(st.series_count(), 2u);
}

}  // namespace
}  // namespace gpuaas::telemetry
