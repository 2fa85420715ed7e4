#include "exe/server_flags.h"

#include <fstream>
#include <optional>
#include <string_view>
#include <utility>

#include "common/strings.h"
#include "fmt/format.h"

namespace gpuaas::exe {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// "HOST:PORT" (an IPv6 host in brackets) -> {host, port}, or nullopt.
std::optional<std::pair<std::string, int>> HostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::optional<int64_t> port = ParseInt(listen.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) return std::nullopt;
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::make_pair(host, static_cast<int>(*port));
}

}  // namespace

absl::StatusOr<ServerPlan> PlanServer(const ServerFlags& flags) {
  ServerPlan plan;
  const std::optional<std::pair<std::string, int>> listen = HostPort(flags.listen);
  if (!listen) return absl::InvalidArgumentError("--listen: expected HOST:PORT, e.g. 127.0.0.1:8080");
  plan.host = listen->first;
  plan.port = listen->second;
  plan.tls = !flags.tls_cert.empty() || !flags.tls_key.empty();
  if (plan.tls && (flags.tls_cert.empty() || flags.tls_key.empty())) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!flags.requestheader_client_ca.empty() && !plan.tls) {
    return absl::InvalidArgumentError(
        "--requestheader-client-ca-file needs HTTPS: the front proxy's certificate is checked in the TLS handshake "
        "(give --tls-cert and --tls-key)");
  }
  if (!IsLoopback(plan.host) && !flags.allow_remote && !plan.tls) {
    return absl::InvalidArgumentError(fmt::format(
        "refusing to listen on {}: plain HTTP serves loopback only; give the API a certificate (--tls-cert, "
        "--tls-key), or pass --allow-insecure-remote to listen there anyway",
        flags.listen));
  }
  if (flags.no_auth && !IsLoopback(plan.host)) {
    return absl::InvalidArgumentError("--insecure-no-auth serves loopback only");
  }
  const int sources = (flags.demo ? 1 : 0) + (flags.fleet_file.empty() ? 0 : 1) + (flags.synthetic_gpus > 0 ? 1 : 0);
  if (sources > 1) return absl::InvalidArgumentError("choose one of --demo, --fleet FILE and --synthetic-gpus N");
  if (flags.demo) {
    plan.fleet = cluster::simulated::DemoFleet();
  } else if (!flags.fleet_file.empty()) {
    absl::StatusOr<cluster::simulated::FleetSpec> f = cluster::simulated::LoadFleetFile(flags.fleet_file);
    if (!f.ok()) return absl::InvalidArgumentError(f.status().message());
    plan.fleet = *std::move(f);
  } else if (flags.synthetic_gpus > 0) {
    plan.fleet = cluster::simulated::SyntheticFleet(flags.synthetic_gpus, 2);
  }
  if (!flags.webhook_listen.empty()) {
    const std::optional<std::pair<std::string, int>> webhook = HostPort(flags.webhook_listen);
    if (!webhook || flags.webhook_cert.empty() || flags.webhook_key.empty()) {
      return absl::InvalidArgumentError("--webhook-listen HOST:PORT needs --webhook-tls-cert and --webhook-tls-key");
    }
    plan.webhook_host = webhook->first;
    plan.webhook_port = webhook->second;
  }
  for (const std::string& url : flags.remote_write) {
    const bool http = url.starts_with("http://") || url.starts_with("https://");
    const size_t host_at = url.find("://") + 3;
    const size_t path_at = url.find('/', host_at);
    if (!http || path_at == std::string::npos || path_at == host_at) {
      return absl::InvalidArgumentError(fmt::format(
          "--telemetry-remote-write {}: expected http(s)://HOST[:PORT]/PATH, e.g. http://127.0.0.1:8428/api/v1/write", url));
    }
  }
  if (!flags.telemetry_query.empty()) {
    const std::string& url = flags.telemetry_query;
    const bool http = url.starts_with("http://") || url.starts_with("https://");
    if (!http || url.size() == url.find("://") + 3 || url.find('?') != std::string::npos) {
      return absl::InvalidArgumentError(fmt::format(
          "--telemetry-query {}: expected the query API's base, http(s)://HOST[:PORT][/PATH], e.g. "
          "http://127.0.0.1:8428 or http://prometheus:9090",
          url));
    }
  }
  for (const auto& [flag, file] : {std::pair<std::string_view, const std::string&>{"--telemetry-bearer-token-file",
                                                                                   flags.telemetry_token_file},
                                   {"--telemetry-ca-file", flags.telemetry_ca_file}}) {
    if (file.empty()) continue;
    if (!std::ifstream(file).good()) return absl::InvalidArgumentError(fmt::format("{} {}: cannot read it", flag, file));
  }
  if (flags.remote_write_queue < 1000) {
    return absl::InvalidArgumentError("--telemetry-remote-write-queue: at least 1000 samples");
  }
  if (flags.remote_write_shards < 1 || flags.remote_write_shards > 64) {
    return absl::InvalidArgumentError("--telemetry-remote-write-shards: between 1 and 64");
  }
  if (!(flags.telemetry_query_timeout_s >= 0.1 && flags.telemetry_query_timeout_s <= 120)) {
    return absl::InvalidArgumentError("--telemetry-query-timeout: between 0.1 and 120 seconds");
  }
  if (flags.hot_window_s < 600 || flags.hot_window_s > 7 * 86400) {
    return absl::InvalidArgumentError("--telemetry-hot-window: between 600 seconds (10 minutes) and 604800 (7 days)");
  }
  return plan;
}

}  // namespace gpuaas::exe
