// The client commands of the gpuaas binary: they talk to a gpuaas server over its REST API (or,
// for `catalog`, read the compiled catalogue) and print for people or scripts. Each returns the
// process exit code: 0 success, 1 error (printed to `err`).
#ifndef GPUAAS_CLI_COMMANDS_H_
#define GPUAAS_CLI_COMMANDS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gpuaas::cli {

struct ClientOptions {
  std::string server = "http://127.0.0.1:8080";
  std::string output = "table";
  std::string selector;  // -l
  bool watch = false;    // -w: after the list, follow changes
  std::string token;     // bearer token, --token or GPUAAS_TOKEN
  std::ostream* warnings = nullptr;  // where the server's Warning headers are printed (none: dropped)
};

// gpuaas get TYPE [NAME]: TYPE any the server's discovery lists (gpuaas api-resources), by plural,
// singular, short name or kind, or nodes, gpus, specs, pools
int Get(const ClientOptions& o, const std::string& what, const std::string& name, std::ostream& out,
        std::ostream& err);
// gpuaas summary
int Summary(const ClientOptions& o, std::ostream& out, std::ostream& err);
// gpuaas catalog models
int CatalogModels(const std::string& output, std::ostream& out, std::ostream& err);
// gpuaas catalog layouts MODEL
int CatalogLayouts(const std::string& model, std::ostream& out, std::ostream& err);
// gpuaas api-resources: the resource types the server serves (its discovery), as kubectl lists them
int ApiResourcesCmd(const ClientOptions& o, std::ostream& out, std::ostream& err);
// gpuaas audit [--after REVISION]: the audit log, oldest first, at most 1,000 events (operators)
int AuditCmd(const ClientOptions& o, int64_t after, std::ostream& out, std::ostream& err);
// gpuaas version: the client's, then the server's (an error when the server does not answer)
int Version(const ClientOptions& o, const std::string& client_version, std::ostream& out,
            std::ostream& err);

struct ProjectCreate {
  std::string name;
  std::string display_name;
  std::vector<std::string> quota_full;        // MODEL=N
  std::vector<std::string> quota_mig_slices;  // MODEL=N
};
// gpuaas project create NAME
int ProjectCreateCmd(const ClientOptions& o, const ProjectCreate& p, std::ostream& out, std::ostream& err);

struct PoolRequest {
  std::string name;
  std::string project;
  std::vector<std::string> items;  // MODEL/PROFILE=COUNT, e.g. H200-SXM-141GB/3g.71gb=4
  std::string cluster;
  std::string workload_type = "training";
  int time_slicing = 0;
  bool move_idle_instances = false;
};
// gpuaas pool request NAME -p PROJECT --item MODEL/PROFILE=COUNT ...
int PoolRequestCmd(const ClientOptions& o, const PoolRequest& r, std::ostream& out, std::ostream& err);
// gpuaas pool approve|reject NAME -p PROJECT [--reason R]
int PoolApproveCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                   bool approve, const std::string& reason, std::ostream& out, std::ostream& err);
// gpuaas pool release NAME -p PROJECT
int PoolReleaseCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                   std::ostream& out, std::ostream& err);
// gpuaas pool delete NAME -p PROJECT: withdraw a request, or remove a rejected or released pool
int PoolDeleteCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                  std::ostream& out, std::ostream& err);
// gpuaas pool list [-p PROJECT] / gpuaas pool get NAME -p PROJECT
int PoolGetCmd(const ClientOptions& o, const std::string& project, const std::string& name,
               std::ostream& out, std::ostream& err);

struct WorkloadRun {
  std::string name;
  std::string project;
  std::string pool;
  std::string resource;  // RESOURCE[=COUNT]
  std::string priority = "batch";
  std::string model;       // a borrower's GPU model
  bool no_requeue = false;  // a reclaimed borrower ends Evicted
};
// gpuaas workload run|delete
int WorkloadRunCmd(const ClientOptions& o, const WorkloadRun& r, std::ostream& out, std::ostream& err);
int WorkloadDeleteCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                      std::ostream& out, std::ostream& err);

