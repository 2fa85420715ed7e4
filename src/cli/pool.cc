#include "cli/commands.h"

#include <optional>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/output.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Escape;
using internal::Fail;
using internal::Fetch;
using internal::PrintDoc;
using internal::PrintTable;
using internal::PrintWritten;
using internal::Send;
using nlohmann::json;

namespace {

std::string PoolPath(const std::string& project, const std::string& name) {
  return fmt::format("/apis/gpuaas.io/v1/namespaces/{}/gpupools/{}", Escape(project), Escape(name));
}

}  // namespace

int PoolRequestCmd(const ClientOptions& o, const PoolRequest& r, std::ostream& out, std::ostream& err) {
  json items = json::array();
  for (const std::string& spec : r.items) {
    // MODEL/PROFILE=COUNT
    const size_t slash = spec.find('/'), eq = spec.rfind('=');
    std::optional<int64_t> n = eq == std::string::npos ? std::nullopt : ParseInt(spec.substr(eq + 1));
    if (slash == std::string::npos || eq == std::string::npos || eq < slash || !n) {
      return Fail(err, absl::InvalidArgumentError(fmt::format(
                           "--item \"{}\": expected MODEL/PROFILE=COUNT, e.g. H200-SXM-141GB/3g.71gb=4 "
                           "or H200-SXM-141GB/full=2", spec)));
    }
    items.push_back({{"model", spec.substr(0, slash)}, {"profile", spec.substr(slash + 1, eq - slash - 1)},
                     {"count", *n}});
  }
  if (items.empty()) return Fail(err, absl::InvalidArgumentError("at least one --item is required"));
  json j = {{"apiVersion", "gpuaas.io/v1"},
            {"kind", "GpuPool"},
            {"metadata", {{"name", r.name}, {"namespace", r.project}}},
            {"spec", {{"items", items}, {"workloadType", r.workload_type}}}};
  if (!r.cluster.empty()) j["spec"]["cluster"] = r.cluster;
  if (r.time_slicing > 0) j["spec"]["sharing"] = {{"timeSlicing", {{"replicas", r.time_slicing}}}};
  if (r.move_idle_instances) j["spec"]["moveIdleInstances"] = true;
  return PrintWritten(o, Send(o, "POST", fmt::format("/apis/gpuaas.io/v1/namespaces/{}/gpupools", Escape(r.project)), j.dump()),
                      "requested", out, err);
}

int PoolApproveCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                   bool approve, const std::string& reason, std::ostream& out, std::ostream& err) {
  json j = {{"approve", approve}, {"reason", reason}};
  return PrintWritten(o, Send(o, "PUT", PoolPath(project, name) + "/approval", j.dump()),
                      approve ? "approved" : "rejected", out, err);
}

int PoolReleaseCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                   std::ostream& out, std::ostream& err) {
  return PrintWritten(o, Send(o, "POST", PoolPath(project, name) + "/release", ""), "releasing", out, err);
}

int PoolDeleteCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                  std::ostream& out, std::ostream& err) {
  const absl::StatusOr<std::string> body = Send(o, "DELETE", PoolPath(project, name), "");
  std::string verb = "deleted";
  if (body.ok()) {
    // A pool in force is released by its delete and kept until its devices are free.
    const json j = json::parse(*body, nullptr, false);
    if (j.is_object() && j.contains("metadata") && j["metadata"].contains("deletionTimestamp")) {
      verb = "releasing (billing ended now); deleted once its devices are free";
    }
  }
  return PrintWritten(o, body, verb, out, err);
}

int PoolGetCmd(const ClientOptions& o, const std::string& project, const std::string& name,
               std::ostream& out, std::ostream& err) {
  absl::StatusOr<Format> format = ParseFormat(o.output);
  if (!format.ok()) return Fail(err, format.status());
  std::string path = project.empty() ? "/apis/gpuaas.io/v1/gpupools"
                                     : fmt::format("/apis/gpuaas.io/v1/namespaces/{}/gpupools", Escape(project));
  if (!name.empty()) {
    if (project.empty()) return Fail(err, absl::InvalidArgumentError("-p PROJECT is required with a pool name"));
    path += "/" + Escape(name);
  }
  absl::StatusOr<std::string> body = Fetch(o, path);
  if (!body.ok()) return Fail(err, body.status());
  if (*format != Format::kTable) {
    absl::Status s = PrintDoc(*body, *format, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  json j = json::parse(*body, nullptr, false);
  std::vector<json> items;
  if (name.empty()) {
    for (json& i : j["items"]) items.push_back(std::move(i));
  } else {
    items.push_back(j);
  }
  if (items.empty()) {
    err << "No resources found.\n";
    return 0;
  }
  PrintTable("gpupools", items, out);
  if (!name.empty()) {
    // One pool: its conditions and devices too, as kubectl describe would.
    out << "\nConditions:\n";
    Table c({"TYPE", "STATUS", "REASON", "MESSAGE"});
    for (const json& x : j["status"].value("conditions", json::array())) {
      c.Add({x.value("type", ""), x.value("status", ""), x.value("reason", ""), x.value("message", "")});
    }
    c.Print(out);
    out << "\nDevices:\n";
    Table d({"CLUSTER", "NODE", "GPU", "PROFILE", "START", "INSTANCE"});
    for (const json& x : j["status"].value("allocation", json::array())) {
      d.Add({x.value("cluster", ""), x.value("node", ""), x.value("gpuUUID", ""), x.value("profile", ""),
             x.contains("placement") ? std::to_string(x["placement"].value("start", 0)) : "-",
             x.value("instanceUUID", "-")});
    }
    d.Print(out);
  }
  return 0;
}

}  // namespace gpuaas::cli
