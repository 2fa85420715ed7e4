#include "telemetry/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "common/metrics_text.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::telemetry {
namespace {

using nlohmann::json;

json ReadingsJson(const Readings& r) {
  json o = json::object();
  for (const auto& [f, v] : r) {
    if (std::isfinite(v)) o[std::string(Info(f).series)] = v;
  }
  return o;
}

absl::Status ReadReadings(const json& j, std::string_view where, Readings& out) {
  if (!j.is_object()) return absl::InvalidArgumentError(fmt::format("{}.readings: must be an object", where));
  for (const auto& [k, v] : j.items()) {
    std::optional<Field> f = FieldFromSeries(k);
    if (!f) return absl::InvalidArgumentError(fmt::format("{}.readings: unknown reading \"{}\"", where, k));
    if (!v.is_number()) return absl::InvalidArgumentError(fmt::format("{}.readings.{}: must be a number", where, k));
    out[*f] = v.get<double>();
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Get(const json& o, const char* key, std::string_view where, T& out, bool required) {
  auto it = o.find(key);
  if (it == o.end()) {
    return required ? absl::InvalidArgumentError(fmt::format("{}.{}: required", where, key)) : absl::OkStatus();
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Only integers in range: converting 1e23 to an int is undefined behaviour, not an error.
    const bool fits = it->is_number_integer() &&
                      (it->is_number_unsigned() ? it->template get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                                : it->template get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                      it->template get<int64_t>() <= std::numeric_limits<T>::max());
    if (!fits) return absl::InvalidArgumentError(fmt::format("{}.{}: must be an integer in range", where, key));
  }
  try {
    out = it->template get<T>();
  } catch (const json::exception&) {
    return absl::InvalidArgumentError(fmt::format("{}.{}: wrong type", where, key));
  }
  return absl::OkStatus();
}

json PodsJson(const std::vector<PodRef>& pods) {
  json out = json::array();
  for (const PodRef& p : pods) out.push_back({{"namespace", p.ns}, {"pod", p.pod}, {"container", p.container}});
  return out;
}

absl::Status ReadPods(const json& j, const std::string& where, std::vector<PodRef>& out) {
  if (!j.is_array()) return absl::InvalidArgumentError(fmt::format("{}.pods: must be an array", where));
  for (size_t k = 0; k < j.size(); ++k) {
    const std::string pw = fmt::format("{}.pods[{}]", where, k);
    if (!j[k].is_object()) return absl::InvalidArgumentError(fmt::format("{}: must be an object", pw));
    PodRef p;
    RETURN_IF_ERROR(Get(j[k], "namespace", pw, p.ns, true));
    RETURN_IF_ERROR(Get(j[k], "pod", pw, p.pod, true));
    RETURN_IF_ERROR(Get(j[k], "container", pw, p.container, false));
    out.push_back(std::move(p));
  }
  return absl::OkStatus();
}

using Labels = std::vector<std::pair<std::string, std::string>>;

// dcgm-exporter's pod labels, for the first pod holding a device.
void AddPodLabels(const std::vector<PodRef>& pods, Labels& labels) {
  if (pods.empty()) return;
  const PodRef& p = *std::min_element(pods.begin(), pods.end());
  labels.emplace_back("container", p.container);
  labels.emplace_back("namespace", p.ns);
  labels.emplace_back("pod", p.pod);
}

}  // namespace

std::string EncodeReport(const NodeReport& r, bool pretty) {
  json gpus = json::array();
  for (const GpuReport& g : r.gpus) {
    json insts = json::array();
    for (const InstanceReport& i : g.instances) {
      json in = {{"gi", i.gi},     {"profile", i.profile}, {"start", i.start},
                 {"size", i.size}, {"uuid", i.uuid},       {"readings", ReadingsJson(i.readings)}};
      if (!i.pods.empty()) in["pods"] = PodsJson(i.pods);
      insts.push_back(std::move(in));
    }
    json xids = json::array();
    for (const XidEvent& x : g.xid_events) xids.push_back({{"xid", x.xid}, {"gi", x.gi}, {"time_ms", x.time_ms}});
    json gj = {{"uuid", g.uuid},
               {"index", g.index},
               {"name", g.name},
               {"memory_mib", g.memory_mib},
               {"mig_enabled", g.mig_enabled},
               {"readings", ReadingsJson(g.readings)},
               {"instances", insts},
               {"xid_events", xids}};
    if (!g.pods.empty()) gj["pods"] = PodsJson(g.pods);
    gpus.push_back(std::move(gj));
  }
  json o = {{"node", r.node}, {"driver_version", r.driver_version}, {"time_ms", r.time_ms}, {"gpus", gpus}};
  if (!r.agent.empty()) o["agent"] = r.agent;
  if (!r.boot_id.empty()) o["boot_id"] = r.boot_id;
  return pretty ? o.dump(2) : o.dump();
}

absl::StatusOr<NodeReport> DecodeReport(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("the report must be a JSON object");
  NodeReport r;
  RETURN_IF_ERROR(Get(j, "node", "report", r.node, true));
  if (r.node.empty()) return absl::InvalidArgumentError("report.node: must not be empty");
  RETURN_IF_ERROR(Get(j, "driver_version", "report", r.driver_version, false));
  RETURN_IF_ERROR(Get(j, "agent", "report", r.agent, false));
  RETURN_IF_ERROR(Get(j, "boot_id", "report", r.boot_id, false));
  if (r.agent.size() > 256 || r.boot_id.size() > 64) {
    return absl::InvalidArgumentError("report.agent, report.boot_id: at most 256 and 64 characters");
  }
  RETURN_IF_ERROR(Get(j, "time_ms", "report", r.time_ms, false));
  auto gpus = j.find("gpus");
  if (gpus == j.end() || !gpus->is_array()) return absl::InvalidArgumentError("report.gpus: required, an array");
  for (size_t n = 0; n < gpus->size(); ++n) {
    const json& g = (*gpus)[n];
    const std::string where = fmt::format("gpus[{}]", n);
    if (!g.is_object()) return absl::InvalidArgumentError(fmt::format("{}: must be an object", where));
    GpuReport gr;
    RETURN_IF_ERROR(Get(g, "uuid", where, gr.uuid, true));
    if (!StartsWithIgnoreCase(gr.uuid, "GPU-")) {
      return absl::InvalidArgumentError(fmt::format("{}.uuid: \"{}\" is not a GPU UUID (GPU-…)", where, gr.uuid));
    }
    RETURN_IF_ERROR(Get(g, "index", where, gr.index, false));
    RETURN_IF_ERROR(Get(g, "name", where, gr.name, false));
    RETURN_IF_ERROR(Get(g, "memory_mib", where, gr.memory_mib, false));
    RETURN_IF_ERROR(Get(g, "mig_enabled", where, gr.mig_enabled, false));
    if (auto rd = g.find("readings"); rd != g.end()) RETURN_IF_ERROR(ReadReadings(*rd, where, gr.readings));
    if (auto is = g.find("instances"); is != g.end()) {
      if (!is->is_array()) return absl::InvalidArgumentError(fmt::format("{}.instances: must be an array", where));
      for (size_t k = 0; k < is->size(); ++k) {
        const json& i = (*is)[k];
        const std::string iw = fmt::format("{}.instances[{}]", where, k);
        if (!i.is_object()) return absl::InvalidArgumentError(fmt::format("{}: must be an object", iw));
        InstanceReport ir;
        RETURN_IF_ERROR(Get(i, "gi", iw, ir.gi, true));
        RETURN_IF_ERROR(Get(i, "profile", iw, ir.profile, false));
        RETURN_IF_ERROR(Get(i, "start", iw, ir.start, false));
        RETURN_IF_ERROR(Get(i, "size", iw, ir.size, false));
        RETURN_IF_ERROR(Get(i, "uuid", iw, ir.uuid, false));
        if (auto rd = i.find("readings"); rd != i.end()) RETURN_IF_ERROR(ReadReadings(*rd, iw, ir.readings));
        if (auto ps = i.find("pods"); ps != i.end()) RETURN_IF_ERROR(ReadPods(*ps, iw, ir.pods));
        gr.instances.push_back(std::move(ir));
      }
    }
    if (auto ps = g.find("pods"); ps != g.end()) RETURN_IF_ERROR(ReadPods(*ps, where, gr.pods));
    if (auto xs = g.find("xid_events"); xs != g.end()) {
      if (!xs->is_array()) return absl::InvalidArgumentError(fmt::format("{}.xid_events: must be an array", where));
      for (size_t k = 0; k < xs->size(); ++k) {
        const json& x = (*xs)[k];
        const std::string xw = fmt::format("{}.xid_events[{}]", where, k);
        if (!x.is_object()) return absl::InvalidArgumentError(fmt::format("{}: must be an object", xw));
        XidEvent e;
        RETURN_IF_ERROR(Get(x, "xid", xw, e.xid, true));
        RETURN_IF_ERROR(Get(x, "gi", xw, e.gi, false));
        RETURN_IF_ERROR(Get(x, "time_ms", xw, e.time_ms, false));
        if (e.xid <= 0) return absl::InvalidArgumentError(fmt::format("{}.xid: must be positive", xw));
        gr.xid_events.push_back(e);
      }
    }
    r.gpus.push_back(std::move(gr));
  }
  return r;
}

std::string RenderDcgmText(const NodeReport& r) { return RenderDcgmText(std::vector<NodeReport>{r}); }

std::string RenderDcgmText(const std::vector<NodeReport>& reports) {
  std::string out;
  out.reserve(4096);
  MetricsText w(out);
  for (const FieldInfo& f : AllFields()) {
    for (const NodeReport& r : reports) {
    for (const GpuReport& g : r.gpus) {
      const Labels base = {{"gpu", fmt::format("{}", g.index)},
                           {"UUID", g.uuid},
                           {"device", fmt::format("nvidia{}", g.index)},
                           {"modelName", g.name},
                           {"Hostname", r.node}};
      auto row = [&](const Labels& labels, double v) {
        if (!std::isfinite(v)) return;
        // HELP and TYPE before the family's first row; a field no device reported is left out.
        w.Family(f.dcgm, f.counter ? "counter" : "gauge", f.help);
        w.Sample(f.dcgm, labels, v);
      };
      const bool mig = g.mig_enabled && !g.instances.empty();
      if (f.field == Field::kXid) {
        // The last XID seen, as dcgm-exporter's gauge shows it, with its err_code label.
        int last = 0;
        for (const XidEvent& x : g.xid_events) last = x.xid;
        if (auto it = g.readings.find(Field::kXid); it != g.readings.end() && it->second >= 0 && it->second <= 1e6) {
          last = static_cast<int>(it->second);
        }
        Labels labels = base;
        labels.emplace_back("err_code", fmt::format("{}", last));
        row(labels, last);
        continue;
      }
      if (!mig) {
        if (auto it = g.readings.find(f.field); it != g.readings.end()) {
          Labels labels = base;
          AddPodLabels(g.pods, labels);
          row(labels, it->second);
        }
        continue;
      }
      for (const InstanceReport& i : g.instances) {
        const Readings& src = f.per_instance ? i.readings : g.readings;
        auto it = src.find(f.field);
        if (it == src.end()) continue;
        Labels labels = base;
        labels.emplace_back("GPU_I_PROFILE", i.profile);
        labels.emplace_back("GPU_I_ID", fmt::format("{}", i.gi));
        AddPodLabels(i.pods, labels);
        row(labels, it->second);
      }
    }
    }
  }
  return out;
}

}  // namespace gpuaas::telemetry
