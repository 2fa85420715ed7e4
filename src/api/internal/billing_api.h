// The billing routes of the API server (docs/billing.md):
//   GET /api/v1/projects/{project}/invoices[?period=YYYY-MM]   a project's invoices, newest first
//   GET /api/v1/projects/{project}/invoices/{period}[?format=csv]   one invoice (JSON or CSV lines)
//   GET /api/v1/billing/focus?from=&to=                      FOCUS 1.2 CSV of every project's lines
//   GET /api/v1/billing/summary?from=&to=                    revenue and GPU-hours by model, cluster, project
// and the budget alerts that /api/v1/alerts lists. Invoices of closed months are the kept ones
// (the metering controller writes them); the running month's is rated from the meters now.
// Reads the ObjectCache's snapshots and, for showback, the telemetry hub (optional).
#ifndef GPUAAS_API_INTERNAL_BILLING_API_H_
#define GPUAAS_API_INTERNAL_BILLING_API_H_

#include <string>

#include "api/auth.h"
#include "api/http.h"
#include "common/clock.h"
#include "model/pool.h"
#include "store/cache.h"
#include "telemetry/hub.h"

namespace gpuaas::api::internal {

class BillingApi {
 public:
  BillingApi(store::ObjectCache& cache, telemetry::Hub* hub, const Clock& clock)
      : cache_(cache), hub_(hub), clock_(clock) {}

  absl::StatusOr<HttpResponse> Invoices(const HttpRequest& req, const std::string& project, const Principal& who);
  absl::StatusOr<HttpResponse> Invoice(const HttpRequest& req, const std::string& project, const std::string& period,
                                       const Principal& who);
  absl::StatusOr<HttpResponse> Focus(const HttpRequest& req);
  absl::StatusOr<HttpResponse> Summary(const HttpRequest& req);
  // Active budget alerts (80% and 100% of a project's monthly budget), as a JSON array.
  std::string BudgetAlertsJson();
  // Why a budget just set may surprise its setter: the project's pools already cost more by the
  // month's end than it allows (empty when they do not).
  std::string BudgetWarning(const model::Project& project);

 private:
  store::ObjectCache& cache_;
  telemetry::Hub* hub_;
  const Clock& clock_;
};

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_BILLING_API_H_
