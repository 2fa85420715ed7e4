#include "cli/commands.h"

#include <optional>
#include <cstdlib>
#include <string>

#include "cli/client.h"
#include "cli/output.h"
#include "cluster/kubernetes/client_config.h"
#include "common/files.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Escape;
using internal::Fail;
using internal::Fetch;
using internal::PrintStructured;
using internal::Send;
using nlohmann::json;

namespace {

// The kubeconfig kubectl would use: $KUBECONFIG's first file, else ~/.kube/config.
std::string DefaultKubeconfig() {
  if (const char* k = std::getenv("KUBECONFIG"); k != nullptr && *k != '\0') {
    const std::string list(k);
    return list.substr(0, list.find(':'));
  }
  const char* home = std::getenv("HOME");
  return std::string(home == nullptr ? "" : home) + "/.kube/config";
}

}  // namespace

int ClusterAddCmd(const ClientOptions& o, const ClusterAdd& a, std::ostream& out, std::ostream& err) {
  const std::string path = a.kubeconfig.empty() ? DefaultKubeconfig() : a.kubeconfig;
  absl::StatusOr<cluster::kubernetes::ClientConfig> config =
      cluster::kubernetes::ParseKubeconfigFile(path, a.context, ReadWholeFile);
  if (!config.ok()) return Fail(err, config.status());
  json j = {{"name", a.name},
            {"kubeconfig", cluster::kubernetes::SelfContainedKubeconfig(*config)},
            {"context", config->context}};
  if (!a.display_name.empty()) j["displayName"] = a.display_name;
  if (!a.region.empty()) j["region"] = a.region;
  absl::StatusOr<std::string> body = Send(o, "POST", "/api/v1/clusters", j.dump());
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  out << "cluster " << a.name << " registered (" << config->server << ", context " << config->context
      << "); `gpuaas cluster list` shows when it is reached\n";
  return 0;
}

int ClusterListCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/clusters");
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  json j = json::parse(*body, nullptr, false);
  Table t({"NAME", "DRIVER", "SOURCE", "SERVER", "REACHABLE", "NODES", "GPUS", "AGE"});
  for (const json& x : j.value("items", json::array())) {
    std::string reachable = "-";
    if (x.contains("reachable")) reachable = x.value("reachable", false) ? "True" : "False";
    if (!x.value("connected", false)) reachable = "not connected";
    t.Add({x.value("name", ""), x.value("driver", ""), x.value("source", ""),
           x.value("server", "").empty() ? "-" : x.value("server", ""), reachable,
           x.contains("nodes") ? std::to_string(x.value("nodes", 0)) : "-",
           x.contains("gpus") ? std::to_string(x.value("gpus", 0)) : "-",
           x.contains("registered") ? Age(x.value("registered", "")) : "-"});
  }
  t.Print(out);
  for (const json& x : j.value("items", json::array())) {
    if (x.contains("message")) err << "cluster " << x.value("name", "") << ": " << x.value("message", "") << "\n";
  }
  return 0;
}

int ClusterRemoveCmd(const ClientOptions& o, const std::string& name, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Send(o, "DELETE", "/api/v1/clusters/" + Escape(name), "");
  if (!body.ok()) return Fail(err, body.status());
  out << "cluster " << name << " removed; its inventory is deleted\n";
  return 0;
}

}  // namespace gpuaas::cli
