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

// Waits until the cache shows the write, so that the client's next GET reads its own write. When
// the cache lags longer, the write stands (it is committed) and the reply says so in a Warning
// header, as kube-apiserver warns: a read may not show it yet.
template <typename T>
absl::StatusOr<HttpResponse> PoolsApi::Written(const absl::StatusOr<T>& obj, int status,
                                               const std::vector<std::string>& warnings) {
  if (!obj.ok()) return obj.status();
  HttpResponse r{status, std::string(kJson), model::Encode(*obj), {}};
  AddWarnings(r, warnings);
  if (!cache_.WaitFor(obj->metadata.resource_version, read_your_write_timeout_)) {
    r.headers.emplace_back(
        "Warning", fmt::format("299 - \"the write is committed at resourceVersion {}, but this server's read cache "
                               "does not show it yet: a read may return the earlier state for a while\"",
                               obj->metadata.resource_version));
  }
  return r;
}

absl::StatusOr<HttpResponse> PoolsApi::CreateProject(const HttpRequest& req, const Principal& who) {
  if (!pools_) return NoPools();
  ASSIGN_OR_RETURN(Read<model::Project> p, ReadObject<model::Project>(req));
  return Written(pools_->CreateProject(std::move(p.value), who.user), 201, p.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreateRateCard(const HttpRequest& req, const Principal& who) {
  if (!pools_) return NoPools();
  ASSIGN_OR_RETURN(Read<model::RateCard> c, ReadObject<model::RateCard>(req));
  return Written(pools_->CreateRateCard(std::move(c.value), who.user), 201, c.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::SetBudget(const HttpRequest& req, std::string_view project,
                                                 const Principal& who) {
  if (!pools_) return NoPools();
  ASSIGN_OR_RETURN(const Read<BudgetBody> read, ReadBody<BudgetBody>(req));
  const BudgetBody& body = read.value;
  std::optional<model::Project::Budget> budget;
  if (body.amount_micros > 0 || body.gpu_hours > 0) {
    budget = model::Project::Budget{body.amount_micros, body.gpu_hours, body.allow_overrun};
  }
  absl::StatusOr<model::Project> set = pools_->SetBudget(std::string(project), budget, who.user);
  ASSIGN_OR_RETURN(HttpResponse reply, Written(set, 200, read.warnings));
  // Accepted (it is the operator's call), but not without a word when it is already passed.
  if (const std::string w = billing_.BudgetWarning(*set); !w.empty()) {
    reply.headers.emplace_back("Warning", fmt::format("299 - \"{}\"", w));
  }
  return reply;
}

absl::StatusOr<HttpResponse> PoolsApi::IssueCreditNote(const HttpRequest& req, std::string_view project,
                                                       const Principal& who) {
  if (!pools_) return NoPools();
  ASSIGN_OR_RETURN(const Read<CreditNoteBody> read, ReadBody<CreditNoteBody>(req));
  const CreditNoteBody& body = read.value;
  return Written(
      pools_->IssueCreditNote(std::string(project), body.period, body.amount_micros, body.reason, who.user), 201,
      read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreatePool(const HttpRequest& req, std::string_view ns, const Principal& who) {
  if (!pools_) return NoPools();
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("projects \"{}\" not found", ns));
  ASSIGN_OR_RETURN(Read<model::GpuPool> read, ReadObject<model::GpuPool>(req));
  model::GpuPool& p = read.value;
  if (!p.metadata.ns.empty() && p.metadata.ns != ns) {
    return absl::InvalidArgumentError(
        fmt::format("metadata.namespace \"{}\" does not match the project in the path ({})", p.metadata.ns, ns));
  }
  p.metadata.ns = std::string(ns);
  return Written(pools_->CreatePool(std::move(p), who.user), 201, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::CreateWorkload(const HttpRequest& req, std::string_view ns,
                                                      const Principal& who) {
  if (!pools_) return NoPools();
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("projects \"{}\" not found", ns));
  ASSIGN_OR_RETURN(Read<model::Workload> read, ReadObject<model::Workload>(req));
  model::Workload& w = read.value;
  if (!w.metadata.ns.empty() && w.metadata.ns != ns) {
    return absl::InvalidArgumentError("metadata.namespace does not match the project in the path");
  }
  w.metadata.ns = std::string(ns);
  return Written(pools_->CreateWorkload(std::move(w), who.user), 201, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::DeleteWorkload(std::string_view ns, std::string_view name,
                                                      const Principal& who) {
  if (!pools_) return NoPools();
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("workloads \"{}\" not found", name));
  return Written(pools_->DeleteWorkload(std::string(ns), std::string(name), who.user), 200);
}

absl::StatusOr<HttpResponse> PoolsApi::DeletePool(std::string_view ns, std::string_view name, const Principal& who) {
  if (!pools_) return NoPools();
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  return Written(pools_->DeletePool(std::string(ns), std::string(name), who.user), 200);
}

absl::StatusOr<HttpResponse> PoolsApi::Approve(const HttpRequest& req, std::string_view ns, std::string_view name,
                                               const Principal& who) {
  if (!pools_) return NoPools();
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  ASSIGN_OR_RETURN(const Read<ApprovalBody> read, ReadBody<ApprovalBody>(req));
  return Written(pools_->Approve(std::string(ns), std::string(name), read.value.approve, read.value.reason, who.user),
                 200, read.warnings);
}

absl::StatusOr<HttpResponse> PoolsApi::Release(std::string_view ns, std::string_view name, const Principal& who) {
  if (!pools_) return NoPools();
  if (!who.Sees(ns)) return absl::NotFoundError(fmt::format("gpupools \"{}\" not found", name));
  return Written(pools_->Release(std::string(ns), std::string(name), who.user), 200);
}

}  // namespace gpuaas::api::internal
