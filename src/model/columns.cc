#include "model/columns.h"

#include <map>

#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::model {
namespace {

using nlohmann::json;
using P = json::json_pointer;

std::string Str(const json& j, const char* pointer, const std::string& dflt = "") {
  const P p(pointer);
  if (!j.contains(p)) return dflt;
  const json& v = j.at(p);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::string ConditionStatus(const json& obj, const std::string& type) {
  const json status = obj.value("status", json::object());
  for (const json& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("status", "Unknown");
  }
  return "Unknown";
}

json Field(const json& obj, const char* part, const char* key, json dflt) {
  const json p = obj.value(part, json::object());
  return p.is_object() ? p.value(key, dflt) : dflt;
}

std::string Items(const json& items) {
  std::string out;
  for (const json& i : items) {
    out += fmt::format("{}{}x{}/{}", out.empty() ? "" : ",", i.value("count", 0), i.value("model", "?"),
                       i.value("profile", "?"));
  }
  return out;
}

std::string Devices(const json& devices) {
  std::string out;
  for (const json& d : devices) out += (out.empty() ? "" : ",") + d.value("instanceUUID", d.value("gpuUUID", ""));
  return out;
}

using RowFn = std::vector<std::string> (*)(const json&, Time);

struct Kind {
  std::vector<std::string> columns;
  RowFn row;
};

const std::map<std::string, Kind, std::less<>>& Kinds() {
  static const std::map<std::string, Kind, std::less<>> kKinds = {
      {"clusters",
       {{"NAME", "DRIVER", "REGION", "NODES", "GPUS", "REACHABLE", "AGE"},
        [](const json& c, Time now) -> std::vector<std::string> {
          return {Str(c, "/metadata/name"), Str(c, "/spec/driver", "-"), Str(c, "/spec/region", "-"),
                  Str(c, "/status/nodes", "0"), Str(c, "/status/gpus", "0"), ConditionStatus(c, "Reachable"),
                  Age(Str(c, "/metadata/creationTimestamp"), now)};
        }}},
      {"nodecapacities",
       {{"NAME", "CLUSTER", "MODEL", "GPUS", "MIG", "CPU", "MEMORY", "SCHEDULABLE", "AGE"},
        [](const json& n, Time now) -> std::vector<std::string> {
          const int64_t mem = Field(n, "spec", "memoryBytes", int64_t{0}).get<int64_t>();
          return {Str(n, "/metadata/name"), Str(n, "/spec/cluster"), Str(n, "/spec/gpuModel", "<unknown>"),
                  Str(n, "/status/physical/gpus", "0"), Str(n, "/status/physical/migEnabledGpus", "0"),
                  Str(n, "/spec/cpuCores", "0"), fmt::format("{}Gi", mem >> 30), Str(n, "/spec/schedulable", "true"),
                  Age(Str(n, "/metadata/creationTimestamp"), now)};
        }}},
      {"gpucapacities",
       {{"NAME", "NODE", "INDEX", "MODEL", "MIG", "INSTANCES", "HEALTH"},
        [](const json& g, Time) -> std::vector<std::string> {
          std::string insts;
          for (const json& i : Field(g, "status", "migInstances", json::array())) {
            const json placement = i.value("placement", json::object());
            insts += fmt::format("{}{}@{}", insts.empty() ? "" : " ", i.value("profile", "?"), placement.value("start", 0));
          }
          return {Str(g, "/metadata/name"), Str(g, "/spec/node"),      Str(g, "/spec/index"),
                  Str(g, "/spec/model"),    Str(g, "/status/migMode"), insts.empty() ? "-" : insts,
                  Str(g, "/status/health")};
        }}},
      {"gpupools",
       {{"NAME", "PROJECT", "ITEMS", "APPROVED", "ALLOCATED", "READY", "DEVICES", "AGE"},
        [](const json& p, Time now) -> std::vector<std::string> {
          return {Str(p, "/metadata/name"),
                  Str(p, "/metadata/namespace"),
                  Items(Field(p, "spec", "items", json::array())),
                  ConditionStatus(p, "Approved"),
                  ConditionStatus(p, "Allocated"),
                  ConditionStatus(p, "Ready"),
                  std::to_string(Field(p, "status", "allocation", json::array()).size()),
                  Age(Str(p, "/metadata/creationTimestamp"), now)};
        }}},
      {"projects",
       {{"NAME", "DISPLAY NAME", "QUOTA", "AGE"},
        [](const json& p, Time now) -> std::vector<std::string> {
          std::string quota;
          const json q = Field(p, "spec", "quota", json::object());
          if (q.is_object()) {
            const json full = q.value("fullGpus", json::object());
            const json slices = q.value("migComputeSlices", json::object());
            for (const auto& [m, n] : full.items()) {
              quota += fmt::format("{}{} full {}", quota.empty() ? "" : ", ", n.dump(), m);
            }
            for (const auto& [m, n] : slices.items()) {
              quota += fmt::format("{}{} MIG slices {}", quota.empty() ? "" : ", ", n.dump(), m);
            }
          }
          return {Str(p, "/metadata/name"), Str(p, "/spec/displayName", "-"), quota.empty() ? "none" : quota,
                  Age(Str(p, "/metadata/creationTimestamp"), now)};
        }}},
      {"workloads",
       {{"NAME", "PROJECT", "POOL", "RESOURCE", "PRIORITY", "PHASE", "REASON", "DEVICES"},
        [](const json& w, Time) -> std::vector<std::string> {
          std::string res;
          const json resources = Field(w, "spec", "resources", json::object());
          for (const auto& [k, v] : resources.items()) res = fmt::format("{}={}", k, v.dump());
          const std::string devs = Devices(Field(w, "status", "devices", json::array()));
          return {Str(w, "/metadata/name"),
                  Str(w, "/metadata/namespace"),
                  Str(w, "/spec/pool"),
                  res,
                  Str(w, "/spec/priorityClassName"),
                  Str(w, "/status/phase"),
                  Str(w, "/status/reason", "-"),
                  devs.empty() ? "-" : devs};
        }}},
      {"profiles",
       {{"NAME", "PROJECT", "POD", "POOL", "DEVICES", "START", "END"},
        [](const json& p, Time) -> std::vector<std::string> {
          return {Str(p, "/metadata/name"), Str(p, "/spec/project"), Str(p, "/spec/pod"),
                  Str(p, "/spec/pool"),     Devices(Field(p, "spec", "devices", json::array())),
                  Str(p, "/spec/start"),    Str(p, "/spec/end", "-")};
        }}},
      {"loans",
       {{"NAME", "BORROWER", "WORKLOAD", "LENDER", "POOL", "ITEM", "DEVICES", "START", "END", "REASON", "STUCK PODS"},
        [](const json& l, Time) -> std::vector<std::string> {
          std::string stuck;
          for (const json& p : Field(l, "status", "stuckPods", json::array())) {
            if (p.is_string()) stuck += (stuck.empty() ? "" : ",") + p.get<std::string>();
          }
          return {Str(l, "/metadata/name"),
                  Str(l, "/spec/borrower"),
                  Str(l, "/spec/workload"),
                  Str(l, "/spec/lender"),
                  Str(l, "/spec/pool"),
                  Str(l, "/spec/model") + "/" + Str(l, "/spec/profile"),
                  Devices(Field(l, "spec", "devices", json::array())),
                  Str(l, "/spec/start"),
                  Str(l, "/spec/end", "-"),
                  Str(l, "/spec/endReason", "-"),
                  stuck.empty() ? "-" : stuck};
        }}},
      {"ratecards",
       {{"NAME", "CURRENCY", "EFFECTIVE FROM", "MIG PRICING", "PRICES"},
        [](const json& c, Time) -> std::vector<std::string> {
          std::string prices;
          for (const json& p : Field(c, "spec", "prices", json::array())) {
            prices += fmt::format("{}{}/{}={}", prices.empty() ? "" : " ", p.value("model", ""), p.value("profile", ""),
                                  FixedMicros(p.value("pricePerHourMicros", int64_t{0})));
          }
          return {Str(c, "/metadata/name"), Str(c, "/spec/currency"), Str(c, "/spec/effectiveFrom"),
                  Str(c, "/spec/migPricing"), prices};
        }}},
      {"usagerecords",
       {{"NAME", "PROJECT", "ITEMS", "START", "END", "CREDITS"},
        [](const json& u, Time) -> std::vector<std::string> {
          return {Str(u, "/metadata/name"),
                  Str(u, "/metadata/namespace"),
                  Items(Field(u, "spec", "items", json::array())),
                  Str(u, "/spec/start"),
                  Str(u, "/spec/end", "-"),
                  std::to_string(Field(u, "spec", "credits", json::array()).size())};
        }}},
      {"defragmentations",
       {{"NAME", "REQUESTED BY", "GPUS", "PHASE", "MOVES", "MESSAGE", "AGE"},
        [](const json& d, Time now) -> std::vector<std::string> {
          const size_t gpus = Field(d, "spec", "gpus", json::array()).size();
          return {Str(d, "/metadata/name"),
                  Str(d, "/spec/requestedBy", "-"),
                  gpus == 0 ? std::string("every move") : std::to_string(gpus),
                  Str(d, "/status/phase", "Pending"),
                  std::to_string(Field(d, "status", "moves", json::array()).size()),
                  Str(d, "/status/message", ""),
                  Age(Str(d, "/metadata/creationTimestamp"), now)};
        }}},
      {"miglayouts",
       {{"NAME", "NODE", "MIG", "INSTANCES", "STATE", "ATTEMPTS", "MESSAGE"},
        [](const json& l, Time) -> std::vector<std::string> {
          std::string insts;
          for (const json& i : Field(l, "spec", "instances", json::array())) {
            insts += fmt::format("{}{}@{}", insts.empty() ? "" : " ", i.value("profile", "?"), i.value("start", 0));
          }
          return {Str(l, "/metadata/name"), Str(l, "/spec/node"),        Str(l, "/spec/migEnabled"),
                  insts.empty() ? "-" : insts, Str(l, "/status/state"), Str(l, "/status/attempts"),
                  Str(l, "/status/message", "")};
        }}},
      {"specandcounts",
       {{"NAME", "NODE", "MODEL", "PROFILE", "RESOURCE", "COUNT", "ALLOCATED", "FREE"},
        [](const json& s, Time) -> std::vector<std::string> {
          return {Str(s, "/metadata/name"),      Str(s, "/spec/node"),       Str(s, "/spec/model"),
                  Str(s, "/spec/profile"),       Str(s, "/spec/resourceName"), Str(s, "/status/count"),
                  Str(s, "/status/allocated"),   Str(s, "/status/free")};
        }}},
  };
  return kKinds;
}

const std::vector<std::string> kDefaultColumns = {"NAME", "AGE"};

}  // namespace

std::vector<std::string> Columns(std::string_view plural) {
  auto it = Kinds().find(plural);
  return it == Kinds().end() ? kDefaultColumns : it->second.columns;
}

absl::StatusOr<std::vector<std::string>> Row(std::string_view plural, const json& obj, Time now) {
  if (!obj.is_object()) return absl::InvalidArgumentError("not a JSON object");
  auto it = Kinds().find(plural);
  if (it == Kinds().end()) return std::vector<std::string>{Str(obj, "/metadata/name"), Age(Str(obj, "/metadata/creationTimestamp"), now)};
  return it->second.row(obj, now);
}

std::string Age(std::string_view timestamp, Time now) {
  std::optional<Time> t = ParseTime(timestamp);
  if (!t) return "<unknown>";
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - *t).count();
  if (secs < 0) secs = 0;
  if (secs < 120) return fmt::format("{}s", secs);
  if (secs < 7200) return fmt::format("{}m", secs / 60);
  if (secs < 2 * 86400) return fmt::format("{}h", secs / 3600);
  return fmt::format("{}d", secs / 86400);
}

}  // namespace gpuaas::model
