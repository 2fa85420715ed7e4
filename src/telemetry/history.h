// Telemetry history read back from the TSDB gpuaas remote-writes to (Prometheus or
// VictoriaMetrics), through Prometheus' query API, which both serve. With a history, the hub
// answers ranges older than its hot window from there (Hub::Query): GPU charts, pool and
// project utilization, the assessment and the used GPU-hours of invoices keep their shapes and
// their answers, whatever the process kept in memory.
//
// One query_range request per series and range returns, per step, the sum, count and maximum
// of the raw samples in [t, t + step), aggregated across the series' label sets (a device that
// changed pools has one series per pool), so that the mean is the mean of the raw samples, as
// the hot window answers it. Range selectors differ between receivers: Prometheus 2.x includes
// both ends ([T - r, T]), VictoriaMetrics and Prometheus 3 only the later one ((T - r, T]); the
// receiver's kind is asked once (/api/v1/status/buildinfo: Prometheus names its version) and
// the window chosen to be [t, t + step) on either (timestamps are whole milliseconds).
//
// A receiver that does not answer, answers late or answers an error gives Unavailable with the
// reason: the API turns it into a 503, never a hang. Nothing here does I/O (the GET is handed in).
#ifndef GPUAAS_TELEMETRY_HISTORY_H_
#define GPUAAS_TELEMETRY_HISTORY_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "telemetry/fields.h"
#include "telemetry/series.h"

namespace gpuaas::telemetry {

class History {
 public:
  virtual ~History() = default;
  // Buckets of `step` seconds covering [from, to) of the series of `field` on `device` ("GPU-…"
  // or "GPU-…/<GPU instance id>"), as SeriesStore::Query shapes them (count 0: no samples).
  virtual absl::StatusOr<std::vector<Bucket>> Buckets(std::string_view device, Field field, int64_t from, int64_t to,
                                                      int64_t step) const = 0;
  // Where it reads from, for messages.
  virtual std::string Where() const = 0;
};

// GETs a path with its query ("/api/v1/query_range?query=…") from the receiver; the body of a
// 200, else an error whose message says what happened (no answer, a timeout, an HTTP status).
using HttpGet = std::function<absl::StatusOr<std::string>(const std::string& path_and_query)>;

class PromHistory final : public History {
 public:
  PromHistory(std::string base_url, HttpGet get) : base_url_(std::move(base_url)), get_(std::move(get)) {}
  absl::StatusOr<std::vector<Bucket>> Buckets(std::string_view device, Field field, int64_t from, int64_t to,
                                              int64_t step) const override;
  std::string Where() const override { return base_url_; }

  // The PromQL of one step's sum, count and max (exposed for tests).
  static std::string Expr(std::string_view device, Field field, int64_t range_ms);

 private:
  // Whether the receiver's range selectors include their start (Prometheus 2.x).
  absl::StatusOr<bool> ClosedRanges() const;

  const std::string base_url_;
  const HttpGet get_;
  mutable std::mutex mu_;
  mutable std::optional<bool> closed_ranges_;
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_HISTORY_H_
