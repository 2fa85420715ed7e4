#include "cli/commands.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <map>

#include "billing/billing.h"
#include "catalog/catalog.h"
#include "cli/output.h"
#include "cluster/kubernetes/client_config.h"
#include "common/files.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/problem.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/columns.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {
namespace {

using nlohmann::json;

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

absl::StatusOr<std::string> Send(const ClientOptions& o, const std::string& method,
                                 const std::string& path, const std::string& body);

// An error answer as the Status it stands for (common/problem.h), worded as kubectl words it, so
// that the code keeps its meaning: a 409 Conflict is Aborted (the object changed meanwhile: run
// it again), a 503 Unavailable (wait and retry), a 403 QuotaExceeded ResourceExhausted.
absl::Status ServerError(int http_status, const std::string& body) {
  const json p = json::parse(body, nullptr, false);
  const std::string reason = p.is_object() ? p.value("reason", "") : "";
  std::string detail = p.is_object() ? p.value("detail", p.value("message", body)) : body;
  if (absl::IsAborted(StatusFromProblem(http_status, reason, ""))) {
    detail += " (it changed meanwhile: run the command again)";
  }
  return StatusFromProblem(
      http_status, reason,
      fmt::format("Error from server ({}): {}", reason.empty() ? std::to_string(http_status) : reason, detail));
}

// GETs `path` from the server; non-2xx answers become errors carrying the server's reason.
absl::StatusOr<std::string> Fetch(const ClientOptions& o, const std::string& path) {
  return Send(o, "GET", path, "");
}

// The server's base URL as --server or GPUAAS_SERVER gives it, trailing slashes dropped;
// InvalidArgument, saying the form expected, for anything but http(s)://HOST[:PORT].
absl::StatusOr<std::string> BaseUrl(const std::string& given) {
  std::string url = given;
  while (url.size() > 1 && url.back() == '/') url.pop_back();
  const size_t scheme = url.find("://");
  const bool ok = scheme != std::string::npos && (url.compare(0, scheme, "http") == 0 || url.compare(0, scheme, "https") == 0) &&
                  scheme + 3 < url.size() && url.find('/', scheme + 3) == std::string::npos;
  if (!ok) {
    return absl::InvalidArgumentError(fmt::format(
        "--server (or GPUAAS_SERVER) \"{}\" is not a server address: give http://HOST:PORT or https://HOST:PORT, "
        "e.g. http://127.0.0.1:8080",
        given));
  }
  return url;
}

absl::StatusOr<std::string> Send(const ClientOptions& o, const std::string& method,
                                 const std::string& path, const std::string& body) {
  ASSIGN_OR_RETURN(const std::string base, BaseUrl(o.server));
  httplib::Client client(base);
  if (!client.is_valid()) {
    return absl::InvalidArgumentError(fmt::format(
        "--server \"{}\" is not a valid URL: give http://HOST:PORT or https://HOST:PORT", o.server));
  }
  client.set_connection_timeout(5);
  if (!o.token.empty()) client.set_bearer_token_auth(o.token);
  client.set_read_timeout(60);
  httplib::Result r = method == "POST"     ? client.Post(path, body, "application/json")
                     : method == "PUT"    ? client.Put(path, body, "application/json")
                     : method == "DELETE" ? client.Delete(path)
                                          : client.Get(path);
  if (!r && r.error() == httplib::Error::SSLServerVerification) {
    return absl::UnavailableError(fmt::format(
        "the server at {} gave a certificate this machine does not trust; point SSL_CERT_FILE at the CA that signed "
        "it (for the demo's own: the --tls-cert file)",
        base));
  }
  if (!r) {
    return absl::UnavailableError(fmt::format(
        "cannot reach the gpuaas server at {} ({}); is `gpuaas server` running there? Give its address with "
        "--server URL or GPUAAS_SERVER",
        base, httplib::to_string(r.error())));
  }
  // What the server warns of (a write it took but questions, as kube-apiserver warns), as kubectl
  // prints it.
  if (o.warnings != nullptr) {
    for (size_t i = 0, n = r->get_header_value_count("Warning"); i < n; ++i) {
      std::string w = r->get_header_value("Warning", i);
      // RFC 7234 form: 299 - "text"
      if (const size_t q = w.find('"'); q != std::string::npos && w.size() > q + 1 && w.back() == '"') {
        w = w.substr(q + 1, w.size() - q - 2);
      }
      *o.warnings << "Warning: " << w << "\n";
    }
  }
  if (r->status >= 200 && r->status < 300) return r->body;
  if (r->status == 401) {
    return absl::UnauthenticatedError(
        "Error from server (Unauthorized): give a valid token with --token or GPUAAS_TOKEN");
  }
  return ServerError(r->status, r->body);
}

int Fail(std::ostream& err, const absl::Status& s) {
  err << s.message() << "\n";
  return 1;
}

// A resource type as the server's discovery document (/apis/gpuaas.io/v1) lists it: the one list
// of what `gpuaas get` takes, as kubectl reads it.
struct ServedType {
  std::string plural;
  std::string singular;
  std::string kind;
  bool namespaced = false;
  std::vector<std::string> short_names;
  std::vector<std::string> verbs;
};

absl::StatusOr<std::vector<ServedType>> ServedTypes(const ClientOptions& o) {
  ASSIGN_OR_RETURN(const std::string body, Fetch(o, "/apis/gpuaas.io/v1"));
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("resources") || !j["resources"].is_array()) {
    return absl::InternalError("the server's discovery document (/apis/gpuaas.io/v1) lists no resources");
  }
  std::vector<ServedType> out;
  for (const json& r : j["resources"]) {
    if (!r.is_object()) continue;
    ServedType t{r.value("name", ""), r.value("singularName", ""), r.value("kind", ""), r.value("namespaced", false),
                 {}, {}};
    for (const json& n : r.value("shortNames", json::array())) {
      if (n.is_string()) t.short_names.push_back(n.get<std::string>());
    }
    for (const json& v : r.value("verbs", json::array())) {
      if (v.is_string()) t.verbs.push_back(v.get<std::string>());
    }
    if (!t.plural.empty()) out.push_back(std::move(t));
  }
  return out;
}

