// The in-memory series store: one series per (device, field), each kept at three resolutions,
// bounded by count, so memory is bounded by the number of series whatever the sampling rate:
//   raw     the last `raw_points` samples (4,320: the hot window of 6 hours at a 5 s interval),
//           full precision, in Gorilla-compressed chunks of 240 (telemetry/chunk.h); queries
//           within `hot_window_s` read them, decoding only the chunks their range touches,
//   minute  1-minute mean and max for `minute_points` minutes (1,440: a day),
//   hour    1-hour mean and max for `hour_points` hours (720: 30 days).
//   (rollups as floats: 7 significant digits are plenty for a mean)
// Raw samples take 0.3 to 8 bytes each by how much a value moves (bench/telemetry_bench), against
// 16 as plain pairs; rollup rings grow as history arrives, so a young series costs less. Closed minute and hour buckets are handed out
// (TakeClosedRollups) to be persisted, and loaded back at start (LoadRollups), so a restart
// keeps the rollups (raw samples of the last hour are not kept).
//
// A device is a GPU ("GPU-…") or a MIG instance ("GPU-…/<GPU instance id>"). Samples older
// than a series' newest are dropped (counted), and a second sample with the newest's timestamp
// is ignored: a GPU-level reading that dcgm-exporter repeats on every MIG row is kept once.
// Thread-safe.
#ifndef GPUAAS_TELEMETRY_SERIES_H_
#define GPUAAS_TELEMETRY_SERIES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "telemetry/fields.h"

namespace gpuaas::telemetry {

using SeriesId = uint32_t;

struct SeriesLimits {
  int raw_points = 4320;
  int64_t hot_window_s = 6 * 3600;  // how far back queries read raw samples
  int minute_points = 1440;
  int hour_points = 720;
  size_t max_series = 2'000'000;
};

struct Sample {
  SeriesId series = 0;
  int64_t t_ms = 0;
  double value = 0;
};

// One step of a query answer: mean and max of the points in [t, t + step). count 0: no data.
struct Bucket {
  int64_t t = 0;  // unix seconds
  double mean = 0;
  double max = 0;
  int64_t count = 0;
};

// A closed rollup bucket, for persistence.
struct RollupRow {
  std::string device;
  Field field = Field::kPowerW;
  int32_t step_s = 60;  // 60 or 3600
  int64_t bucket = 0;   // unix seconds / step
  float mean = 0;
  float max = 0;
};

class SeriesStore {
 public:
  explicit SeriesStore(SeriesLimits limits = {});
  ~SeriesStore();

  // The series of (device, field), created on first use. nullopt when max_series is reached.
  std::optional<SeriesId> Intern(std::string_view device, Field field);
  std::optional<SeriesId> Find(std::string_view device, Field field) const;
  // The device and field of a series; nullopt for an id never handed out.
  std::optional<std::pair<std::string, Field>> Describe(SeriesId id) const;

  // Appends samples (in time order per series). Returns how many were stored; `stored`, when
  // given, receives them (not those dropped as older than, or as old as, their series' newest).
  size_t Append(const std::vector<Sample>& samples, std::vector<Sample>* stored = nullptr);

  // Buckets of `step` seconds covering [from, to), from the finest resolution that still holds
  // `from` relative to `now`. Empty when the series does not exist.
  std::vector<Bucket> Query(std::string_view device, Field field, int64_t from, int64_t to, int64_t step,
                            int64_t now) const;
  // The newest sample of a series.
  std::optional<std::pair<int64_t, double>> Latest(std::string_view device, Field field) const;

  std::vector<RollupRow> TakeClosedRollups();
  void LoadRollups(const std::vector<RollupRow>& rows);

  const SeriesLimits& limits() const { return limits_; }
  size_t series_count() const;
  // Bytes held by the series (rings as allocated, keys and index), not counting the allocator's
  // own overhead.
  size_t MemoryBytes() const;
  int64_t dropped_out_of_order() const;

 private:
  struct Series;
  Series* Get(SeriesId id) const;
  static std::string Key(std::string_view device, Field field);

  SeriesLimits limits_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Series>> series_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, SeriesId> index_ ABSL_GUARDED_BY(mu_);
  struct Closed {
    SeriesId id;
    int32_t step_s;
    int32_t bucket;
    float mean, max;
  };
  std::vector<Closed> closed_ ABSL_GUARDED_BY(mu_);  // names are filled in when taken
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_SERIES_H_
