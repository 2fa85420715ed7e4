// The telemetry routes of the API server (docs/monitoring.md):
//   POST /api/v1/telemetry          agent reports (JSON) or dcgm-exporter text (text/plain)
//   GET  /api/v1/metrics/query      series of a GPU, MIG instance, workload, pool, project, cluster
//   GET  /api/v1/alerts             health alerts, newest first
//   GET  /api/v1/assessment         allocated vs used GPU-hours, idle pools, right-size suggestions
// and the telemetry gauges of /metrics. Handlers read the inventory and pools from the
// ObjectCache's snapshots and the readings from the Hub; members see their own project only.
#ifndef GPUAAS_API_INTERNAL_TELEMETRY_API_H_
#define GPUAAS_API_INTERNAL_TELEMETRY_API_H_

#include <functional>
#include <string>

#include "api/auth.h"
#include "api/http.h"
#include "api/internal/objects.h"
#include "common/clock.h"
#include "store/cache.h"
#include "telemetry/hub.h"

namespace gpuaas::api::internal {

class TelemetryApi {
 public:
  TelemetryApi(telemetry::Hub& hub, store::ObjectCache& cache, DecodedGpus& gpus, const Clock& clock)
      : hub_(hub), cache_(cache), gpus_(gpus), clock_(clock) {}

  // Agents push only for the GPUs of their token's nodes (a body naming any other is refused
  // whole, 403); operators for any GPU.
  absl::StatusOr<HttpResponse> Ingest(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> Query(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> Alerts(const HttpRequest& req, const Principal& who);
  absl::StatusOr<HttpResponse> Assessment(const HttpRequest& req, const Principal& who);
  // Appends the hub's own gauges (samples, series, memory, active alerts) to a /metrics body.
  void AppendMetrics(std::string& out);
  // Another source of active alerts for /api/v1/alerts (budgets): returns a JSON array of alert
  // objects. Set before serving.
  void AddAlerts(std::function<std::string()> source) { more_alerts_ = std::move(source); }

 private:
  absl::Status MayPush(const Principal& who, std::string_view gpu_uuid) const;
  std::function<std::string()> more_alerts_;
  telemetry::Hub& hub_;
  store::ObjectCache& cache_;
  DecodedGpus& gpus_;
  const Clock& clock_;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_TELEMETRY_API_H_