// The names operators use for the fleet's kinds, beside the API's: nodes are NodeCapacities,
// GPUs GpuCapacities, specs SpecAndCounts, pools GpuPools. (Not short names in discovery, where
// "nodes" would shadow Kubernetes' own Nodes behind the aggregation layer.)
const std::map<std::string, std::string>& FleetAliases() {
  static const std::map<std::string, std::string> kAliases = {
      {"nodes", "nodecapacities"}, {"node", "nodecapacities"}, {"gpus", "gpucapacities"},
      {"specs", "specandcounts"},  {"spec", "specandcounts"},  {"pools", "gpupools"}};
  return kAliases;
}

// The served type `what` names: its plural, singular, a short name, its kind, or a fleet alias,
// in any letter case. NotFound naming every type the server serves (and the closest) otherwise.
absl::StatusOr<ServedType> ResolveType(const ClientOptions& o, const std::string& what) {
  ASSIGN_OR_RETURN(std::vector<ServedType> types, ServedTypes(o));
  std::string want = ToLower(what);
  if (auto a = FleetAliases().find(want); a != FleetAliases().end()) want = a->second;
  std::vector<std::string> names;
  for (const ServedType& t : types) {
    if (t.plural == want || t.singular == want || ToLower(t.kind) == want ||
        std::find(t.short_names.begin(), t.short_names.end(), want) != t.short_names.end()) {
      return t;
    }
    names.push_back(t.plural);
  }
  for (const auto& [alias, plural] : FleetAliases()) names.push_back(alias);
  const std::string close = ClosestWord(what, names);
  std::vector<std::string> listed;
  for (const ServedType& t : types) listed.push_back(t.plural);
  return absl::NotFoundError(fmt::format(
      "unknown resource type \"{}\"{}; the server serves {} (and nodes, gpus, specs, pools for the fleet's "
      "kinds); gpuaas api-resources lists them with their short names",
      what, close.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", close), fmt::join(listed, ", ")));
}

absl::Status PrintDoc(const std::string& body, Format f, std::ostream& out) {
  absl::StatusOr<std::string> text = f == Format::kYaml ? JsonToYaml(body) : PrettyJson(body);
  if (!text.ok()) return text.status();
  out << *text;
  return absl::OkStatus();
}

// The kind's columns (model/columns.h, the same the API's Tables carry), aligned.
void PrintTable(const std::string& plural, const std::vector<json>& items, std::ostream& out) {
  Table t(model::Columns(plural));
  const Time now = RealClock::Get().Now();
  for (const json& item : items) {
    absl::StatusOr<std::vector<std::string>> row = model::Row(plural, item, now);
    if (row.ok()) t.Add(std::move(*row));
  }
  t.Print(out);
}

// Follows a list route's watch from `revision`, calling `on_event` for each ADDED, MODIFIED or
// DELETED event, and resuming after the server ends a watch. Returns only on an error.
absl::Status Watch(const ClientOptions& o, const std::string& base, std::string revision,
                   const std::function<void(const nlohmann::json&)>& on_event);

}  // namespace

int Get(const ClientOptions& o, const std::string& what, const std::string& name, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<Format> format = ParseFormat(o.output);
  if (!format.ok()) return Fail(err, format.status());
  absl::StatusOr<ServedType> r = ResolveType(o, what);
  if (!r.ok()) return Fail(err, r.status());
  const std::string base = fmt::format("/apis/gpuaas.io/v1/{}", r->plural);
  std::vector<json> items;
  std::string list_revision;
  if (o.watch && !name.empty()) {
    return Fail(err, absl::InvalidArgumentError("--watch follows a list: give no NAME (use -l to narrow it)"));
  }
  if (!name.empty()) {
    absl::StatusOr<std::string> body = Fetch(o, base + "/" + Escape(name));
    if (!body.ok()) return Fail(err, body.status());
    if (*format != Format::kTable) {
      absl::Status s = PrintDoc(*body, *format, out);
      return s.ok() ? 0 : Fail(err, s);
    }
    items.push_back(json::parse(*body, nullptr, false));
  } else {
    // Page through the list as kubectl does, 500 at a time.
    std::string token;
    do {
      std::string path = base + "?limit=500";
      if (!o.selector.empty()) path += "&labelSelector=" + Escape(o.selector);
      if (!token.empty()) path += "&continue=" + Escape(token);
      absl::StatusOr<std::string> body = Fetch(o, path);
      if (!body.ok()) return Fail(err, body.status());
      json page = json::parse(*body, nullptr, false);
      if (!page.is_object()) return Fail(err, absl::InternalError("server sent invalid JSON"));
      for (json& item : page["items"]) items.push_back(std::move(item));
      if (list_revision.empty()) list_revision = page["metadata"].value("resourceVersion", "");
      token = page["metadata"].value("continue", "");
    } while (!token.empty());
    if (*format != Format::kTable && !o.watch) {
      json list = {{"apiVersion", "gpuaas.io/v1"}, {"kind", r->kind + "List"},
                   {"items", items}};
      absl::Status s = PrintDoc(list.dump(), *format, out);
      return s.ok() ? 0 : Fail(err, s);
    }
    if (items.empty() && !o.watch) {
      err << "No resources found.\n";
      return 0;
    }
  }
  if (!o.watch) {
    PrintTable(r->plural, items, out);
    return 0;
  }
  // --watch: the list first, then every change after its revision, as kubectl get -w prints them.
  if (*format == Format::kTable) {
    if (!items.empty()) PrintTable(r->plural, items, out);
  } else {
    for (const json& item : items) {
      if (absl::Status s = PrintDoc(item.dump(), *format, out); !s.ok()) return Fail(err, s);
    }
  }
  out << std::flush;
  bool header = items.empty() && *format == Format::kTable;
  absl::Status s = Watch(o, base, list_revision, [&](const json& event) {
    const json& obj = event["object"];
    if (*format != Format::kTable) {
      (void)PrintDoc(obj.dump(), *format, out);
    } else {
      std::ostringstream row;
      PrintTable(r->plural, {obj}, row);
      const std::string text = row.str();
      // The header once; then rows only.
      out << (header ? text : text.substr(text.find('\n') + 1));
      header = false;
    }
    out << std::flush;
  });
  return s.ok() ? 0 : Fail(err, s);
}

namespace {

absl::Status Watch(const ClientOptions& o, const std::string& base, std::string revision,
                   const std::function<void(const json&)>& on_event) {
  while (true) {
    httplib::Client client(o.server);
    if (!client.is_valid()) return absl::InvalidArgumentError(fmt::format("--server \"{}\" is not a valid URL", o.server));
    client.set_connection_timeout(5);
    client.set_read_timeout(300);  // bookmarks arrive every minute
    if (!o.token.empty()) client.set_bearer_token_auth(o.token);
    std::string path = base + "?watch=1&allowWatchBookmarks=true";
    if (!revision.empty()) path += "&resourceVersion=" + Escape(revision);
    if (!o.selector.empty()) path += "&labelSelector=" + Escape(o.selector);
    std::string buffer, error_body;
    int status = 0;
    httplib::Result r = client.Get(
        path, httplib::Headers{},
        [&](const httplib::Response& res) {
          status = res.status;
          return true;
        },
        [&](const char* data, size_t n) {
          if (status != 200) {
            error_body.append(data, n);
            return true;
          }
          buffer.append(data, n);
          for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
            json e = json::parse(buffer.substr(0, nl), nullptr, false);
            if (!e.is_object()) continue;
            const std::string rv = e["object"]["metadata"].value("resourceVersion", "");
            if (!rv.empty()) revision = rv;
            if (e["type"] == "BOOKMARK") continue;
            if (e["type"] == "ERROR") {
              status = e["object"].value("code", 500);
              error_body = e["object"].dump();
              return false;
            }
            on_event(e);
          }
          return true;
        });
    if (status == 410) {
      return absl::OutOfRangeError("the watch fell too far behind (410 Expired); run the command again to relist");
    }
    if (status != 0 && status != 200) return ServerError(status, error_body);
    if (!r && status == 0) {
      return absl::UnavailableError(fmt::format("cannot reach the gpuaas server at {} ({})", o.server,
                                                httplib::to_string(r.error())));
    }
    // The server ended the watch (its timeout, a restart): go on from the last revision seen.
  }
}

}  // namespace

