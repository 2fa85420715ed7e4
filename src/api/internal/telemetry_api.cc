#include "api/internal/telemetry_api.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <algorithm>
#include <map>

#include "api/internal/objects.h"
#include "api/problem.h"
#include "billing/billing.h"
#include "catalog/catalog.h"
#include "common/metrics_text.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"
#include "service/pools.h"
#include "telemetry/assessment.h"
#include "telemetry/prom_text.h"

namespace gpuaas::api::internal {
namespace {

using nlohmann::json;
using telemetry::DeviceRef;

constexpr std::string_view kJson = "application/json";
constexpr int64_t kMaxPoints = 11000;  // as Prometheus's query_range
constexpr int64_t kMaxSpan = 400 * 86400;
constexpr int64_t kClockSkew = 300;  // seconds a client's clock may run ahead of the server's  // the longest window (and step): hourly rollups keep 30 days

HttpResponse Reply(const json& j) { return {200, std::string(kJson), j.dump(), {}}; }

// Unix seconds (with a fraction) or RFC 3339.
absl::StatusOr<int64_t> ParseInstant(std::string_view name, std::string_view v) {
  double secs = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), secs);
  if (ec == std::errc() && end == v.data() + v.size() && std::isfinite(secs)) {
    if (secs < 0 || secs > 1e11) return absl::InvalidArgumentError(fmt::format("{}: {} is out of range", name, v));
    return static_cast<int64_t>(secs);
  }
  if (std::optional<Time> t = ParseTime(v)) {
    return std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: \"{}\" is neither unix seconds nor an RFC 3339 time", name, v));
}

struct Range {
  int64_t from, to, step;
};

absl::StatusOr<Range> ParseRange(const HttpRequest& req, int64_t now, int64_t default_span, int64_t default_step) {
  Range r{now - default_span, now, default_step};
  if (req.HasParam("to")) {
    absl::StatusOr<int64_t> v = ParseInstant("to", req.Param("to"));
    if (!v.ok()) return v.status();
    r.to = *v;
  }
  r.from = r.to - default_span;
  if (req.HasParam("from")) {
    absl::StatusOr<int64_t> v = ParseInstant("from", req.Param("from"));
    if (!v.ok()) return v.status();
    r.from = *v;
  }
  if (req.HasParam("step")) {
    const std::string s = req.Param("step");
    int64_t step = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
    if (ec != std::errc() || end != s.data() + s.size() || step <= 0 || step > kMaxSpan) {
      return absl::InvalidArgumentError(
          fmt::format("step: \"{}\" must be a number of seconds from 1 to {}", s, kMaxSpan));
    }
    r.step = step;
  }
  if (r.from >= r.to) return absl::InvalidArgumentError("from must be before to");
  if (r.to - r.from > kMaxSpan) {
    return absl::InvalidArgumentError(fmt::format("from, to: the window may span {} days at most", kMaxSpan / 86400));
  }
  if ((r.to - r.from) / r.step > kMaxPoints) {
    return absl::InvalidArgumentError(fmt::format(
        "{} points exceed the maximum of {} per series; increase step", (r.to - r.from) / r.step, kMaxPoints));
  }
  return r;
}

int64_t Seconds(Time t) { return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count(); }

// Rollups are floats: print what the float holds (412.25), not its double expansion.
json Nullable(double v, bool has) {
  if (!has) return nullptr;
  if (std::abs(v) < 1e7) v = std::round(v * 1e4) / 1e4;
  return v;
}

}  // namespace

absl::Status TelemetryApi::MayPush(const Principal& who, std::string_view uuid) const {
  if (who.role != Role::kAgent) return absl::OkStatus();
  const std::optional<model::GpuCapacity> g = DecodeOne<model::GpuCapacity>(cache_, "", ToLower(uuid));
  const bool own = g && g->spec.cluster == who.cluster &&
                   std::any_of(who.nodes.begin(), who.nodes.end(),
                               [&](const std::string& n) { return g->spec.node == who.cluster + "." + n; });
  if (own) return absl::OkStatus();
  return absl::PermissionDeniedError(fmt::format(
      "agent {} may push telemetry for the GPUs of {}/{} only; {} is {}", who.user, who.cluster,
      fmt::join(who.nodes, "+"), uuid, g ? fmt::format("on {}", g->spec.node) : "not in the inventory"));
}

