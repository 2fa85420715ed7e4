#include "api/internal/fleet_api.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/internal/objects.h"
#include "catalog/catalog.h"
#include "catalog/room.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "model/pool.h"
#include "model/summary.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {

using json = nlohmann::json;

namespace {

constexpr size_t kDefaultLimit = 100;
constexpr size_t kMaxLimit = 20000;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

HttpResponse JsonReply(const json& j) { return HttpResponse{200, "application/json", j.dump(), {}, nullptr}; }

// One GPU as a row: inventory plus the latest readings.
struct Row {
  const model::GpuCapacity* gpu = nullptr;
  uint32_t place = 0;  // rank by place (DecodedGpus::View::PlaceRank)
  int64_t devices = 0;
  int64_t allocated = 0;
  std::optional<double> power_w, sm_active, temp_c, fb_used_mib;
  bool filled = false;  // readings looked up
};

std::optional<double> Latest(const telemetry::Hub* hub, const std::string& uuid, telemetry::Field f) {
  if (hub == nullptr) return std::nullopt;
  auto v = hub->series().Latest(uuid, f);
  if (!v || !std::isfinite(v->second)) return std::nullopt;
  return v->second;
}

json Nullable(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// `s` as a JSON string: quotes, backslashes and control characters escaped, UTF-8 as it is.
void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  out += '"';
}

// What the free memory slices of MIG GPUs can still take, for their drawings: per GPU the
// catalogue's open slices and how many more instances of each profile fit (catalog/room.h).
// Layouts repeat across a fleet, so each model's layout is worked out once per answer.
class MigRooms {
 public:
  // {"memorySlices", "openSlots", "fits": [{"profile", "count"}]}, or null for a GPU whose MIG
  // mode is off or whose model the catalogue does not know as MIG-capable. A layout with a
  // profile the model lacks, or one the catalogue refuses, has nothing open and fits nothing.
  json Of(const model::GpuCapacity& g) {
    if (g.status.mig_mode != model::MigMode::kEnabled) return nullptr;
    const catalog::GpuModel* m = catalog::FindModel(g.spec.model);
    if (m == nullptr || !m->mig_capable) return nullptr;
    std::vector<std::string> parts;
    catalog::Layout used;
    for (const model::MigInstance& i : g.status.mig_instances) {
      parts.push_back(fmt::format("{}@{}", i.profile, i.start));
      used.push_back({catalog::FindProfile(*m, i.profile), static_cast<int>(i.start)});
    }
    std::sort(parts.begin(), parts.end());
    std::string key(m->name);
    for (const std::string& part : parts) key += " " + part;
    auto [it, added] = memo_.try_emplace(std::move(key));
    if (added) {
      json fits = json::array();
      for (const catalog::MigProfile& p : m->profiles) {
        if (int n = catalog::FitsMore(*m, used, p); n > 0) {
          fits.push_back({{"profile", p.name}, {"count", n}});
        }
      }
      it->second = {{"memorySlices", m->memory_slices},
                    {"openSlots", catalog::OpenSlots(*m, used)},
                    {"fits", std::move(fits)}};
    }
    return it->second;
  }

 private:
  std::map<std::string, json> memo_;
};

enum class SortKey { kCluster, kNode, kUuid, kModel, kHealth, kMig, kAllocated, kPower, kSm, kTemp, kMemory };

const std::map<std::string, SortKey>& SortKeys() {
  static const std::map<std::string, SortKey> k = {
      {"cluster", SortKey::kCluster}, {"node", SortKey::kNode},   {"uuid", SortKey::kUuid},
      {"model", SortKey::kModel},     {"health", SortKey::kHealth}, {"mig", SortKey::kMig},
      {"allocated", SortKey::kAllocated}, {"power", SortKey::kPower}, {"sm", SortKey::kSm},
      {"temp", SortKey::kTemp},       {"memory", SortKey::kMemory}};
  return k;
}

}  // namespace