int Summary(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Format> format = ParseFormat(o.output);
  if (!format.ok()) return Fail(err, format.status());
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/summary");
  if (!body.ok()) return Fail(err, body.status());
  if (*format != Format::kTable) {
    absl::Status s = PrintDoc(*body, *format, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  json s = json::parse(*body, nullptr, false);
  if (!s.is_object()) return Fail(err, absl::InternalError("server sent invalid JSON"));
  const json& p = s["physical"];
  out << fmt::format("Clusters: {}   Nodes: {}   GPUs: {} ({} MIG, {} full, {} unhealthy)\n\n",
                     s.value("clusters", 0), s.value("nodes", 0), p.value("gpus", 0),
                     p.value("migEnabled", 0), p.value("full", 0), p.value("unhealthy", 0));
  Table models({"MODEL", "GPUS", "MIG", "FULL", "UNHEALTHY"});
  for (const json& m : p["byModel"]) {
    models.Add({m.value("model", ""), std::to_string(m.value("gpus", 0)),
                std::to_string(m.value("migEnabled", 0)), std::to_string(m.value("full", 0)),
                std::to_string(m.value("unhealthy", 0))});
  }
  models.Print(out);
  out << "\n";
  Table devices({"MODEL", "PROFILE", "DEVICES", "ALLOCATED", "FREE"});
  for (const json& d : s["logical"]["byProfile"]) {
    devices.Add({d.value("model", ""), d.value("profile", ""), std::to_string(d.value("count", 0)),
                 std::to_string(d.value("allocated", 0)), std::to_string(d.value("free", 0))});
  }
  const json& l = s["logical"];
  devices.Add({"TOTAL", "", std::to_string(l.value("count", 0)),
               std::to_string(l.value("allocated", 0)), std::to_string(l.value("free", 0))});
  devices.Print(out);
  return 0;
}

int CatalogModels(const std::string& output, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Format> format = ParseFormat(output);
  if (!format.ok()) return Fail(err, format.status());
  if (*format == Format::kTable) {
    Table t({"MODEL", "FAMILY", "MEMORY", "MIG", "PROFILES"});
    for (const catalog::GpuModel& m : catalog::AllModels()) {
      std::string profiles;
      for (const catalog::MigProfile& p : m.profiles) {
        profiles += (profiles.empty() ? "" : ",") + std::string(p.name);
      }
      t.Add({std::string(m.name), std::string(m.family), fmt::format("{}GB", m.memory_gb),
             m.mig_capable ? "yes" : "no", profiles.empty() ? "full only" : profiles});
    }
    t.Print(out);
    return 0;
  }
  json models = json::array();
  for (const catalog::GpuModel& m : catalog::AllModels()) {
    json profiles = json::array();
    for (const catalog::MigProfile& p : m.profiles) {
      profiles.push_back({{"name", p.name}, {"id", p.id}, {"computeSlices", p.compute_slices},
                          {"memorySlices", p.memory_slices}, {"memoryGB", p.memory_gb},
                          {"maxCount", p.max_count},
                          {"starts", std::vector<int>(p.starts.begin(), p.starts.end())}});
    }
    models.push_back({{"model", m.name}, {"family", m.family}, {"memoryGB", m.memory_gb},
                      {"migCapable", m.mig_capable}, {"computeSlices", m.compute_slices},
                      {"memorySlices", m.memory_slices},
                      {"products", std::vector<std::string>(m.products.begin(), m.products.end())},
                      {"profiles", profiles}});
  }
  absl::Status s = PrintDoc(models.dump(), *format, out);
  return s.ok() ? 0 : Fail(err, s);
}

int CatalogLayouts(const std::string& model, std::ostream& out, std::ostream& err) {
  const catalog::GpuModel* m = catalog::FindModel(model);
  if (m == nullptr) {
    return Fail(err, absl::NotFoundError(fmt::format(
                         "unknown GPU model \"{}\"; `gpuaas catalog models` lists them", model)));
  }
  if (!m->mig_capable) {
    return Fail(err, absl::FailedPreconditionError(
                         fmt::format("{} does not support MIG; it is used as a full GPU only", m->name)));
  }
  std::vector<std::string> lines;
  for (const catalog::Layout& l : catalog::MaximalLayouts(*m)) lines.push_back(catalog::FormatLayout(l));
  std::sort(lines.begin(), lines.end());
  for (const std::string& l : lines) out << l << "\n";
  return 0;
}

namespace {

// "MODEL=N" pairs into a JSON object of counts.
absl::StatusOr<json> Counts(const std::vector<std::string>& pairs, std::string_view flag) {
  json j = json::object();
  for (const std::string& kv : pairs) {
    const size_t eq = kv.find('=');
    std::optional<int64_t> n = eq == std::string::npos ? std::nullopt : ParseInt(kv.substr(eq + 1));
    if (!n || *n < 0) {
      return absl::InvalidArgumentError(fmt::format("{} \"{}\": expected MODEL=COUNT", flag, kv));
    }
    j[kv.substr(0, eq)] = *n;
  }
  return j;
}

int PrintWritten(const ClientOptions& o, const absl::StatusOr<std::string>& body,
                 const std::string& verb, std::ostream& out, std::ostream& err) {
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  json j = json::parse(*body, nullptr, false);
  const std::string kind = j.is_object() ? j.value("kind", "object") : "object";
  std::string plural = kind == "GpuPool" ? "gpupools" : ToLower(kind) + "s";
  out << plural << "/" << (j.is_object() ? j["metadata"].value("name", "?") : "?") << " " << verb << "\n";
  return 0;
}

std::string PoolPath(const std::string& project, const std::string& name) {
  return fmt::format("/apis/gpuaas.io/v1/namespaces/{}/gpupools/{}", Escape(project), Escape(name));
}

}  // namespace

int ProjectCreateCmd(const ClientOptions& o, const ProjectCreate& p, std::ostream& out, std::ostream& err) {
  json j = {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Project"}, {"metadata", {{"name", p.name}}},
            {"spec", json::object()}};
  if (!p.display_name.empty()) j["spec"]["displayName"] = p.display_name;
  if (!p.quota_full.empty() || !p.quota_mig_slices.empty()) {
    absl::StatusOr<json> full = Counts(p.quota_full, "--quota-full");
    if (!full.ok()) return Fail(err, full.status());
    absl::StatusOr<json> slices = Counts(p.quota_mig_slices, "--quota-mig-slices");
    if (!slices.ok()) return Fail(err, slices.status());
    j["spec"]["quota"] = {{"fullGpus", *full}, {"migComputeSlices", *slices}};
  }
  return PrintWritten(o, Send(o, "POST", "/apis/gpuaas.io/v1/projects", j.dump()), "created", out, err);
}

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
  return PrintWritten(o, Send(o, "DELETE", PoolPath(project, name), ""), "deleted", out, err);
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

int WorkloadRunCmd(const ClientOptions& o, const WorkloadRun& r, std::ostream& out, std::ostream& err) {
  const size_t eq = r.resource.rfind('=');
  std::optional<int64_t> n = eq == std::string::npos ? std::optional<int64_t>(1) : ParseInt(r.resource.substr(eq + 1));
  if (!n) {
    return Fail(err, absl::InvalidArgumentError(fmt::format(
                         "--resource \"{}\": expected RESOURCE[=COUNT], e.g. nvidia.com/mig-3g.71gb=1", r.resource)));
  }
  json j = {{"apiVersion", "gpuaas.io/v1"},
            {"kind", "Workload"},
            {"metadata", {{"name", r.name}, {"namespace", r.project}}},
            {"spec", {{"pool", r.pool},
                      {"resources", {{r.resource.substr(0, eq), *n}}},
                      {"priorityClassName", r.priority}}}};
  return PrintWritten(o, Send(o, "POST", fmt::format("/apis/gpuaas.io/v1/namespaces/{}/workloads", Escape(r.project)), j.dump()),
                      "created", out, err);
}

int WorkloadDeleteCmd(const ClientOptions& o, const std::string& project, const std::string& name,
                      std::ostream& out, std::ostream& err) {
  return PrintWritten(o, Send(o, "DELETE", fmt::format("/apis/gpuaas.io/v1/namespaces/{}/workloads/{}", Escape(project), Escape(name)), ""),
                      "deleted", out, err);
}

int TokenCreateCmd(const ClientOptions& o, const std::string& user, const std::string& role,
                   const std::string& project, const std::string& cluster, const std::vector<std::string>& nodes,
                   std::ostream& out, std::ostream& err) {
  json j = {{"user", user}, {"role", role}};
  if (!project.empty()) j["project"] = project;
  if (!cluster.empty()) j["cluster"] = cluster;
  if (!nodes.empty()) j["nodes"] = nodes;
  absl::StatusOr<std::string> body = Send(o, "POST", "/api/v1/tokens", j.dump());
  if (!body.ok()) return Fail(err, body.status());
  json t = json::parse(*body, nullptr, false);
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  // The message first, on stderr; the token alone on its own line of stdout, for scripts.
  std::string scope;
  if (!t.value("project", "").empty()) scope = ", project " + t.value("project", "");
  if (t.contains("nodes") && t["nodes"].is_array()) {
    std::vector<std::string> ns;
    for (const json& n : t["nodes"]) ns.push_back(n.get<std::string>());
    scope = fmt::format(", cluster {}, nodes {}", t.value("cluster", ""), fmt::join(ns, ","));
  }
  err << "token " << t.value("id", "") << " for " << t.value("user", "") << " (" << t.value("role", "") << scope
      << "); it is shown only now:\n"
      << std::flush;
  out << t.value("token", "") << "\n" << std::flush;
  return 0;
}

int TokenListCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/tokens");
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  json j = json::parse(*body, nullptr, false);
  Table t({"ID", "USER", "ROLE", "PROJECT", "CREATED BY", "AGE"});
  for (const json& x : j.value("items", json::array())) {
    t.Add({x.value("id", ""), x.value("user", ""), x.value("role", ""),
           x.value("project", "").empty() ? "-" : x.value("project", ""), x.value("createdBy", ""),
           Age(x.value("created", ""))});
  }
  t.Print(out);
  return 0;
}

int TokenRevokeCmd(const ClientOptions& o, const std::string& id, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Send(o, "DELETE", "/api/v1/tokens/" + Escape(id), "");
  if (!body.ok()) return Fail(err, body.status());
  out << "token " << id << " revoked\n";
  return 0;
}

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
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  out << "cluster " << a.name << " registered (" << config->server << ", context " << config->context
      << "); `gpuaas cluster list` shows when it is reached\n";
  return 0;
}

int ClusterListCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/clusters");
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
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

namespace {

void PrintMoves(const json& moves, std::ostream& out) {
  Table t({"GPU", "NODE", "MODEL", "NOW", "AFTER", "DESTROYS", "LARGEST NOW", "LARGEST AFTER"});
  for (const json& m : moves) {
    auto or_dash = [&](const char* k) { return m.value(k, "").empty() ? std::string("-") : m.value(k, ""); };
    t.Add({m.value("gpu", ""), m.value("node", ""), m.value("model", ""), or_dash("before"), or_dash("after"),
           or_dash("destroys"), or_dash("largestBefore"), or_dash("largestAfter")});
  }
  t.Print(out);
  // Moves that empty a GPU: where each instance goes.
  bool header = false;
  for (const json& m : moves) {
    for (const json& r : m.value("moves", json::array())) {
      if (!header) out << "\nmoved instances (pools that allow it; no workload uses them):\n";
      header = true;
      const json from = r.value("from", json::object()), to = r.value("to", json::object());
      out << fmt::format("  {} {} on {}@{} -> {}@{}{}\n", r.value("pool", ""), r.value("profile", ""),
                         from.value("gpu", ""), from.value("start", 0), to.value("gpu", ""), to.value("start", 0),
                         to.value("instance", "").empty() ? " (a new instance)" : " (a free instance there)");
    }
  }
}

}  // namespace

int DefragPlanCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/defrag");
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  const json j = json::parse(*body, nullptr, false);
  const json moves = j.value("moves", json::array());
  if (moves.empty()) {
    out << "nothing to defragment: no GPU's free instances stand in the way of a larger profile, and no GPU can be "
           "emptied by moving idle instances of pools that allow it\n";
    return 0;
  }
  PrintMoves(moves, out);
  // What changes in what the fleet could hand out.
  Table room({"MODEL", "PROFILE", "ROOM NOW", "ROOM AFTER"});
  const json rooms = j.value("room", json::object());  // kept: items() refers to it
  for (const auto& [model, profiles] : rooms.items()) {
    for (const auto& [profile, r] : profiles.items()) {
      if (r.value("now", 0) == r.value("after", 0)) continue;
      room.Add({model, profile, std::to_string(r.value("now", 0)), std::to_string(r.value("after", 0))});
    }
  }
  out << "\n";
  room.Print(out);
  out << "\n" << moves.size() << " GPU(s); `gpuaas defrag apply` makes every move, `--gpu UUID` some\n";
  return 0;
}

int DefragApplyCmd(const ClientOptions& o, const std::vector<std::string>& gpus, std::ostream& out, std::ostream& err) {
  const json req = gpus.empty() ? json::object() : json{{"gpus", gpus}};
  absl::StatusOr<std::string> body = Send(o, "POST", "/api/v1/defrag", req.dump());
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  const json applied = json::parse(*body, nullptr, false).value("applied", json::array());
  if (applied.empty()) {
    out << "nothing to defragment\n";
    return 0;
  }
  PrintMoves(applied, out);
  out << applied.size() << " GPU(s) to be laid out anew; `gpuaas get miglayouts` follows them\n";
  return 0;
}

int ApiResourcesCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::vector<ServedType>> types = ServedTypes(o);
  if (!types.ok()) return Fail(err, types.status());
  std::map<std::string, std::vector<std::string>> aliases;  // by plural
  for (const auto& [alias, plural] : FleetAliases()) aliases[plural].push_back(alias);
  Table t({"NAME", "SHORTNAMES", "ALSO", "NAMESPACED", "KIND", "VERBS"});
  for (const ServedType& r : *types) {
    t.Add({r.plural, r.short_names.empty() ? "-" : fmt::format("{}", fmt::join(r.short_names, ",")),
           aliases.contains(r.plural) ? fmt::format("{}", fmt::join(aliases[r.plural], ",")) : "-",
           r.namespaced ? "true" : "false", r.kind, fmt::format("{}", fmt::join(r.verbs, ","))});
  }
  t.Print(out);
  return 0;
}

int AuditCmd(const ClientOptions& o, int64_t after, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, fmt::format("/api/v1/audit?after={}", after));
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  const json j = json::parse(*body, nullptr, false);
  Table t({"REVISION", "TIME", "USER", "ACTION", "OBJECT", "DETAIL"});
  for (const json& e : j.value("items", json::array())) {
    t.Add({std::to_string(e.value("revision", int64_t{0})), e.value("time", ""), e.value("user", ""),
           e.value("action", ""), e.value("object", ""), e.value("detail", "")});
  }
  if (t.empty()) {
    err << "No audit events found.\n";
    return 0;
  }
  t.Print(out);
  return 0;
}

int Version(const ClientOptions& o, const std::string& client_version, std::ostream& out,
            std::ostream& err) {
  out << "Client Version: " << client_version << "\n";
  absl::StatusOr<std::string> body = Fetch(o, "/version");
  // The client's version is printed, but a server that does not answer is an error (scripts check
  // the exit code), as kubectl version does.
  if (!body.ok()) return Fail(err, body.status());
  json v = json::parse(*body, nullptr, false);
  out << "Server Version: " << (v.is_object() ? v.value("gitVersion", "?") : "?") << "\n";
  return 0;
}

}  // namespace gpuaas::cli

namespace gpuaas::cli {

int AlertsCmd(const ClientOptions& o, bool all, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, all ? "/api/v1/alerts" : "/api/v1/alerts?active=true");
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  json j = json::parse(*body, nullptr, false);
  Table t({"AGE", "SEVERITY", "NODE", "GPU", "SOURCE", "CONDITION", "STATE", "MESSAGE", "ACTION"});
  for (const json& a : j.value("items", json::array())) {
    std::string gpu = a.value("gpu", "");
    if (a.contains("gpuInstance")) gpu += "/" + a["gpuInstance"].dump();
    if (gpu.empty() && a.contains("project")) gpu = "project/" + a.value("project", "");  // a budget alert
    t.Add({Age(a.value("time", "")), a.value("severity", ""), a.value("node", "").empty() ? "-" : a.value("node", ""),
           gpu, a.value("source", ""), a.value("condition", "").empty() ? "-" : a.value("condition", ""),
           a.value("active", false) ? "active" : "resolved", a.value("message", ""), a.value("action", "")});
  }
  if (j.value("items", json::array()).empty()) {
    err << (all ? "No alerts found.\n" : "No active alerts found (--all shows resolved ones too).\n");
    return 0;
  }
  t.Print(out);
  return 0;
}