// gpuaas token create|list|revoke
int TokenCreateCmd(const ClientOptions& o, const std::string& user, const std::string& role,
                   const std::string& project, const std::string& cluster, const std::vector<std::string>& nodes,
                   std::ostream& out, std::ostream& err);
int TokenListCmd(const ClientOptions& o, std::ostream& out, std::ostream& err);
int TokenRevokeCmd(const ClientOptions& o, const std::string& id, std::ostream& out, std::ostream& err);

// gpuaas cluster add|list|remove: clusters registered while the server runs (operators).
struct ClusterAdd {
  std::string name;
  std::string kubeconfig;  // a file; empty: $KUBECONFIG (its first file), else ~/.kube/config
  std::string context;     // empty: the kubeconfig's current context
  std::string display_name;
  std::string region;
};
// Reads the kubeconfig here (with the files it names) and sends it self-contained: the server
// needs none of this machine's files.
int ClusterAddCmd(const ClientOptions& o, const ClusterAdd& a, std::ostream& out, std::ostream& err);
int ClusterListCmd(const ClientOptions& o, std::ostream& out, std::ostream& err);
int ClusterRemoveCmd(const ClientOptions& o, const std::string& name, std::ostream& out, std::ostream& err);

// `gpuaas defrag plan`: the GPUs whose free instances (held by no pool) could be destroyed to
// make room for a larger profile, and what the fleet could hand out before and after.
int DefragPlanCmd(const ClientOptions& o, std::ostream& out, std::ostream& err);
// `gpuaas defrag apply [--gpu UUID]...`: makes those moves (every one without --gpu).
int DefragApplyCmd(const ClientOptions& o, const std::vector<std::string>& gpus, std::ostream& out, std::ostream& err);

// gpuaas alerts [--all]: GPU health alerts, active ones unless --all.
int AlertsCmd(const ClientOptions& o, bool all, std::ostream& out, std::ostream& err);
// gpuaas metrics SERIES [--since 1h] [--step 60]: one series (SCOPE:ID:METRIC, docs/monitoring.md).
int MetricsCmd(const ClientOptions& o, const std::string& series, const std::string& since, int64_t step,
               std::ostream& out, std::ostream& err);

// Billing (docs/billing.md). Periods are months, YYYY-MM (default: the running one).
// gpuaas bill list [-p PROJECT] [--period P]: invoices, one line each
int BillListCmd(const ClientOptions& o, const std::string& project, const std::string& period, std::ostream& out,
                std::ostream& err);
// gpuaas bill show PROJECT [--period P]: an invoice's lines
int BillShowCmd(const ClientOptions& o, const std::string& project, const std::string& period, std::ostream& out,
                std::ostream& err);
// gpuaas bill export PROJECT [--period P] [--format csv|json], or --focus [--from F --to T]
int BillExportCmd(const ClientOptions& o, const std::string& project, const std::string& period,
                  const std::string& format, bool focus, const std::string& from, const std::string& to,
                  std::ostream& out, std::ostream& err);
// gpuaas bill budget PROJECT [--amount DECIMAL] [--gpu-hours N] [--allow-overrun] (operators)
int BillBudgetCmd(const ClientOptions& o, const std::string& project, const std::string& amount, int64_t gpu_hours,
                  bool allow_overrun, std::ostream& out, std::ostream& err);
// gpuaas bill credit PROJECT --period P --amount DECIMAL --reason R (operators)
int BillCreditCmd(const ClientOptions& o, const std::string& project, const std::string& period,
                  const std::string& amount, const std::string& reason, std::ostream& out, std::ostream& err);
struct RateCardCreate {
  std::string name;
  std::string currency = "USD";
  std::string from;                 // RFC 3339; default: now
  std::vector<std::string> prices;  // MODEL/PROFILE=DECIMAL per device-hour
  std::string mig_pricing = "compute";
};
// gpuaas bill ratecard NAME --price MODEL/PROFILE=DECIMAL ... (operators)
int RateCardCreateCmd(const ClientOptions& o, const RateCardCreate& c, std::ostream& out, std::ostream& err);

}  // namespace gpuaas::cli

#endif  // GPUAAS_CLI_COMMANDS_H_
