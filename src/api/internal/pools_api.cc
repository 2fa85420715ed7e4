#include "api/internal/pools_api.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/internal/bodies.h"
#include "common/status.h"
#include "fmt/format.h"
#include "model/codec.h"

namespace gpuaas::api::internal {
namespace {

constexpr std::string_view kJson = "application/json";

}  // namespace

absl::Status NoPools() { return absl::UnimplementedError("this server runs without pools"); }

absl::StatusOr<PoolsApi::Target> PoolsApi::TargetOf(const HttpRequest& req) {
  if (!pools_) return NoPools();
  ASSIGN_OR_RETURN(const bool dry_run, DryRunOf(req));
  return Target{dry_run ? &pools_->DryRun() : pools_, dry_run};
}

// Waits until the cache shows the write, so that the client's next GET reads its own write. When
// the cache lags longer, the write stands (it is committed) and the reply says so in a Warning
// header, as kube-apiserver warns: a read may not show it yet.
template <typename T>
absl::StatusOr<HttpResponse> PoolsApi::Written(absl::StatusOr<T> obj, int status, const Target& to,
                                               const std::vector<std::string>& warnings) {
  if (!obj.ok()) return obj.status();
  const int64_t written = obj->metadata.resource_version;
  if (to.dry_run) obj->metadata.resource_version = 0;
  HttpResponse r{status, std::string(kJson), model::Encode(*obj), {}};
  AddWarnings(r, warnings);
  if (!to.dry_run && !cache_.WaitFor(written, read_your_write_timeout_)) {
    r.headers.emplace_back(
        "Warning", fmt::format("299 - \"the write is committed at resourceVersion {}, but this server's read cache "
                               "does not show it yet: a read may return the earlier state for a while\"",
                               written));
  }
  return r;
}

absl::StatusOr<HttpResponse> PoolsApi::CreateProject(const HttpRequest& req, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(Read<model::Project> p, ReadObject<model::Project>(req));
  return Written(to.service->CreateProject(std::move(p.value), who.user), 201, to, p.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreateRateCard(const HttpRequest& req, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(Read<model::RateCard> c, ReadObject<model::RateCard>(req));
  return Written(to.service->CreateRateCard(std::move(c.value), who.user), 201, to, c.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::SetBudget(const HttpRequest& req, std::string_view project,
                                                 const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(const Read<BudgetBody> read, ReadBody<BudgetBody>(req));
  const BudgetBody& body = read.value;
  std::optional<model::Project::Budget> budget;
  if (body.amount_micros > 0 || body.gpu_hours > 0) {
    budget = model::Project::Budget{body.amount_micros, body.gpu_hours, body.allow_overrun};
  }
  absl::StatusOr<model::Project> set = to.service->SetBudget(std::string(project), budget, who.user);
  ASSIGN_OR_RETURN(HttpResponse reply, Written(set, 200, to, read.warnings));
  // Accepted (it is the operator's call), but not without a word when it is already passed.
  if (const std::string w = billing_.BudgetWarning(*set); !w.empty()) {
    reply.headers.emplace_back("Warning", fmt::format("299 - \"{}\"", w));
  }
  return reply;
}

absl::StatusOr<HttpResponse> PoolsApi::IssueCreditNote(const HttpRequest& req, std::string_view project,
                                                       const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  ASSIGN_OR_RETURN(const Read<CreditNoteBody> read, ReadBody<CreditNoteBody>(req));
  const CreditNoteBody& body = read.value;
  return Written(
      to.service->IssueCreditNote(std::string(project), body.period, body.amount_micros, body.reason, who.user), 201,
      to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreatePool(const HttpRequest& req, std::string_view ns, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("projects \"{}\" not found", ns));
  ASSIGN_OR_RETURN(Read<model::GpuPool> read, ReadObject<model::GpuPool>(req));
  model::GpuPool& p = read.value;
  if (!p.metadata.ns.empty() && p.metadata.ns != ns) {
    return absl::InvalidArgumentError(
        fmt::format("metadata.namespace \"{}\" does not match the project in the path ({})", p.metadata.ns, ns));
  }
  p.metadata.ns = std::string(ns);
  return Written(to.service->CreatePool(std::move(p), who.user), 201, to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreateWorkload(const HttpRequest& req, std::string_view ns,
                                                      const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("projects \"{}\" not found", ns));
  ASSIGN_OR_RETURN(Read<model::Workload> read, ReadObject<model::Workload>(req));
  model::Workload& w = read.value;
  if (!w.metadata.ns.empty() && w.metadata.ns != ns) {
    return absl::InvalidArgumentError("metadata.namespace does not match the project in the path");
  }
  w.metadata.ns = std::string(ns);
  return Written(to.service->CreateWorkload(std::move(w), who.user), 201, to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::DeleteWorkload(const HttpRequest& req, std::string_view ns,
                                                      std::string_view name, const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("workloads \"{}\" not found", name));
  return Written(to.service->DeleteWorkload(std::string(ns), std::string(name), who.user), 200, to);
}

absl::StatusOr<HttpResponse> PoolsApi::DeletePool(const HttpRequest& req, std::string_view ns, std::string_view name,
                                                  const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  return Written(to.service->DeletePool(std::string(ns), std::string(name), who.user), 200, to);
}

absl::StatusOr<HttpResponse> PoolsApi::Approve(const HttpRequest& req, std::string_view ns, std::string_view name,
                                               const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  ASSIGN_OR_RETURN(const Read<ApprovalBody> read, ReadBody<ApprovalBody>(req));
  return Written(
      to.service->Approve(std::string(ns), std::string(name), read.value.approve, read.value.reason, who.user), 200,
      to, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::Release(const HttpRequest& req, std::string_view ns, std::string_view name,
                                               const Principal& who) {
  ASSIGN_OR_RETURN(const Target to, TargetOf(req));
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  return Written(to.service->Release(std::string(ns), std::string(name), who.user), 200, to);
}

}  // namespace gpuaas::api::internal