absl::StatusOr<HttpResponse> TelemetryApi::Ingest(const HttpRequest& req, const Principal& who) {
  const std::string ct = ToLower(req.Header("Content-Type"));
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch()).count();
  if (!IsValidUtf8(req.body)) return absl::InvalidArgumentError("the body is not valid UTF-8");
  telemetry::GpuAdmission admit;
  if (who.role == Role::kAgent) admit = [&](std::string_view uuid) { return MayPush(who, uuid); };
  absl::StatusOr<telemetry::IngestResult> r;
  if (ct.starts_with("application/json")) {
    absl::StatusOr<telemetry::NodeReport> report = telemetry::DecodeReport(req.body);
    if (!report.ok()) return report.status();
    r = hub_.IngestReport(*report, now_ms, false, admit, who.user);
  } else if (ct.starts_with("text/plain")) {
    r = hub_.IngestText(req.body, now_ms, admit, who.user);
    if (!r.ok() && absl::IsInvalidArgument(r.status())) {
      return absl::InvalidArgumentError(fmt::format("Prometheus text: {}", std::string(r.status().message())));
    }
  } else {
    return UnsupportedMediaType(fmt::format(
        "Content-Type \"{}\": send application/json (an agent report) or text/plain (dcgm-exporter's Prometheus text)",
        ct));
  }
  if (!r.ok()) return r.status();
  return Reply({{"samples", r->samples},
                {"stored", r->stored},
                {"blank", r->blank},
                {"ignored", r->ignored},
                {"xidEvents", r->xid_events},
                {"unmatched", r->unmatched},
                {"unmatchedGpus", r->unmatched_gpus}});
}