int MetricsCmd(const ClientOptions& o, const std::string& series, const std::string& since, int64_t step,
               std::ostream& out, std::ostream& err) {
  int64_t seconds = 0;
  const std::string unit = since.empty() ? "" : since.substr(since.size() - 1);
  try {
    seconds = std::stoll(since.substr(0, since.size() - 1)) * (unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0);
  } catch (...) {
    seconds = 0;
  }
  if (seconds <= 0) return Fail(err, absl::InvalidArgumentError("--since: a duration such as 30m, 6h or 7d"));
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  std::string encoded;
  for (char c : series) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':') {
      encoded.push_back(c);
    } else {
      encoded += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  absl::StatusOr<std::string> body = Fetch(
      o, fmt::format("/api/v1/metrics/query?series={}&from={}&to={}&step={}", encoded, now - seconds, now, step));
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  json j = json::parse(*body, nullptr, false);
  Table t({"TIME", "VALUE", "MAX"});
  for (const json& p : j.value("points", json::array())) {
    if (p["value"].is_null()) continue;
    t.Add({FormatTime(Time(std::chrono::seconds(p.value("t", int64_t{0})))), p["value"].dump(),
           p.contains("max") ? p["max"].dump() : "-"});
  }
  t.Print(out);
  return 0;
}

}  // namespace gpuaas::cli

