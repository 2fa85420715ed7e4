// gpuaas: one binary for the server and the client commands. main() only parses flags and hands
// over to the parts (exe/server_main.cc for the server, cli/ for client commands).
#include <iostream>

#include "CLI/CLI.hpp"
#include "agent/agent.h"
#include "cli/commands.h"
#include "cli/backup.h"
#include "cli/sim.h"
#include "common/strings.h"
#include "exe/server_main.h"

#ifndef GPUAAS_VERSION
#define GPUAAS_VERSION "v0.0.0-dev"
#endif

namespace {

// A word where a command is expected that names none ("gpuaas pool aprove"): said so, with the
// closest command, rather than CLI11's "A subcommand is required". 0 when the words are fine.
int UnknownCommand(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "gpuaas";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return 0;  // options: CLI11 judges them
    const std::vector<CLI::App*> subs = at->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return 0;  // the rest are arguments
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (CLI::App* sub : subs) {
      names.push_back(sub->get_name());
      if (sub->check_name(word)) next = sub;
    }
    if (next == nullptr) {
      const std::string close = gpuaas::ClosestWord(word, names);
      std::cerr << "unknown command \"" << word << "\" for \"" << path << "\""
                << (close.empty() ? "" : "; did you mean \"" + path + " " + close + "\"?") << "\n"
                << "Commands of " << path << ":";
      for (const std::string& n : names) std::cerr << " " << n;
      std::cerr << "\nRun '" << path << " --help' for more.\n";
      return 2;
    }
    at = next;
    path += " " + word;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpuaas: a GPU-as-a-Service control plane (fleet, pools, MIG, monitoring, billing)"};
  app.require_subcommand(1);
  app.set_version_flag("--client-version", GPUAAS_VERSION);

  gpuaas::cli::ClientOptions client;
  client.warnings = &std::cerr;
  if (const char* env = std::getenv("GPUAAS_SERVER")) client.server = env;
  if (const char* env = std::getenv("GPUAAS_TOKEN")) client.token = env;
  auto add_client_flags = [&](CLI::App* cmd, bool with_output) {
    cmd->add_option("--server,-s", client.server, "gpuaas server URL (env GPUAAS_SERVER)")
        ->capture_default_str();
    cmd->add_option("--token", client.token, "bearer token (env GPUAAS_TOKEN)");
    if (with_output) {
      cmd->add_option("-o,--output", client.output, "output format: table, json or yaml")
          ->capture_default_str();
    }
  };

  gpuaas::exe::ServerFlags sf;
  CLI::App* server = app.add_subcommand("server", "run the gpuaas server");
  server->add_option("--listen", sf.listen, "HOST:PORT to serve the API on")->capture_default_str();
  server->add_option("--db", sf.db,
                     "store URL: sqlite:PATH, sqlite::memory:, or postgresql://USER@HOST:PORT/DB (libpq's URI: "
                     "several hosts with target_session_attrs=read-write, sslmode=verify-full, ...)")
      ->capture_default_str();
  server->add_flag("--demo", sf.demo, "simulate the demo fleet (2 clusters, 18 nodes, 144 GPUs)");
  server->add_option("--fleet", sf.fleet_file, "simulate the fleet described in a YAML/JSON file");
  server->add_option("--synthetic-gpus", sf.synthetic_gpus,
                     "simulate a uniform fleet of about N GPUs (benchmarks)");
  server->add_option("--sync-interval", sf.sync_interval_s, "seconds between inventory syncs")
      ->capture_default_str();
  server->add_option("--threads", sf.threads, "HTTP I/O threads (0: one per core)")
      ->capture_default_str();
  server->add_flag("--allow-insecure-remote", sf.allow_remote,
                   "allow listening on a non-loopback address without TLS");
  server->add_option("--log-level", sf.log_level, "debug, info, warn, error or off")
      ->capture_default_str();
  server->add_option("--token-auth-file", sf.token_auth_file,
                     "static bearer tokens, one a line: token,user,role[,project]");
  server->add_option("--scrape", sf.scrape, "a dcgm-exporter /metrics URL to scrape (repeatable)");
  server->add_option("--scrape-interval", sf.scrape_interval_s, "seconds between scrapes")->capture_default_str();
  server->add_flag("--simulate-telemetry", sf.simulate_telemetry,
                   "feed simulated agent readings for every simulated GPU (implied by --demo)");
  server->add_option("--telemetry-interval", sf.telemetry_interval_s,
                     "seconds between simulated readings")->capture_default_str();
  server->add_option("--web", sf.web_root,
                     "serve the GPU Dashboard from this folder (web/dist, built by make web) at /");
  server->add_option("--kubernetes", sf.kubernetes,
                     "manage a Kubernetes cluster: NAME=KUBECONFIG[#CONTEXT], or NAME=in-cluster inside a pod "
                     "(repeatable)");
  server->add_option("--tls-cert", sf.tls_cert, "serve the API over HTTPS with this certificate (chain, PEM file)");
  server->add_option("--tls-key", sf.tls_key, "the TLS certificate's key (PEM file)");
  server->add_option("--requestheader-client-ca-file", sf.requestheader_client_ca,
                     "as an aggregated APIService: trust X-Remote-User/X-Remote-Group from clients whose certificate "
                     "this CA signed (kube-apiserver's front proxy; needs --tls-cert)");
  server->add_option("--requestheader-allowed-names", sf.requestheader_allowed_names,
                     "the front proxy certificate's common names to accept (comma-separated; default: any the CA "
                     "signed)")
      ->delimiter(',');
  server->add_option("--webhook-listen", sf.webhook_listen,
                     "serve the pod admission webhook (HTTPS) on HOST:PORT (docs/kubernetes.md)");
  server->add_option("--webhook-tls-cert", sf.webhook_cert, "the webhook's serving certificate (PEM file)");
  server->add_option("--webhook-tls-key", sf.webhook_key, "the webhook certificate's key (PEM file)");
  server->add_option("--replica-id", sf.replica_id,
                     "this replica's name in the leader lease, with a random suffix (default: the host name)");
  server->add_option("--advertise-url", sf.advertise_url,
                     "the URL other replicas reach this one at (default: from --listen)");
  server->add_option("--leader-elect-lease-duration", sf.lease_duration_s,
                     "seconds a leader's lease lasts; a crashed leader is replaced after about this long")
      ->capture_default_str();
  server->add_option("--leader-elect-renew-deadline", sf.renew_deadline_s,
                     "seconds a leader keeps leading without a successful renewal")
      ->capture_default_str();
  server->add_option("--leader-elect-retry-period", sf.retry_period_s,
                     "seconds between a candidate's tries and a leader's renewals")
      ->capture_default_str();
  server->add_option("--requests-per-second", sf.request_rates,
                     "ROLE=N: requests a second per token of a role (operator, member, agent or all; bursts of 2N; "
                     "0: no limit; default all=100; repeatable)");
  server->add_option("--telemetry-remote-write", sf.remote_write,
                     "Prometheus remote write: a receiver's URL, e.g. http://127.0.0.1:8428/api/v1/write (repeatable)");
  server->add_option("--telemetry-remote-write-queue", sf.remote_write_queue,
                     "samples each receiver's queue holds while it is slow or down; more are dropped and counted")
      ->capture_default_str();
  server->add_option("--telemetry-remote-write-shards", sf.remote_write_shards,
                     "queues sending to each receiver at once (a series always in the same one)")
      ->capture_default_str();
  server->add_option("--telemetry-query", sf.telemetry_query,
                     "read history older than the hot window back from this Prometheus query API, e.g. "
                     "http://127.0.0.1:8428 (VictoriaMetrics) or http://prometheus:9090");
  server->add_option("--telemetry-query-timeout", sf.telemetry_query_timeout_s,
                     "seconds a query to --telemetry-query may take before the answer is 503")
      ->capture_default_str();
  server->add_option("--telemetry-bearer-token-file", sf.telemetry_token_file,
                     "a file holding the bearer token sent to the remote-write receivers and the query API "
                     "(read at each request)");
  server->add_option("--telemetry-ca-file", sf.telemetry_ca_file,
                     "CA certificates (PEM) that https receivers and the query API are checked against "
                     "(default: the system's)");
  server->add_option("--telemetry-hot-window", sf.hot_window_s,
                     "seconds of raw samples kept in memory and answered from there")
      ->capture_default_str();
  server->add_option("--telemetry-bytes-per-second", sf.telemetry_rates,
                     "ROLE=N: telemetry body bytes a second per token of a role (default all=4194304; repeatable)");
  server->add_flag("--insecure-no-auth", sf.no_auth,
                   "serve without authentication: every caller is an operator (loopback only)");

  std::string what, name;
  CLI::App* get = app.add_subcommand("get", "list or show objects of any type the server serves");
  get->add_option("resource", what,
                  "a type the server serves, by name, short name or kind (gpuaas api-resources lists them): "
                  "clusters, nodes, gpus, specs, projects, pools, workloads, ...")
      ->required();
  get->add_option("name", name, "one object's name");
  get->add_option("-l,--selector", client.selector, "label selector, e.g. gpuaas.io/cluster=alpha");
  get->add_flag("-w,--watch", client.watch, "after the list, print each change as it happens (Ctrl-C ends)");
  add_client_flags(get, true);

  CLI::App* summary = app.add_subcommand("summary", "the fleet at a glance");
  add_client_flags(summary, true);

  CLI::App* api_resources = app.add_subcommand("api-resources", "the resource types the server serves, as `get` takes them");
  add_client_flags(api_resources, false);

  int64_t audit_after = 0;
  CLI::App* audit = app.add_subcommand("audit", "the audit log: who did what, oldest first (operators)");
  audit->add_option("--after", audit_after, "only events after this revision (paging: the last one printed)");
  add_client_flags(audit, true);

  CLI::App* catalog = app.add_subcommand("catalog", "the built-in GPU catalogue");
  catalog->require_subcommand(1);
  std::string catalog_output = "table";
  CLI::App* models = catalog->add_subcommand("models", "GPU models and their MIG profiles");
  models->add_option("-o,--output", catalog_output, "table, json or yaml")->capture_default_str();
  std::string model;
  CLI::App* layouts = catalog->add_subcommand("layouts", "every maximal legal MIG layout of a model");
  layouts->add_option("model", model, "catalogue model name, e.g. H200-SXM-141GB")->required();

  CLI::App* project = app.add_subcommand("project", "projects (tenants)");
  project->require_subcommand(1);
  gpuaas::cli::ProjectCreate pc;
  CLI::App* project_create = project->add_subcommand("create", "create a project (operators)");
  project_create->add_option("name", pc.name, "project name (a DNS label)")->required();
  project_create->add_option("--display-name", pc.display_name, "name for people");
  project_create->add_option("--quota-full", pc.quota_full, "MODEL=N: most whole GPUs of a model");
  project_create->add_option("--quota-mig-slices", pc.quota_mig_slices,
                             "MODEL=N: most MIG compute slices of a model");
  add_client_flags(project_create, true);
  CLI::App* project_list = project->add_subcommand("list", "list projects");
  add_client_flags(project_list, true);

  CLI::App* pool = app.add_subcommand("pool", "GPU pools: request, approve, release, delete");
  pool->require_subcommand(1);
  gpuaas::cli::PoolRequest pr;
  CLI::App* pool_request = pool->add_subcommand("request", "ask for a pool in a project");
  pool_request->add_option("name", pr.name, "pool name")->required();
  pool_request->add_option("-p,--project", pr.project, "the project")->required();
  pool_request->add_option("--item", pr.items,
                           "MODEL/PROFILE=COUNT, e.g. H200-SXM-141GB/3g.71gb=4 or H200-SXM-141GB/full=2")
      ->required();
  pool_request->add_option("--cluster", pr.cluster, "a cluster (default: any)");
  pool_request->add_option("--workload-type", pr.workload_type, "training, inference or development")
      ->capture_default_str();
  pool_request->add_option("--time-slicing", pr.time_slicing, "time-slicing replicas per device");
  pool_request->add_flag("--move-idle-instances", pr.move_idle_instances,
                         "let MIG defragmentation move the pool's instances that no workload uses");
  add_client_flags(pool_request, true);
  std::string pool_name, pool_project, reason;
  CLI::App* pool_list = pool->add_subcommand("list", "list pools (of one project with -p)");
  pool_list->add_option("-p,--project", pool_project, "the project");
  add_client_flags(pool_list, true);
  CLI::App* pool_get = pool->add_subcommand("get", "show a pool, its conditions and devices");
  CLI::App* pool_approve = pool->add_subcommand("approve", "approve a pool (operators)");
  CLI::App* pool_reject = pool->add_subcommand("reject", "reject a pool, for good (operators)");
  CLI::App* pool_release = pool->add_subcommand("release", "release a pool's devices (billing stops at once)");
  CLI::App* pool_delete = pool->add_subcommand(
      "delete", "withdraw a request not yet decided, or remove a rejected or released pool (its name is free again)");
  for (CLI::App* c : {pool_get, pool_approve, pool_reject, pool_release, pool_delete}) {
    c->add_option("name", pool_name, "pool name")->required();
    c->add_option("-p,--project", pool_project, "the project")->required();
    add_client_flags(c, true);
  }
  pool_approve->add_option("--reason", reason, "why");
  pool_reject->add_option("--reason", reason, "why (required)")->required();

  CLI::App* workload = app.add_subcommand("workload", "workloads on a pool's devices");
  workload->require_subcommand(1);
  gpuaas::cli::WorkloadRun wr;
  CLI::App* workload_run = workload->add_subcommand("run", "run a workload on a pool");
  workload_run->add_option("name", wr.name, "workload name")->required();
  workload_run->add_option("-p,--project", wr.project, "the project")->required();
  workload_run->add_option("--pool", wr.pool, "the project's pool (none: a preemptible workload borrows lent devices)");
  workload_run->add_option("--resource", wr.resource,
                           "RESOURCE[=COUNT], e.g. nvidia.com/mig-3g.71gb=1 or nvidia.com/gpu=2")->required();
  workload_run->add_option("--priority", wr.priority,
                           "inference (guaranteed), batch (preempted by inference) or preemptible (may borrow other "
                           "projects' idle devices, taken back on a deadline)")
      ->capture_default_str();
  workload_run->add_option("--model", wr.model, "a borrower's GPU model (catalogue name); default: any");
  workload_run->add_flag("--no-requeue", wr.no_requeue, "a reclaimed borrower ends Evicted instead of queueing again");
  add_client_flags(workload_run, true);
  std::string wl_project, wl_name;
  CLI::App* workload_list = workload->add_subcommand("list", "list workloads");
  add_client_flags(workload_list, true);
  CLI::App* workload_delete = workload->add_subcommand("delete", "end a workload and remove it (its run's Profile stays)");
  workload_delete->add_option("name", wl_name, "workload name")->required();
  workload_delete->add_option("-p,--project", wl_project, "the project")->required();
  add_client_flags(workload_delete, true);

  CLI::App* token = app.add_subcommand("token", "API tokens (operators)");
  token->require_subcommand(1);
  std::string token_user, token_role, token_project, token_id, token_cluster;
  std::vector<std::string> token_nodes;
  CLI::App* token_create = token->add_subcommand("create", "create a token; it is shown once");
  token_create->add_option("--user", token_user, "who the token is for")->required();
  token_create->add_option("--role", token_role, "operator, member or agent (node agents: push telemetry only)")->required();
  token_create->add_option("--project", token_project, "the member's project");
  token_create->add_option("--cluster", token_cluster, "the agent's cluster (implied by a node given as CLUSTER.NODE)");
  token_create->add_option("--node", token_nodes,
                           "the agent's node, as gpuaas get nodes prints it (CLUSTER.NODE) or as its cluster names it "
                           "(repeat for several); it pushes for their GPUs only");
  add_client_flags(token_create, true);
  CLI::App* token_list = token->add_subcommand("list", "list tokens (never their secrets)");
  add_client_flags(token_list, true);
  CLI::App* token_revoke = token->add_subcommand("revoke", "revoke a token; it stops working at once");
  token_revoke->add_option("id", token_id, "token id (the part before the dot)")->required();
  add_client_flags(token_revoke, false);

  CLI::App* clusters = app.add_subcommand("cluster", "clusters registered while the server runs (operators)");
  clusters->require_subcommand(1);
  gpuaas::cli::ClusterAdd ca;
  std::string cluster_name;
  CLI::App* cluster_add = clusters->add_subcommand("add", "register a Kubernetes cluster; the server follows it at once");
  cluster_add->add_option("name", ca.name, "the cluster's name in gpuaas")->required();
  cluster_add->add_option("--kubeconfig", ca.kubeconfig,
                          "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config); sent self-contained");
  cluster_add->add_option("--context", ca.context, "kubeconfig context (default: its current context)");
  cluster_add->add_option("--display-name", ca.display_name, "display name");
  cluster_add->add_option("--region", ca.region, "region");
  add_client_flags(cluster_add, true);
  CLI::App* cluster_list = clusters->add_subcommand("list", "every cluster: where it came from, whether it is reached");
  add_client_flags(cluster_list, true);
  CLI::App* cluster_remove =
      clusters->add_subcommand("remove", "stop managing a registered cluster (its pools must be released first)");
  cluster_remove->add_option("name", cluster_name, "the cluster")->required();
  add_client_flags(cluster_remove, false);

  CLI::App* defrag = app.add_subcommand("defrag", "MIG defragmentation: free instances that block larger profiles (operators)");
  defrag->require_subcommand(1);
  std::vector<std::string> defrag_gpus;
  CLI::App* defrag_plan = defrag->add_subcommand("plan", "the GPUs whose free instances could go, and what that frees");
  add_client_flags(defrag_plan, true);
  CLI::App* defrag_apply = defrag->add_subcommand("apply", "destroy those instances (never one a pool holds)");
  defrag_apply->add_option("--gpu", defrag_gpus, "only this GPU (repeatable; default: every GPU of the plan)");
  add_client_flags(defrag_apply, true);

  CLI::App* bill = app.add_subcommand("bill", "billing: invoices, exports, budgets, rate cards");
  bill->require_subcommand(1);
  std::string bill_project, bill_period, bill_format = "csv", bill_from, bill_to, bill_amount;
  bool bill_focus = false, bill_overrun = false;
  int64_t bill_hours = 0;
  CLI::App* bill_list = bill->add_subcommand("list", "invoices, one line each (every project you see, or -p)");
  bill_list->add_option("-p,--project", bill_project, "the project");
  bill_list->add_option("--period", bill_period, "a month, YYYY-MM (default: every month with usage)");
  add_client_flags(bill_list, true);
  CLI::App* bill_show = bill->add_subcommand("show", "an invoice with its lines");
  bill_show->add_option("project", bill_project, "the project")->required();
  bill_show->add_option("--period", bill_period, "a month, YYYY-MM (default: the running one)");
  add_client_flags(bill_show, true);
  CLI::App* bill_export = bill->add_subcommand(
      "export", "an invoice's lines as CSV or JSON, or FOCUS 1.2 CSV (of one project, or of every project without one)");
  bill_export->add_option("project", bill_project, "the project (with --focus: only its rows; without: required)");
  bill_export->add_option("--period", bill_period, "a month, YYYY-MM (default: the running one)");
  bill_export->add_option("--format", bill_format, "csv or json")->capture_default_str();
  bill_export->add_flag("--focus", bill_focus, "FinOps FOCUS 1.2 CSV (operators): of PROJECT, or of every project");
  bill_export->add_option("--from", bill_from, "with --focus: a month (YYYY-MM) or RFC 3339 time");
  bill_export->add_option("--to", bill_to, "with --focus: a month (YYYY-MM) or RFC 3339 time (exclusive)");
  add_client_flags(bill_export, false);
  CLI::App* bill_budget = bill->add_subcommand("budget", "set a project's monthly budget (operators; zero removes it)");
  bill_budget->add_option("project", bill_project, "the project")->required();
  bill_budget->add_option("--amount", bill_amount, "money a month, in the rate card's currency (e.g. 5000.00)");
  bill_budget->add_option("--gpu-hours", bill_hours, "allocated GPU-hours a month (a MIG instance counts its share)");
  bill_budget->add_flag("--allow-overrun", bill_overrun, "let pools pass the budget (alerts still fire)");
  add_client_flags(bill_budget, false);
  std::string bill_reason;
  CLI::App* bill_credit = bill->add_subcommand("credit", "issue a credit note against a closed month (operators)");
  bill_credit->add_option("project", bill_project, "the project")->required();
  bill_credit->add_option("--period", bill_period, "the month corrected, YYYY-MM")->required();
  bill_credit->add_option("--amount", bill_amount, "the amount given back, e.g. 120.00")->required();
  bill_credit->add_option("--reason", bill_reason, "why (required)")->required();
  add_client_flags(bill_credit, false);
  gpuaas::cli::RateCardCreate rc;
  CLI::App* bill_card = bill->add_subcommand("ratecard", "create a rate card (operators); cards are never edited");
  bill_card->add_option("name", rc.name, "card name")->required();
  bill_card->add_option("--price", rc.prices, "MODEL/PROFILE=AMOUNT per device-hour, e.g. H200-SXM-141GB/full=4.50")
      ->required();
  bill_card->add_option("--currency", rc.currency, "ISO 4217 code")->capture_default_str();
  bill_card->add_option("--from", rc.from, "when it takes effect, RFC 3339 (default: now)");
  bill_card->add_option("--mig-pricing", rc.mig_pricing, "compute, memory or explicit")->capture_default_str();
  add_client_flags(bill_card, false);

  gpuaas::cli::SimOptions so;
  std::string backup_db, backup_file;
  CLI::App* backup = app.add_subcommand(
      "backup", "write every object of a store at one revision to FILE (a consistent snapshot, while servers run)");
  backup->add_option("--db", backup_db, "the store: sqlite:PATH or postgresql://...")->required();
  backup->add_option("file", backup_file, "the backup file to write (replaced whole)")->required();
  CLI::App* restore = app.add_subcommand(
      "restore", "fill an empty store (either backend) from a backup FILE: the same objects at the same revision");
  restore->add_option("--db", backup_db, "the store to fill: sqlite:PATH or postgresql://... (must be empty)")->required();
  restore->add_option("file", backup_file, "the backup file to read")->required();
  CLI::App* sim = app.add_subcommand(
      "sim", "replay a cluster trace (Alibaba openb_* CSV) through the pool allocator and the FGD paper's policies");
  sim->add_option("--nodes", so.nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->required();
  sim->add_option("--pods", so.pods, "pod list CSV(s) (name,cpu_milli,memory_mib,num_gpu,gpu_milli,...)")
      ->required();
  sim->add_option("--policy", so.policy,
                  "random, dotprod, packing, bestfit, fgd (the FGD paper's), gpuaas (the pool allocator); "
                  "a comma-separated list, or all")
      ->capture_default_str();
  sim->add_option("--seeds", so.seeds, "seeds: N, A-B or a list")->capture_default_str();
  sim->add_option("--tune", so.tune, "sample pods until GPU requests reach this x capacity")
      ->capture_default_str();
  sim->add_option("--format", so.format, "table or csv (csv: the mean curve of one policy)")
      ->capture_default_str();
  sim->add_option("--mode", so.mode,
                  "arrival (the FGD protocol), churn (creation/deletion times), mig (arrival on MIG "
                  "through the pool allocator), mig-churn (churn on MIG, without and with defragmentation) or "
                  "lending (dedicated pools that lend idle GPUs to preemptible work, without and with lending)")
      ->capture_default_str();
  sim->add_option("--speedup", so.speedup, "churn, mig-churn, lending: arrivals this many times faster (load)")
      ->capture_default_str();
  sim->add_option("--projects", so.projects, "lending: projects the pods are split over (a pool each)")
      ->capture_default_str();
  sim->add_option("--borrow-share", so.borrow_share, "lending: the share of pods that are preemptible borrowers")
      ->capture_default_str();
  sim->add_option("--idle-after", so.idle_after, "lending: seconds a GPU is idle before it is lent")
      ->capture_default_str();
  sim->add_option("--grace", so.grace, "lending: seconds a borrower has to leave when reclaimed")
      ->capture_default_str();
  sim->add_option("--mig-model", so.mig_model, "the MIG model of --mode mig and mig-churn")->capture_default_str();
  sim->add_option("--jobs", so.jobs, "threads (0: one per core)")->capture_default_str();

  bool alerts_all = false;
  CLI::App* alerts = app.add_subcommand("alerts", "GPU health alerts with NVIDIA's recommended action");
  alerts->add_flag("--all", alerts_all, "include resolved and informational alerts");
  add_client_flags(alerts, true);
  std::string series, since = "1h";
  int64_t step = 60;
  CLI::App* metrics = app.add_subcommand("metrics", "one series: SCOPE:ID:METRIC, e.g. pool:vision/train:utilization");
  metrics->add_option("series", series, "gpu:GPU-…:power_w, mig:GPU-…/1:sm_active, pool:PROJECT/POOL:utilization, "
                                        "project:NAME:used_gpus, cluster:NAME:allocated_gpus, workload:PROJECT/NAME:utilization")
      ->required();
  metrics->add_option("--since", since, "how far back: 30m, 6h, 7d")->capture_default_str();
  metrics->add_option("--step", step, "seconds a point")->capture_default_str();
  add_client_flags(metrics, true);

  gpuaas::agent::AgentOptions ao;
  if (const char* env = std::getenv("GPUAAS_TOKEN")) ao.token = env;
  CLI::App* agent = app.add_subcommand(
      "agent", "the node agent: read GPUs through NVML (or simulate them), push to the server, serve /metrics");
  agent->add_flag("--simulate", ao.simulate, "simulate GPUs instead of reading NVML");
  agent->add_option("--gpus", ao.simulated_gpus, "simulated H200 GPUs when not taken from --server")
      ->capture_default_str();
  agent->add_option("--inject", ao.faults,
                    "simulated fault, repeatable: xid=79@GPU, dbe@GPU, hot@GPU, remap-fail@GPU, reset@GPU "
                    "(GPU: UUID or index; +30s delays it)");
  agent->add_option("--node", ao.node, "node name (default: the host name; simulating from --server: "
                                       "that node's GPUs, all nodes when empty)");
  agent->add_option("--server,-s", ao.server, "gpuaas server URL to push to (none: do not push)");
  agent->add_option("--token", ao.token, "agent or operator token (env GPUAAS_TOKEN)");
  agent->add_option("--interval", ao.interval_s, "seconds between readings")->capture_default_str();
  agent->add_option("--listen", ao.listen, "HOST:PORT to serve dcgm-exporter-format /metrics on");
  agent->add_flag("--once", ao.once, "read once, print the report and exit");
  agent->add_option("-o,--output", ao.output, "with --once: json or text (dcgm-exporter format)")
      ->capture_default_str();
  agent->add_option("--nvml-library", ao.nvml_library, "path of libnvidia-ml.so.1 (default: the loader's search)");
  agent->add_option("--seed", ao.seed, "seed of the simulation")->capture_default_str();
  agent->add_flag("--nvidia-smi", ao.nvidia_smi, "read `nvidia-smi -q -x` instead of loading NVML");
  agent->add_option("--nvidia-smi-xml", ao.nvidia_smi_xml, "read a saved `nvidia-smi -q -x` capture");
  agent->add_option("--pod-resources", ao.pod_resources,
                    "the kubelet's PodResources socket (in a DaemonSet: "
                    "/var/lib/kubelet/pod-resources/kubelet.sock): report the pods holding each device");

  CLI::App* version = app.add_subcommand("version", "client and server versions");
  add_client_flags(version, false);

  if (int code = UnknownCommand(app, argc, argv); code != 0) return code;
  CLI11_PARSE(app, argc, argv);

  if (server->parsed()) return gpuaas::exe::RunServer(sf, GPUAAS_VERSION);
  if (agent->parsed()) return gpuaas::agent::RunAgent(ao, std::cout, std::cerr);
  if (alerts->parsed()) return gpuaas::cli::AlertsCmd(client, alerts_all, std::cout, std::cerr);
  if (bill_list->parsed()) return gpuaas::cli::BillListCmd(client, bill_project, bill_period, std::cout, std::cerr);
  if (bill_show->parsed()) return gpuaas::cli::BillShowCmd(client, bill_project, bill_period, std::cout, std::cerr);
  if (bill_export->parsed()) {
    return gpuaas::cli::BillExportCmd(client, bill_project, bill_period, bill_format, bill_focus, bill_from, bill_to,
                                      std::cout, std::cerr);
  }
  if (bill_budget->parsed()) {
    return gpuaas::cli::BillBudgetCmd(client, bill_project, bill_amount, bill_hours, bill_overrun, std::cout, std::cerr);
  }
  if (bill_card->parsed()) return gpuaas::cli::RateCardCreateCmd(client, rc, std::cout, std::cerr);
  if (bill_credit->parsed()) {
    return gpuaas::cli::BillCreditCmd(client, bill_project, bill_period, bill_amount, bill_reason, std::cout, std::cerr);
  }
  if (metrics->parsed()) return gpuaas::cli::MetricsCmd(client, series, since, step, std::cout, std::cerr);
  if (get->parsed()) return gpuaas::cli::Get(client, what, name, std::cout, std::cerr);
  if (summary->parsed()) return gpuaas::cli::Summary(client, std::cout, std::cerr);
  if (api_resources->parsed()) return gpuaas::cli::ApiResourcesCmd(client, std::cout, std::cerr);
  if (audit->parsed()) return gpuaas::cli::AuditCmd(client, audit_after, std::cout, std::cerr);
  if (models->parsed()) return gpuaas::cli::CatalogModels(catalog_output, std::cout, std::cerr);
  if (layouts->parsed()) return gpuaas::cli::CatalogLayouts(model, std::cout, std::cerr);
  if (backup->parsed()) return gpuaas::cli::Backup(backup_db, backup_file, std::cout, std::cerr);
  if (restore->parsed()) return gpuaas::cli::Restore(backup_db, backup_file, std::cout, std::cerr);
  if (sim->parsed()) return gpuaas::cli::Sim(so, std::cout, std::cerr);
  if (version->parsed()) return gpuaas::cli::Version(client, GPUAAS_VERSION, std::cout, std::cerr);
  using gpuaas::cli::PoolApproveCmd;
  if (token_create->parsed()) {
    return gpuaas::cli::TokenCreateCmd(client, token_user, token_role, token_project, token_cluster, token_nodes, std::cout,
                                       std::cerr);
  }
  if (token_list->parsed()) return gpuaas::cli::TokenListCmd(client, std::cout, std::cerr);
  if (cluster_add->parsed()) return gpuaas::cli::ClusterAddCmd(client, ca, std::cout, std::cerr);
  if (cluster_list->parsed()) return gpuaas::cli::ClusterListCmd(client, std::cout, std::cerr);
  if (defrag_plan->parsed()) return gpuaas::cli::DefragPlanCmd(client, std::cout, std::cerr);
  if (defrag_apply->parsed()) return gpuaas::cli::DefragApplyCmd(client, defrag_gpus, std::cout, std::cerr);
  if (cluster_remove->parsed()) return gpuaas::cli::ClusterRemoveCmd(client, cluster_name, std::cout, std::cerr);
  if (workload_run->parsed()) return gpuaas::cli::WorkloadRunCmd(client, wr, std::cout, std::cerr);
  if (workload_list->parsed()) return gpuaas::cli::Get(client, "workloads", "", std::cout, std::cerr);
  if (workload_delete->parsed()) {
    return gpuaas::cli::WorkloadDeleteCmd(client, wl_project, wl_name, std::cout, std::cerr);
  }
  if (token_revoke->parsed()) return gpuaas::cli::TokenRevokeCmd(client, token_id, std::cout, std::cerr);
  if (project_create->parsed()) return gpuaas::cli::ProjectCreateCmd(client, pc, std::cout, std::cerr);
  if (project_list->parsed()) return gpuaas::cli::Get(client, "projects", "", std::cout, std::cerr);
  if (pool_request->parsed()) return gpuaas::cli::PoolRequestCmd(client, pr, std::cout, std::cerr);
  if (pool_list->parsed()) return gpuaas::cli::PoolGetCmd(client, pool_project, "", std::cout, std::cerr);
  if (pool_get->parsed()) return gpuaas::cli::PoolGetCmd(client, pool_project, pool_name, std::cout, std::cerr);
  if (pool_approve->parsed()) return PoolApproveCmd(client, pool_project, pool_name, true, reason, std::cout, std::cerr);
  if (pool_reject->parsed()) return PoolApproveCmd(client, pool_project, pool_name, false, reason, std::cout, std::cerr);
  if (pool_release->parsed()) return gpuaas::cli::PoolReleaseCmd(client, pool_project, pool_name, std::cout, std::cerr);
  if (pool_delete->parsed()) return gpuaas::cli::PoolDeleteCmd(client, pool_project, pool_name, std::cout, std::cerr);
  return 2;
}