absl::StatusOr<HttpResponse> TelemetryApi::Query(const HttpRequest& req, const Principal& who) {
  const std::string series = req.Param("series");
  const size_t a = series.find(':'), b = series.rfind(':');
  if (series.empty() || a == std::string::npos || a == b) {
    return absl::InvalidArgumentError(
        "series: must be SCOPE:ID:METRIC, e.g. gpu:GPU-…:power_w, pool:PROJECT/POOL:utilization, "
        "cluster:NAME:used_gpus");
  }
  const std::string scope = series.substr(0, a), id = series.substr(a + 1, b - a - 1), metric = series.substr(b + 1);
  const int64_t now = Seconds(clock_.Now());
  absl::StatusOr<Range> range = ParseRange(req, now, 3600, 60);
  if (!range.ok()) return range.status();
  const bool aggregate_metric = metric == "utilization" || metric == "allocated_gpus" || metric == "used_gpus";
  std::optional<telemetry::Field> field = telemetry::FieldFromSeries(metric);
  // fleet_power_w: every GPU of a cluster, allocated or not (power_w counts pools' devices only).
  if (metric == "fleet_power_w" && scope != "cluster") {
    return absl::InvalidArgumentError("metric \"fleet_power_w\" is a cluster's: cluster:NAME:fleet_power_w");
  }
  if (!aggregate_metric && !field && metric != "power_w" && metric != "fleet_power_w") {
    std::string names;
    for (const telemetry::FieldInfo& f : telemetry::AllFields()) names += std::string(f.series) + ", ";
    return absl::InvalidArgumentError(fmt::format(
        "metric \"{}\": use utilization, allocated_gpus or used_gpus, or a reading: {}", metric, names.substr(0, names.size() - 2)));
  }

  std::vector<DeviceRef> devices;
  std::string unit = field ? "" : "GPUs";
  if (scope == "gpu" || scope == "mig") {
    if (!who.operator_()) return absl::PermissionDeniedError("GPU and MIG series are for operators");
    std::string gpu = id;
    int gi = -1;
    if (scope == "mig") {
      if (id.starts_with("MIG-")) {
        const std::shared_ptr<const DecodedGpus::View> view = gpus_.Get();
        for (const model::GpuCapacity* g : view->in_order) {
          for (const model::MigInstance& m : g->status.mig_instances) {
            if (m.uuid == id) {
              gpu = g->spec.uuid;
              gi = hub_.FindInstance(gpu, static_cast<int>(m.start), m.uuid).value_or(-1);
            }
          }
        }
      } else if (size_t slash = id.find('/'); slash != std::string::npos) {
        gpu = id.substr(0, slash);
        const std::string g = id.substr(slash + 1);
        auto [end, ec] = std::from_chars(g.data(), g.data() + g.size(), gi);
        if (ec != std::errc() || end != g.data() + g.size()) gi = -1;
      }
      if (gi < 0) {
        return absl::NotFoundError(fmt::format(
            "MIG instance {}: no readings name it; use GPU-…/<GPU instance id> or a MIG UUID an agent reported", id));
      }
    }
    if (std::optional<model::GpuCapacity> g = DecodeOne<model::GpuCapacity>(cache_, "", ToLower(gpu))) {
      gpu = g->spec.uuid;  // the inventory's spelling
    }
    devices.push_back({gpu, gi, 1});
    if (field) {
      const telemetry::FieldInfo& info = telemetry::Info(*field);
      const std::string dev = info.per_instance && gi >= 0 ? fmt::format("{}/{}", gpu, gi) : gpu;
      if (!hub_.series().Latest(dev, *field)) {
        return absl::NotFoundError(fmt::format("no {} readings for {} {}", metric, scope, id));
      }
      json points = json::array();
      ASSIGN_OR_RETURN(const std::vector<telemetry::Bucket> buckets,
                       hub_.Query(dev, *field, range->from, range->to, range->step, now));
      for (const telemetry::Bucket& bk : buckets) {
        points.push_back({{"t", bk.t}, {"value", Nullable(bk.mean, bk.count > 0)}, {"max", Nullable(bk.max, bk.count > 0)}});
      }
      return Reply({{"series", series}, {"scope", scope}, {"id", id}, {"metric", metric}, {"from", range->from},
                    {"to", range->to}, {"step", range->step}, {"points", points}});
    }
  } else if (scope == "pool" || scope == "project" || scope == "workload" || scope == "cluster") {
    if (field && metric != "power_w") {  // power sums over the devices, weighted
      return absl::InvalidArgumentError(fmt::format(
          "metric \"{}\" is per device; for a {} use utilization, allocated_gpus, used_gpus or power_w", metric, scope));
    }
    const std::shared_ptr<const DecodedGpus::View> view = gpus_.Get();
    const telemetry::GpuLookup gpus = view->Lookup();
    std::vector<model::GpuPool> pools;
    std::string project;
    if (scope == "pool" || scope == "workload") {
      const size_t slash = id.find('/');
      if (slash == std::string::npos) {
        return absl::InvalidArgumentError(fmt::format("{} id \"{}\": must be PROJECT/NAME", scope, id));
      }
      project = id.substr(0, slash);
      const std::string name = id.substr(slash + 1);
      if (!who.Sees(project)) return absl::NotFoundError(fmt::format("{} {} not found", scope, id));
      if (scope == "pool") {
        std::optional<model::GpuPool> p = DecodeOne<model::GpuPool>(cache_, project, name);
        if (!p) return absl::NotFoundError(fmt::format("pool {} not found", id));
        pools.push_back(std::move(*p));
      } else {
        // A workload is its runs: every Profile of it, each device counted from the run's start
        // to its end, so that finished and preempted runs still show.
        if (!DecodeOne<model::Workload>(cache_, project, name)) {
          return absl::NotFoundError(fmt::format("workload {} not found", id));
        }
        for (const model::Profile& run : DecodeAll<model::Profile>(cache_, project)) {
          if (run.spec.pod != name) continue;
          for (const model::WorkloadDevice& d : run.spec.devices) {
            DeviceRef ref = telemetry::WorkloadDeviceRef(hub_, d, gpus);
            ref.from_s = Seconds(run.spec.start);
            if (run.spec.end) ref.to_s = Seconds(*run.spec.end);
            devices.push_back(std::move(ref));
          }
        }
      }
    } else if (scope == "project") {
      if (!who.Sees(id)) return absl::NotFoundError(fmt::format("project {} not found", id));
      if (!cache_.Get(model::Project::kKind, "", id)) return absl::NotFoundError(fmt::format("project {} not found", id));
      pools = DecodeAll<model::GpuPool>(cache_, id);
    } else {
      if (!who.operator_()) return absl::PermissionDeniedError("cluster series are for operators");
      if (!cache_.Get(model::Cluster::kKind, "", id)) return absl::NotFoundError(fmt::format("cluster {} not found", id));
      if (metric == "fleet_power_w") {
        for (const model::GpuCapacity* g : view->in_order) {
          if (g->spec.cluster != id) continue;
          DeviceRef all;
          all.gpu_uuid = g->spec.uuid;
          devices.push_back(std::move(all));
        }
      } else {
        // The devices in this cluster of every live pool: a pool that names no cluster gets
        // its devices wherever they fit, so its spec says nothing of where they are.
        for (const model::GpuPool& p : DecodeAll<model::GpuPool>(cache_)) {
          if (!model::PoolIsLive(p)) continue;
          for (const model::AllocatedDevice& d : p.status.allocation) {
            if (d.cluster == id) devices.push_back(DeviceOf(hub_, d, gpus).ref);
          }
        }
      }
    }
    for (const model::GpuPool& p : pools) {
      if (!model::PoolIsLive(p)) continue;
      for (const telemetry::AssessedDevice& d : PoolDevices(hub_, p, gpus)) devices.push_back(d.ref);
    }
  } else {
    return absl::InvalidArgumentError(
        fmt::format("scope \"{}\": use gpu, mig, workload, pool, project or cluster", scope));
  }

  json points = json::array();
  if (metric == "power_w" || metric == "fleet_power_w") {
    // GPU-level power attributed by each device's share of its GPU: an estimate under MIG.
    std::vector<double> sum(static_cast<size_t>((range->to - range->from + range->step - 1) / range->step), 0);
    std::vector<bool> has(sum.size(), false);
    for (const DeviceRef& d : devices) {
      ASSIGN_OR_RETURN(const std::vector<telemetry::Bucket> q,
                       hub_.Query(d.gpu_uuid, telemetry::Field::kPowerW, range->from, range->to, range->step, now));
      for (size_t i = 0; i < q.size() && i < sum.size(); ++i) {
        if (q[i].count == 0) continue;
        sum[i] += q[i].mean * d.weight;
        has[i] = true;
      }
    }
    for (size_t i = 0; i < sum.size(); ++i) {
      points.push_back({{"t", range->from + static_cast<int64_t>(i) * range->step}, {"value", Nullable(sum[i], has[i])}});
    }
    unit = "W";
  } else {
    ASSIGN_OR_RETURN(const std::vector<telemetry::UtilizationPoint> utilization,
                     hub_.Utilization(devices, range->from, range->to, range->step, now));
    for (const telemetry::UtilizationPoint& p : utilization) {
      const bool has = p.covered_gpus > 0;
      double v = p.allocated_gpus;
      if (metric == "utilization") v = p.utilization();
      if (metric == "used_gpus") v = p.used_gpus;
      points.push_back({{"t", p.t}, {"value", Nullable(v, metric == "allocated_gpus" || has)}});
    }
    if (metric == "utilization") unit = "ratio";
  }
  return Reply({{"series", series}, {"scope", scope}, {"id", id}, {"metric", metric}, {"unit", unit},
                {"from", range->from}, {"to", range->to}, {"step", range->step}, {"devices", devices.size()},
                {"points", points}});
}