absl::StatusOr<HttpResponse> FleetApi::Gpus(const HttpRequest& req, const Principal& who) {
  const std::string sort = req.HasParam("sort") ? req.Param("sort") : "cluster";
  const auto sort_key = SortKeys().find(sort);
  if (sort_key == SortKeys().end()) {
    std::string keys;
    for (const auto& [k, _] : SortKeys()) keys += (keys.empty() ? "" : ", ") + k;
    return absl::InvalidArgumentError(fmt::format("sort: \"{}\" is not one of {}", sort, keys));
  }
  const SortKey by = sort_key->second;
  const std::string order = req.HasParam("order") ? req.Param("order") : "asc";
  if (order != "asc" && order != "desc") return absl::InvalidArgumentError("order: must be asc or desc");
  const std::string view = req.Param("view");
  if (!view.empty() && view != "rows" && view != "cells") return absl::InvalidArgumentError("view: must be rows or cells");
  const std::string health = req.Param("health");
  if (!health.empty() && health != "Healthy" && health != "Unhealthy" && health != "Unknown") {
    return absl::InvalidArgumentError("health: must be Healthy, Unhealthy or Unknown");
  }
  const std::string mig = req.Param("mig");
  if (!mig.empty() && mig != "enabled" && mig != "disabled") return absl::InvalidArgumentError("mig: must be enabled or disabled");
  size_t offset = 0, limit = kDefaultLimit;
  if (req.HasParam("offset")) {
    std::optional<int64_t> o = ParseInt(req.Param("offset"));
    if (!o || *o < 0) return absl::InvalidArgumentError(fmt::format("offset: \"{}\" is not a non-negative integer", req.Param("offset")));
    offset = static_cast<size_t>(*o);
  }
  if (req.HasParam("limit")) {
    std::optional<int64_t> l = ParseInt(req.Param("limit"));
    if (!l || *l < 1 || *l > static_cast<int64_t>(kMaxLimit)) {
      return absl::InvalidArgumentError(fmt::format("limit: \"{}\" is not an integer from 1 to {}", req.Param("limit"), kMaxLimit));
    }
    limit = static_cast<size_t>(*l);
  }
  const std::string q = Lower(req.Param("q"));
  const std::string cluster = req.Param("cluster"), model_name = req.Param("model");

  const std::shared_ptr<const DecodedGpus::View> fleet = gpus_.Get();
  // Pools holding devices on each GPU, named only to those who may see the pool's project.
  // Devices every live pool holds (allocated, whoever's), and the pools the caller may name.
  std::map<std::string, std::set<std::string>> pools_of;
  const std::vector<model::GpuPool> pools = DecodeAll<model::GpuPool>(cache_);
  const model::HeldDevices held = model::HeldByPools(pools);
  for (const model::GpuPool& p : pools) {
    if (!who.Sees(p.metadata.ns) || !model::PoolIsLive(p)) continue;
    for (const model::AllocatedDevice& d : p.status.allocation) {
      pools_of[Lower(d.gpu_uuid)].insert(p.metadata.ns + "/" + p.metadata.name);
    }
  }
  const std::vector<uint32_t>& place_rank = fleet->PlaceRank();
  // Devices lent now, by GPU (lower-case UUID): named to those who may see the lender's project
  // or the borrower's, the borrower only to the latter.
  std::map<std::string, std::vector<json>> lent_on;
  const std::shared_ptr<const std::vector<model::Loan>> open_loans = OpenLoans();
  for (const model::Loan& l : *open_loans) {
    if (!who.Sees(l.spec.lender) && !who.Sees(l.spec.borrower)) continue;
    for (const model::WorkloadDevice& d : l.spec.devices) {
      json entry = {{"device", d.instance_uuid.empty() ? d.gpu_uuid : d.instance_uuid},
                    {"pool", l.spec.lender + "/" + l.spec.pool}};
      if (who.Sees(l.spec.borrower)) {
        entry["borrower"] = l.spec.borrower;
        entry["workload"] = l.spec.workload;
      }
      lent_on[Lower(d.gpu_uuid)].push_back(std::move(entry));
    }
  }
  // The GPUs to look at, as indexes into the fleet: all of them; or, for a page of the whole
  // fleet in place order (the dashboard's first look), only the page's, read off the order.
  const std::vector<uint32_t>& place_order = fleet->PlaceOrder();
  const size_t n = fleet->in_order.size();
  const bool unfiltered = cluster.empty() && model_name.empty() && health.empty() && mig.empty() && q.empty();
  const bool page_only = unfiltered && by == SortKey::kCluster && view != "cells";
  std::vector<uint32_t> look_at;
  size_t first = offset;  // where the page starts among the rows
  if (page_only) {
    for (size_t i = offset; i < n && i < offset + limit; ++i) {
      look_at.push_back(place_order[order == "desc" ? n - 1 - i : i]);
    }
    first = 0;
  } else {
    look_at.resize(n);
    for (uint32_t i = 0; i < n; ++i) look_at[i] = i;
  }
  std::vector<Row> out;
  out.reserve(look_at.size());
  for (const uint32_t at : look_at) {
    const model::GpuCapacity& g = *fleet->in_order[at];
    if (!cluster.empty() && g.spec.cluster != cluster) continue;
    if (!model_name.empty() && g.spec.model != model_name) continue;
    if (!health.empty() && model::ToString(g.status.health) != health) continue;
    const bool mig_on = g.status.mig_mode == model::MigMode::kEnabled;
    if (!mig.empty() && mig_on != (mig == "enabled")) continue;
    if (!q.empty()) {
      const std::string hay = Lower(g.spec.uuid + " " + g.spec.node + " " + g.spec.cluster + " " + g.spec.model);
      if (hay.find(q) == std::string::npos) continue;
    }
    Row r;
    r.gpu = &g;
    r.place = place_rank[at];
    if (mig_on) {
      r.devices = static_cast<int64_t>(g.status.mig_instances.size());
      for (const model::MigInstance& i : g.status.mig_instances) {
        r.allocated += i.allocated || model::Held(held, g.spec.uuid, i.start) ? 1 : 0;
      }
    } else {
      r.devices = 1;
      r.allocated = g.status.allocated || model::Held(held, g.spec.uuid, -1) ? 1 : 0;
    }
    out.push_back(std::move(r));
  }
  // Readings and pools are looked up only for the rows that need them: every row when the sort
  // or the view uses them, else the page's rows only.
  auto fill = [&](Row& r) {
    if (r.filled) return;
    r.filled = true;
    const std::string& uuid = r.gpu->spec.uuid;
    r.power_w = Latest(hub_, uuid, telemetry::Field::kPowerW);
    r.sm_active = Latest(hub_, uuid, telemetry::Field::kSmActive);
    r.temp_c = Latest(hub_, uuid, telemetry::Field::kTempC);
    r.fb_used_mib = Latest(hub_, uuid, telemetry::Field::kFbUsedMib);
  };
  const bool by_reading = by == SortKey::kPower || by == SortKey::kSm || by == SortKey::kTemp || by == SortKey::kMemory;
  if (by_reading) {
    for (Row& r : out) fill(r);
  }
  auto by_value = [](const std::optional<double>& a, const std::optional<double>& b) {
    // No reading sorts last either way round: compare presence first.
    return std::make_pair(!a.has_value(), a.value_or(0)) < std::make_pair(!b.has_value(), b.value_or(0));
  };
  auto fraction = [](const Row& r) {
    return r.devices ? static_cast<double>(r.allocated) / static_cast<double>(r.devices) : 0.0;
  };
  // A total order: every key ends in the place, which no two GPUs share.
  auto less = [&](const Row& a, const Row& b) -> bool {
    const model::GpuCapacity& ga = *a.gpu;
    const model::GpuCapacity& gb = *b.gpu;
    switch (by) {
      case SortKey::kCluster:
        break;
      case SortKey::kNode:
        if (int c = ga.spec.node.compare(gb.spec.node); c != 0) return c < 0;
        if (ga.spec.index != gb.spec.index) return ga.spec.index < gb.spec.index;
        break;
      case SortKey::kUuid:
        if (int c = ga.spec.uuid.compare(gb.spec.uuid); c != 0) return c < 0;
        break;
      case SortKey::kModel:
        if (int c = ga.spec.model.compare(gb.spec.model); c != 0) return c < 0;
        break;
      case SortKey::kHealth:
        if (ga.status.health != gb.status.health) {
          return model::ToString(ga.status.health) > model::ToString(gb.status.health);  // Unhealthy first
        }
        break;
      case SortKey::kMig:
        if (ga.status.mig_mode != gb.status.mig_mode) return ga.status.mig_mode > gb.status.mig_mode;
        break;
      case SortKey::kAllocated:
        if (fraction(a) != fraction(b)) return fraction(a) < fraction(b);
        break;
      case SortKey::kPower:
        if (a.power_w != b.power_w) return by_value(a.power_w, b.power_w);
        break;
      case SortKey::kSm:
        if (a.sm_active != b.sm_active) return by_value(a.sm_active, b.sm_active);
        break;
      case SortKey::kTemp:
        if (a.temp_c != b.temp_c) return by_value(a.temp_c, b.temp_c);
        break;
      case SortKey::kMemory:
        if (a.fb_used_mib != b.fb_used_mib) return by_value(a.fb_used_mib, b.fb_used_mib);
        break;
    }
    return a.place < b.place;
  };
  const bool desc = order == "desc";
  auto cmp = [&](const Row& a, const Row& b) { return desc ? less(b, a) : less(a, b); };
  // A page needs only its rows and those before it in order: at 100,000 GPUs a page of 50 is a
  // partial sort, not a whole one.
  const size_t total = page_only ? n : out.size();
  const size_t needed = view == "cells" ? out.size() : std::min(out.size(), first + limit);
  if (needed < out.size()) {
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(needed), out.end(), cmp);
  } else {
    std::sort(out.begin(), out.end(), cmp);
  }

  if (view == "cells") {
    // The whole (filtered) fleet in columns: one cell per GPU in the heatmap. Written directly
    // (10,000 GPUs are about 800 KB), not through a JSON tree.
    std::string uuids, nodes, states, alloc, sm;
    for (size_t i = 0; i < out.size(); ++i) {
      Row& r = out[i];
      if (!r.filled) r.sm_active = Latest(hub_, r.gpu->spec.uuid, telemetry::Field::kSmActive);
      const char* sep = i == 0 ? "" : ",";
      uuids += sep;
      AppendJsonString(uuids, r.gpu->spec.uuid);
      nodes += sep;
      AppendJsonString(nodes, r.gpu->spec.node);
      states += sep;
      AppendJsonString(states, model::ToString(r.gpu->status.health));
      fmt::format_to(std::back_inserter(alloc), "{}{:.4g}", sep,
                     r.devices ? static_cast<double>(r.allocated) / static_cast<double>(r.devices) : 0.0);
      if (r.sm_active) {
        fmt::format_to(std::back_inserter(sm), "{}{:.4g}", sep, *r.sm_active);
      } else {
        fmt::format_to(std::back_inserter(sm), "{}null", sep);
      }
    }
    std::string body = fmt::format(R"({{"total":{},"uuid":[{}],"node":[{}],"health":[{}],"allocated":[{}],"smActive":[{}]}})",
                                   out.size(), uuids, nodes, states, alloc, sm);
    return HttpResponse{200, "application/json", std::move(body), {}, nullptr};
  }
  json items = json::array();
  MigRooms rooms;
  for (size_t i = first; i < out.size() && i < first + limit; ++i) {
    Row& r = out[i];
    fill(r);
    const model::GpuCapacity& g = *r.gpu;
    std::vector<std::string> holders;
    if (auto it = pools_of.find(Lower(g.spec.uuid)); it != pools_of.end()) holders.assign(it->second.begin(), it->second.end());
    json lent = json::array();
    if (auto it = lent_on.find(Lower(g.spec.uuid)); it != lent_on.end()) lent = it->second;
    json instances = json::array();
    for (const model::MigInstance& m : g.status.mig_instances) {
      instances.push_back({{"profile", m.profile}, {"start", m.start}, {"size", m.size}, {"uuid", m.uuid},
                           {"allocated", m.allocated || model::Held(held, g.spec.uuid, m.start)}});
    }
    items.push_back({{"name", g.metadata.name},
                     {"uuid", g.spec.uuid},
                     {"cluster", g.spec.cluster},
                     {"node", g.spec.node},
                     {"index", g.spec.index},
                     {"model", g.spec.model},
                     {"memoryMiB", g.spec.memory_mib},
                     {"migMode", model::ToString(g.status.mig_mode)},
                     {"health", model::ToString(g.status.health)},
                     {"devices", r.devices},
                     {"allocatedDevices", r.allocated},
                     {"powerW", Nullable(r.power_w)},
                     {"smActive", Nullable(r.sm_active)},
                     {"tempC", Nullable(r.temp_c)},
                     {"fbUsedMiB", Nullable(r.fb_used_mib)},
                     {"migInstances", std::move(instances)},
                     {"migRoom", rooms.Of(g)},
                     {"pools", std::move(holders)},
                     {"lent", std::move(lent)}});
  }
  return JsonReply({{"total", total}, {"offset", offset}, {"sort", sort}, {"order", order}, {"items", std::move(items)}});
}

