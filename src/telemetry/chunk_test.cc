// XorChunk: what goes in comes out bit for bit, whatever the timestamps and values; and the
// sizes the scheme is chosen for.
#include "telemetry/chunk.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpuaas::telemetry {
namespace {

struct Point {
  int64_t t;
  double v;
};

void ExpectRoundTrip(const std::vector<Point>& in, const std::string& what) {
  XorChunk c;
  for (const Point& p : in) c.Append(p.t, p.v);
  ASSERT_EQ(c.size(), in.size()) << what;
  XorChunk::Reader r = c.Read();
  int64_t t = 0;
  double v = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_TRUE(r.Next(t, v)) << what << " at " << i;
    ASSERT_EQ(t, in[i].t) << what << " at " << i;
    ASSERT_EQ(std::bit_cast<uint64_t>(v), std::bit_cast<uint64_t>(in[i].v)) << what << " at " << i << ": " << v;
  }
  EXPECT_FALSE(r.Next(t, v)) << what;
  if (!in.empty()) {
    EXPECT_EQ(c.first_t(), in.front().t);
    EXPECT_EQ(c.last_t(), in.back().t);
  }
}

TEST(XorChunk, RandomSeriesRoundTripBitForBit) {
  std::mt19937_64 rng(20261205);
  const std::vector<double> specials = {0.0, -0.0, 1.0, -1.0, std::numeric_limits<double>::denorm_min(),
                                        std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(),
                                        std::numeric_limits<double>::infinity(), 412.331, 319159391.0};
  for (int round = 0; round < 500; ++round) {
    std::vector<Point> pts;
    int64_t t = static_cast<int64_t>(rng() % 2'000'000'000'000ULL) - 1'000'000'000'000LL;
    double v = specials[rng() % specials.size()];
    const int n = static_cast<int>(rng() % 300);
    const int style = round % 5;
    for (int i = 0; i < n; ++i) {
      // Steps: regular, jittered, and now and then a gap of any size (every dod bucket).
      const int64_t gaps[] = {15000, 15000 + static_cast<int64_t>(rng() % 200) - 100, 1 + static_cast<int64_t>(rng() % 10),
                              static_cast<int64_t>(rng() % 1'000'000), static_cast<int64_t>(rng() % (int64_t{1} << 40))};
      t += gaps[rng() % 5 == 0 ? rng() % 5 : style % 2];
      if (style == 1) {
        v += static_cast<double>(rng() % 5000);  // a rising counter
      } else if (style == 2) {
        v = 400 + static_cast<double>(rng() % 100000) / 1000;  // a noisy gauge
      } else if (style == 3) {
        v = std::bit_cast<double>(rng());  // any bits at all
      } else if (style == 4) {
        v = specials[rng() % specials.size()];
      }  // style 0: flat
      pts.push_back({t, v});
    }
    ExpectRoundTrip(pts, "round " + std::to_string(round));
  }
}

TEST(XorChunk, NaNsAndTheExtremesOfTimeKeepTheirBits) {
  ExpectRoundTrip({{std::numeric_limits<int64_t>::min() / 4, std::numeric_limits<double>::quiet_NaN()},
                   {0, -std::numeric_limits<double>::quiet_NaN()},
                   {std::numeric_limits<int64_t>::max() / 4, 5}},
                  "extremes");
  ExpectRoundTrip({}, "empty");
  ExpectRoundTrip({{1, 2}}, "one");
}

TEST(XorChunk, AFlatSeriesCostsAboutTwoBitsAPointAndANoisyGaugeAFewBytes) {
  XorChunk flat, noisy;
  std::mt19937 rng(7);
  for (int i = 0; i < 120; ++i) {
    flat.Append(1'764'688'445'000 + 15000 * i, 38);
    noisy.Append(1'764'688'445'000 + 15000 * i, 412.331 + static_cast<double>(rng() % 20000) / 1000.0);
  }
  flat.Seal();
  noisy.Seal();
  // 16 bytes for the first sample, the second's 17-bit delta, then 2 bits a point.
  EXPECT_LE(flat.bytes() - sizeof(XorChunk), 16u + 3u + 120u * 2u / 8u + 1u);
  EXPECT_LT(static_cast<double>(noisy.bytes() - sizeof(XorChunk)) / 120, 8.0);
}

}  // namespace
}  // namespace gpuaas::telemetry
