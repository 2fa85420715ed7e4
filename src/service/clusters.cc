#include "service/clusters.h"

#include <map>

#include "common/status.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/pool.h"
#include "service/pools.h"
#include "store/objects.h"

namespace gpuaas::service {

absl::StatusOr<model::ClusterRegistration> ClusterService::Register(model::ClusterRegistration r,
                                                                     const std::string& user) {
  r.metadata.ns.clear();
  r.spec.registered_by = user;
  if (absl::Status s = model::ValidateName(r.metadata.name); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format("metadata.name: {}", s.message()));
  }
  if (r.spec.driver != "kubernetes") {
    return absl::InvalidArgumentError(fmt::format("spec.driver: \"{}\" is not supported; expected kubernetes", r.spec.driver));
  }
  if (r.spec.kubeconfig.empty()) return absl::InvalidArgumentError("spec.kubeconfig: required");
  if (std::optional<cluster::Source> src = registry_.SourceOf(r.metadata.name); src == cluster::Source::kFixed) {
    return absl::AlreadyExistsError(
        fmt::format("cluster \"{}\" exists: it was given when the server started", r.metadata.name));
  }
  RETURN_IF_ERROR(validate_(r));
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    absl::Status s = store::CreateObject(tx, r, clock_.Now());
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(fmt::format("cluster \"{}\" is already registered", r.metadata.name));
    }
    RETURN_IF_ERROR(s);
    std::string where = r.spec.context.empty() ? "current context" : fmt::format("context {}", r.spec.context);
    return RecordAudit(tx, clock_.Now(), user, "RegisterCluster", fmt::format("clusters/{}", r.metadata.name),
                       fmt::format("kubernetes, {}", where));
  }));
  r.spec.kubeconfig.clear();
  return r;
}

absl::Status ClusterService::Unregister(const std::string& name, const std::string& user) {
  return store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<model::ClusterRegistration> reg,
                     store::GetObject<model::ClusterRegistration>(tx, "", name));
    if (!reg) {
      if (registry_.SourceOf(name) == cluster::Source::kFixed) {
        return absl::FailedPreconditionError(fmt::format(
            "cluster \"{}\" was given when the server started, not registered; restart the server without it", name));
      }
      return absl::NotFoundError(fmt::format("cluster \"{}\" is not registered", name));
    }
    ASSIGN_OR_RETURN(std::vector<model::GpuPool> pools, store::ListObjects<model::GpuPool>(tx));
    std::vector<std::string> holding;
    for (const model::GpuPool& p : pools) {
      if (model::DevicesByCluster(std::span<const model::GpuPool>(&p, 1)).contains(name)) {
        holding.push_back(fmt::format("{}/{}", p.metadata.ns, p.metadata.name));
      }
    }
    if (!holding.empty()) {
      return absl::FailedPreconditionError(fmt::format(
          "cluster \"{}\" holds devices of pools {}: release them first", name, fmt::join(holding, ", ")));
    }
    RETURN_IF_ERROR(store::DeleteObject<model::ClusterRegistration>(tx, "", name, reg->metadata.resource_version));
    return RecordAudit(tx, clock_.Now(), user, "UnregisterCluster", fmt::format("clusters/{}", name), "");
  });
}

absl::StatusOr<std::vector<ClusterEntry>> ClusterService::List() const {
  std::map<std::string, ClusterEntry> by_name;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<model::Cluster> clusters, store::ListObjects<model::Cluster>(tx));
    ASSIGN_OR_RETURN(std::vector<model::ClusterRegistration> regs,
                     store::ListObjects<model::ClusterRegistration>(tx));
    for (model::Cluster& c : clusters) {
      ClusterEntry& e = by_name[c.metadata.name];
      e.name = c.metadata.name;
      e.driver = c.spec.driver;
      e.cluster = std::move(c);
    }
    for (const model::ClusterRegistration& r : regs) {
      ClusterEntry& e = by_name[r.metadata.name];
      e.name = r.metadata.name;
      e.driver = r.spec.driver;
      e.source = "registered";
      const Endpoint where = endpoint_of_ ? endpoint_of_(r) : Endpoint{};
      e.server = where.server;
      e.context = where.context;
      e.registered_by = r.spec.registered_by;
      e.registered = r.metadata.creation_timestamp;
    }
    return absl::OkStatus();
  }));
  for (const std::string& name : registry_.Names()) by_name[name].name = name;
  std::vector<ClusterEntry> out;
  for (auto& [name, e] : by_name) {
    const std::optional<cluster::Source> src = registry_.SourceOf(name);
    e.connected = src.has_value();
    if (src == cluster::Source::kFixed) e.source = "start";
    if (e.connected && !e.cluster) {
      // Not observed yet: the driver says why (it answers from what it holds, without a request).
      if (std::shared_ptr<cluster::ClusterDriver> d = registry_.Get(name)) {
        if (absl::StatusOr<cluster::ObservedCluster> o = d->Observe(); !o.ok()) e.unreached = std::string(o.status().message());
      }
    }
    // Objects of a cluster neither managed nor registered are what a former run left.
    if (e.source.empty()) e.source = "none";
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gpuaas::service