std::shared_ptr<const std::vector<model::Loan>> FleetApi::OpenLoans() {
  std::shared_ptr<const store::KindSnapshot> snap = cache_.Snapshot(std::string(model::Loan::kKind));
  std::lock_guard<std::mutex> lock(loans_mu_);
  if (open_loans_ != nullptr && loans_snapshot_ == snap) return open_loans_;
  auto open = std::make_shared<std::vector<model::Loan>>();
  for (const auto& obj : snap->items) {
    absl::StatusOr<model::Loan> l = model::Decode<model::Loan>(obj->json);
    if (l.ok() && !l->spec.end) open->push_back(std::move(*l));
  }
  loans_snapshot_ = snap;
  open_loans_ = std::move(open);
  return open_loans_;
}

absl::StatusOr<HttpResponse> FleetApi::Catalog(const HttpRequest&) {
  json models = json::array();
  for (const catalog::GpuModel& m : catalog::AllModels()) {
    json profiles = json::array();
    for (const catalog::MigProfile& p : m.profiles) {
      profiles.push_back({{"name", p.name},
                          {"id", p.id},
                          {"computeSlices", p.compute_slices},
                          {"memorySlices", p.memory_slices},
                          {"memoryGB", p.memory_gb},
                          {"maxCount", p.max_count},
                          {"starts", std::vector<int>(p.starts.begin(), p.starts.end())}});
    }
    models.push_back({{"name", m.name},
                      {"family", m.family},
                      {"memoryGB", m.memory_gb},
                      {"migCapable", m.mig_capable},
                      {"computeSlices", m.compute_slices},
                      {"memorySlices", m.memory_slices},
                      {"profiles", std::move(profiles)}});
  }
  return JsonReply({{"apiVersion", "gpuaas.io/v1"}, {"kind", "Catalog"}, {"models", std::move(models)}});
}

}  // namespace gpuaas::api::internal