namespace gpuaas::cli {
namespace {

// "4.5" for --NAME -> 4500000 micro-units (billing::ParseDecimal), the flag named in the error.
absl::StatusOr<int64_t> ParseMoney(std::string_view name, std::string_view v) {
  absl::StatusOr<billing::Micros> m = billing::ParseDecimal(v);
  if (!m.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", name, m.status().message()));
  return *m;
}

// Micro-units as the exact decimal amount: 4500000 -> "4.500000".
std::string Money(const json& micros) {
  return billing::Decimal(micros.is_number_integer() ? micros.get<int64_t>() : 0);
}

std::string Hours(const json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-"; }

std::string RunningMonth() {
  const std::string now = FormatTime(std::chrono::system_clock::now());
  return now.substr(0, 7);
}

void PrintInvoiceList(const std::vector<json>& invoices, std::ostream& out) {
  Table t({"PROJECT", "PERIOD", "STATE", "LINES", "GPU-HOURS", "USED", "TOTAL"});
  for (const json& inv : invoices) {
    double used = 0;
    bool has_used = false;
    for (const json& l : inv.value("lines", json::array())) {
      if (l.contains("usedGpuHours")) {
        used += l["usedGpuHours"].get<double>();
        has_used = true;
      }
    }
    t.Add({inv.value("project", ""), inv["period"].value("name", ""), inv.value("state", ""),
           std::to_string(inv.value("lines", json::array()).size()), Hours(inv["allocatedGpuHours"]),
           has_used ? Hours(json(used)) : "-", Money(inv["totalMicros"]) + " " + inv.value("currency", "")});
  }
  t.Print(out);
}

}  // namespace

int BillListCmd(const ClientOptions& o, const std::string& project, const std::string& period, std::ostream& out,
                std::ostream& err) {
  std::vector<std::string> projects;
  if (!project.empty()) {
    projects.push_back(project);
  } else {
    absl::StatusOr<std::string> body = Fetch(o, "/apis/gpuaas.io/v1/projects");
    if (!body.ok()) return Fail(err, body.status());
    const json list = json::parse(*body, nullptr, false);
    for (const json& p : list.value("items", json::array())) projects.push_back(p["metadata"].value("name", ""));
  }
  std::vector<json> invoices;
  json all = json::array();
  for (const std::string& p : projects) {
    absl::StatusOr<std::string> body =
        Fetch(o, "/api/v1/projects/" + Escape(p) + "/invoices" + (period.empty() ? "" : "?period=" + Escape(period)));
    if (!body.ok()) return Fail(err, body.status());
    const json j = json::parse(*body, nullptr, false);
    for (const json& inv : j.value("items", json::array())) {
      invoices.push_back(inv);
      all.push_back(inv);
    }
  }
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(json{{"items", all}}.dump(), o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  if (invoices.empty()) {
    err << "No invoices found (a project's first invoice starts with its first approved pool).\n";
    return 0;
  }
  PrintInvoiceList(invoices, out);
  return 0;
}

int BillShowCmd(const ClientOptions& o, const std::string& project, const std::string& period, std::ostream& out,
                std::ostream& err) {
  const std::string p = period.empty() ? RunningMonth() : period;
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/projects/" + Escape(project) + "/invoices/" + Escape(p));
  if (!body.ok()) return Fail(err, body.status());
  if (o.output == "json" || o.output == "yaml") {
    absl::Status s = PrintDoc(*body, o.output == "yaml" ? Format::kYaml : Format::kJson, out);
    return s.ok() ? 0 : Fail(err, s);
  }
  const json inv = json::parse(*body, nullptr, false);
  const std::string currency = inv.value("currency", "");
  out << "Project: " << inv.value("project", "") << "   Period: " << inv["period"].value("name", "") << " ("
      << inv["period"].value("start", "") << " to " << inv["period"].value("end", "") << ")   State: "
      << inv.value("state", "") << "\n\n";
  Table t({"POOL", "ITEM", "KIND", "QTY", "HOURS", "UNIT PRICE/H", "AMOUNT", "GPU-HOURS", "USED"});
  for (const json& l : inv.value("lines", json::array())) {
    t.Add({l.value("pool", ""), l.value("item", ""), l.value("category", ""), std::to_string(l.value("quantity", 0)),
           fmt::format("{:.2f}", l.value("seconds", int64_t{0}) / 3600.0), Money(l["unitPriceMicros"]),
           Money(l["amountMicros"]), Hours(l["allocatedGpuHours"]),
           l.contains("usedGpuHours") ? Hours(l["usedGpuHours"]) : "-"});
  }
  t.Print(out);
  out << "\nTotal: " << Money(inv["totalMicros"]) << " " << currency << "   (" << inv.value("totalMicros", int64_t{0})
      << " micro-units; each line is seconds x quantity x unit price / 3600, rounded once)\n";
  for (const json& l : inv.value("lines", json::array())) {
    if (l.contains("description")) out << "  " << l.value("pool", "") << " " << l.value("item", "") << ": " << l.value("description", "") << "\n";
  }
  return 0;
}

int BillExportCmd(const ClientOptions& o, const std::string& project, const std::string& period,
                  const std::string& format, bool focus, const std::string& from, const std::string& to,
                  std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body;
  if (focus) {
    std::string q;
    if (!project.empty()) q += "project=" + Escape(project);
    if (!from.empty()) q += (q.empty() ? "" : "&") + std::string("from=") + Escape(from);
    if (!to.empty()) q += (q.empty() ? "" : "&") + std::string("to=") + Escape(to);
    body = Fetch(o, "/api/v1/billing/focus" + (q.empty() ? "" : "?" + q));
  } else {
    if (project.empty()) return Fail(err, absl::InvalidArgumentError("give a PROJECT, or --focus for every project"));
    if (format != "csv" && format != "json") return Fail(err, absl::InvalidArgumentError("--format: csv or json"));
    body = Fetch(o, "/api/v1/projects/" + Escape(project) + "/invoices/" +
                        Escape(period.empty() ? RunningMonth() : period) + "?format=" + format);
  }
  if (!body.ok()) return Fail(err, body.status());
  out << *body;
  if (!body->empty() && body->back() != '\n') out << "\n";
  return 0;
}

int BillBudgetCmd(const ClientOptions& o, const std::string& project, const std::string& amount, int64_t gpu_hours,
                  bool allow_overrun, std::ostream& out, std::ostream& err) {
  int64_t micros = 0;
  if (!amount.empty()) {
    absl::StatusOr<int64_t> m = ParseMoney("--amount", amount);
    if (!m.ok()) return Fail(err, m.status());
    micros = *m;
  }
  if (gpu_hours < 0) return Fail(err, absl::InvalidArgumentError("--gpu-hours: must not be negative"));
  const json body = {{"amountMicros", micros}, {"gpuHours", gpu_hours}, {"allowOverrun", allow_overrun}};
  absl::StatusOr<std::string> r = Send(o, "PUT", "/apis/gpuaas.io/v1/projects/" + Escape(project) + "/budget", body.dump());
  if (!r.ok()) return Fail(err, r.status());
  if (micros == 0 && gpu_hours == 0) {
    out << "project/" << project << " budget removed\n";
  } else {
    out << "project/" << project << " budget set\n";
  }
  return 0;
}

int BillCreditCmd(const ClientOptions& o, const std::string& project, const std::string& period,
                  const std::string& amount, const std::string& reason, std::ostream& out, std::ostream& err) {
  absl::StatusOr<int64_t> micros = ParseMoney("--amount", amount);
  if (!micros.ok()) return Fail(err, micros.status());
  const json body = {{"period", period}, {"amountMicros", *micros}, {"reason", reason}};
  absl::StatusOr<std::string> r = Send(o, "POST", "/api/v1/projects/" + Escape(project) + "/creditnotes", body.dump());
  if (!r.ok()) return Fail(err, r.status());
  const json note = json::parse(*r, nullptr, false);
  out << "creditnote/" << (note.is_object() ? note["metadata"].value("name", "?") : "?") << " issued\n";
  return 0;
}

int RateCardCreateCmd(const ClientOptions& o, const RateCardCreate& c, std::ostream& out, std::ostream& err) {
  json prices = json::array();
  for (const std::string& p : c.prices) {
    const size_t slash = p.find('/'), eq = p.find('=');
    if (slash == std::string::npos || eq == std::string::npos || eq < slash) {
      return Fail(err, absl::InvalidArgumentError(fmt::format(
                           "--price \"{}\": MODEL/PROFILE=AMOUNT per device-hour, e.g. H200-SXM-141GB/full=4.50", p)));
    }
    absl::StatusOr<int64_t> m = ParseMoney("--price", p.substr(eq + 1));
    if (!m.ok()) return Fail(err, m.status());
    prices.push_back({{"model", p.substr(0, slash)}, {"profile", p.substr(slash + 1, eq - slash - 1)}, {"pricePerHourMicros", *m}});
  }
  const json card = {{"apiVersion", "gpuaas.io/v1"},
                     {"kind", "RateCard"},
                     {"metadata", {{"name", c.name}}},
                     {"spec",
                      {{"currency", c.currency},
                       {"effectiveFrom", c.from.empty() ? FormatTime(std::chrono::system_clock::now()) : c.from},
                       {"migPricing", c.mig_pricing},
                       {"prices", prices}}}};
  absl::StatusOr<std::string> r = Send(o, "POST", "/apis/gpuaas.io/v1/ratecards", card.dump());
  if (!r.ok()) return Fail(err, r.status());
  out << "ratecard/" << c.name << " created\n";
  return 0;
}

}  // namespace gpuaas::cli