absl::StatusOr<HttpResponse> TelemetryApi::Alerts(const HttpRequest& req, const Principal&) {
  const std::string active = req.Param("active");
  if (!active.empty() && active != "true" && active != "false") {
    return absl::InvalidArgumentError("active: must be true or false");
  }
  std::map<std::string, std::pair<std::string, std::string>> where;  // uuid -> (cluster, node)
  const std::shared_ptr<const DecodedGpus::View> view = gpus_.Get();
  for (const model::GpuCapacity* g : view->in_order) where[g->spec.uuid] = {g->spec.cluster, g->spec.node};
  json items = json::array();
  for (const telemetry::Alert& a : hub_.Alerts(active == "true")) {
    auto w = where.find(a.gpu_uuid);
    json j = {{"id", a.id},
              {"time", FormatTime(Time(std::chrono::milliseconds(a.t_ms)))},
              {"severity", telemetry::ToString(a.severity)},
              {"gpu", a.gpu_uuid},
              {"cluster", w == where.end() ? "" : w->second.first},
              {"node", w == where.end() ? "" : w->second.second},
              {"source", a.source},
              {"condition", a.condition},
              {"reason", a.reason},
              {"message", a.message},
              {"action", a.action},
              {"actionCode", a.action_code},
              {"params", a.params},
              {"active", a.active}};
    if (a.gpu_instance >= 0) j["gpuInstance"] = a.gpu_instance;
    if (a.resolved_ms > 0) j["resolved"] = FormatTime(Time(std::chrono::milliseconds(a.resolved_ms)));
    items.push_back(std::move(j));
  }
  if (more_alerts_) {
    json more = json::parse(more_alerts_(), nullptr, false);
    if (more.is_array()) {
      for (json& j : more) items.insert(items.begin(), std::move(j));  // active: first
    }
  }
  return Reply({{"items", items}});
}

absl::StatusOr<HttpResponse> TelemetryApi::Assessment(const HttpRequest& req, const Principal& who) {
  const int64_t now = Seconds(clock_.Now());
  absl::StatusOr<Range> range = ParseRange(req, now, 86400, 60);
  if (!range.ok()) return range.status();
  // Allocated GPU-hours are counted to `to`: a window into the future would count hours not had.
  if (range->to > now + kClockSkew) {
    return absl::InvalidArgumentError(fmt::format("to: {} is in the future; the assessment covers time past", range->to));
  }
  telemetry::AssessmentOptions opt;
  if (req.HasParam("idleBelow")) {
    const std::string v = req.Param("idleBelow");
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), opt.idle_below);
    if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(opt.idle_below) || opt.idle_below < 0 ||
        opt.idle_below > 1) {
      return absl::InvalidArgumentError("idleBelow: a utilization between 0 and 1, e.g. 0.05");
    }
  }
  if (req.HasParam("idleFor")) {
    const std::string v = req.Param("idleFor");
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), opt.idle_for_s);
    if (ec != std::errc() || end != v.data() + v.size() || opt.idle_for_s <= 0 || opt.idle_for_s > kMaxSpan) {
      return absl::InvalidArgumentError(fmt::format("idleFor: a number of seconds from 1 to {}", kMaxSpan));
    }
  }
  const std::shared_ptr<const DecodedGpus::View> view = gpus_.Get();
  const telemetry::GpuLookup gpus = view->Lookup();
  json pools = json::array();
  struct ProjectSum {
    double allocated = 0, used = 0, covered = 0;
    int idle = 0, pools = 0;
  };
  std::map<std::string, ProjectSum> projects;
  for (const model::GpuPool& p : DecodeAll<model::GpuPool>(cache_)) {
    if (!model::PoolIsLive(p) || p.status.allocation.empty() || !who.Sees(p.metadata.ns)) continue;
    telemetry::PoolUsage u{p.metadata.ns, p.metadata.name, 0, PoolDevices(hub_, p, gpus), 0, {}};
    // Allocated and used GPU-hours as the pool's invoice counts them: from its meter.
    if (std::optional<model::UsageRecord> meter = DecodeOne<model::UsageRecord>(cache_, p.metadata.ns, p.metadata.name);
        meter && meter->spec.pool_uid == p.metadata.uid) {
      const std::vector<model::UsageRecord> meters = {*meter};
      u.allocated_gpu_hours =
          billing::CostOver(meters, billing::PriceBook({}), Time(std::chrono::seconds(range->from)),
                            Time(std::chrono::seconds(range->to)))
              .gpu_hours;
      u.metered = telemetry::MeteredDevices(hub_, meters, p.metadata.name, "", "", now);
      u.allocated_since = range->to;
      for (const model::UsageRecord::Held& h : model::BilledDevices(*meter)) {
        u.allocated_since = std::min(u.allocated_since, std::max(Seconds(meter->spec.start), Seconds(h.since)));
      }
    }
    ASSIGN_OR_RETURN(const telemetry::PoolAssessment a, telemetry::AssessPool(hub_, u, range->from, range->to, now, opt));
    pools.push_back({{"project", a.ns},
                     {"pool", a.name},
                     {"allocatedGpus", a.allocated_gpus},
                     {"allocatedGpuHours", a.allocated_gpu_hours},
                     {"usedGpuHours", a.used_gpu_hours},
                     {"measuredGpuHours", a.covered_gpu_hours},
                     {"utilization", a.utilization},
                     {"idle", a.idle},
                     {"idleSeconds", a.idle_seconds},
                     {"peakFbUsedMiB", a.peak_fb_used_mib},
                     {"peakSmGpuFraction", a.peak_sm_gpu_fraction},
                     {"suggestion", a.suggestion},
                     {"suggestionCode", a.suggestion_code},
                     {"suggestionParams", a.suggestion_params}});
    ProjectSum& s = projects[a.ns];
    s.allocated += a.allocated_gpu_hours;
    s.used += a.used_gpu_hours;
    s.covered += a.covered_gpu_hours;
    s.idle += a.idle ? 1 : 0;
    ++s.pools;
  }
  json by_project = json::array();
  for (const auto& [name, s] : projects) {
    by_project.push_back({{"project", name},
                          {"pools", s.pools},
                          {"idlePools", s.idle},
                          {"allocatedGpuHours", s.allocated},
                          {"usedGpuHours", s.used},
                          {"utilization", s.covered > 0 ? s.used / s.covered : 0}});
  }
  return Reply({{"from", range->from}, {"to", range->to}, {"idleBelow", opt.idle_below},
                {"idleFor", opt.idle_for_s}, {"pools", pools}, {"projects", by_project}});
}

void TelemetryApi::AppendMetrics(std::string& out) {
  MetricsText w(out);
  w.Family("gpuaas_telemetry_samples_total", "counter", "Readings received from agents and dcgm-exporter.");
  w.Sample("gpuaas_telemetry_samples_total", {}, hub_.samples_total());
  w.Family("gpuaas_telemetry_series", "gauge", "Series held in memory.");
  w.Sample("gpuaas_telemetry_series", {}, hub_.series().series_count());
  w.Family("gpuaas_telemetry_second_reporter_readings_total", "counter",
           "Counter readings set aside: another agent or scrape reports the same GPU.");
  w.Sample("gpuaas_telemetry_second_reporter_readings_total", {}, hub_.second_reporter_readings());
  w.Family("gpuaas_telemetry_memory_bytes", "gauge", "Memory held by the series.");
  w.Sample("gpuaas_telemetry_memory_bytes", {}, hub_.series().MemoryBytes());
  std::map<std::string_view, int> active = {{"critical", 0}, {"warning", 0}, {"info", 0}};
  for (const telemetry::Alert& a : hub_.Alerts(true)) ++active[telemetry::ToString(a.severity)];
  w.Family("gpuaas_alerts_active", "gauge", "Active GPU health alerts by severity.");
  for (const auto& [sev, n] : active) w.Sample("gpuaas_alerts_active", {{"severity", sev}}, n);
}

}  // namespace gpuaas::api::internal
