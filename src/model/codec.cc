#include "model/codec.h"

#include <array>
#include <utility>

#include "fmt/format.h"
#include "model/billing.h"
#include "model/json_reader.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"

namespace gpuaas::model {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<std::string_view, ConditionStatus>, 3> kConditionStatus = {{
    {"True", ConditionStatus::kTrue},
    {"False", ConditionStatus::kFalse},
    {"Unknown", ConditionStatus::kUnknown},
}};
constexpr std::array<std::pair<std::string_view, MigMode>, 2> kMigMode = {{
    {"Disabled", MigMode::kDisabled},
    {"Enabled", MigMode::kEnabled},
}};
constexpr std::array<std::pair<std::string_view, Health>, 3> kHealth = {{
    {"Healthy", Health::kHealthy},
    {"Unhealthy", Health::kUnhealthy},
    {"Unknown", Health::kUnknown},
}};

template <typename E, size_t N>
std::string_view Name(const std::array<std::pair<std::string_view, E>, N>& table, E v) {
  for (const auto& [name, value] : table) {
    if (value == v) return name;
  }
  return "Unknown";
}

// --- metadata and conditions -------------------------------------------------------------

json EncodeMeta(const ObjectMeta& m) {
  json j = json::object();
  j["name"] = m.name;
  if (!m.ns.empty()) j["namespace"] = m.ns;
  if (!m.uid.empty()) j["uid"] = m.uid;
  if (m.resource_version) j["resourceVersion"] = std::to_string(m.resource_version);
  if (m.generation) j["generation"] = m.generation;
  if (!m.labels.empty()) j["labels"] = m.labels;
  if (!m.annotations.empty()) j["annotations"] = m.annotations;
  if (m.creation_timestamp) j["creationTimestamp"] = FormatTime(*m.creation_timestamp);
  if (m.deletion_timestamp) j["deletionTimestamp"] = FormatTime(*m.deletion_timestamp);
  if (!m.finalizers.empty()) j["finalizers"] = m.finalizers;
  if (!m.managed_fields.empty()) {
    json a = json::array();
    for (const ManagedFields& f : m.managed_fields) {
      json fields = json::parse(f.fields, nullptr, /*allow_exceptions=*/false);
      if (fields.is_discarded()) fields = json::object();
      a.push_back({{"manager", f.manager},
                   {"operation", f.operation},
                   {"apiVersion", kApiVersion},
                   {"time", FormatTime(f.time)},
                   {"fieldsType", "FieldsV1"},
                   {"fieldsV1", std::move(fields)}});
    }
    j["managedFields"] = std::move(a);
  }
  return j;
}

ObjectMeta DecodeMetaObj(const JsonIn& in) {
  in.Doc("name", "The object's name: a DNS-1123 subdomain, unique in its project (or in the fleet).")
      .Doc("namespace", "The project the object belongs to; none for fleet-wide kinds.")
      .Doc("resourceVersion", "The store revision of the last write; a write that carries it fails if the object changed since.")
      .Doc("labels", "Key-value pairs to select objects by (labelSelector).")
      .Doc("annotations", "Key-value pairs for tools; not selectable.")
      .Doc("deletionTimestamp", "Set when a deletion was asked for and the object is kept until its finalizers are done.")
      .Doc("finalizers", "What must be done before a deleted object goes (gpuaas.io/release: the pool's release).")
      .Doc("managedFields", "Which writer (field manager) set which fields, for server-side apply.");
  ObjectMeta m;
  m.name = in.Str("name", /*required=*/true);
  m.ns = in.Str("namespace");
  m.uid = in.Str("uid");
  // Kubernetes sends resourceVersion as an opaque string; gpuaas's are decimal revisions.
  if (const std::string s = in.Str("resourceVersion"); !s.empty()) {
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    in.Check(*end == '\0' && v >= 0 && s.size() <= 18, "resourceVersion",
             fmt::format("\"{}\" is not a resource version", s));
    m.resource_version = v;
  }
  m.generation = in.Int("generation");
  m.labels = in.StrMap("labels");
  m.annotations = in.StrMap("annotations");
  m.creation_timestamp = in.TimeField("creationTimestamp");
  m.deletion_timestamp = in.TimeField("deletionTimestamp");
  m.finalizers = in.StrList("finalizers");
  in.Each("managedFields", [&](const JsonIn& f) {
    ManagedFields entry;
    entry.manager = f.Str("manager");
    entry.operation = f.Str("operation");
    f.Str("apiVersion");
    f.Str("fieldsType");
    entry.time = f.TimeField("time").value_or(Time{});
    if (const json* v = f.Find("fieldsV1")) entry.fields = v->dump();
    m.managed_fields.push_back(std::move(entry));
  });
  return m;
}

json EncodeConditions(const std::vector<Condition>& conds) {
  json a = json::array();
  for (const Condition& c : conds) {
    json j = {{"type", c.type}, {"status", Name(kConditionStatus, c.status)},
              {"lastTransitionTime", FormatTime(c.last_transition_time)}};
    if (!c.reason.empty()) j["reason"] = c.reason;
    if (!c.message.empty()) j["message"] = c.message;
    if (c.observed_generation) j["observedGeneration"] = c.observed_generation;
    a.push_back(std::move(j));
  }
  return a;
}

std::vector<Condition> DecodeConditions(const JsonIn& in) {
  std::vector<Condition> out;
  in.Each("conditions", [&](const JsonIn& c) {
    Condition cond;
    cond.type = c.Str("type", true);
    cond.status = c.Enum("status", kConditionStatus);
    cond.reason = c.Str("reason");
    cond.message = c.Str("message");
    cond.last_transition_time = c.TimeField("lastTransitionTime").value_or(Time{});
    cond.observed_generation = c.Int("observedGeneration");
    out.push_back(std::move(cond));
  });
  return out;
}

json Envelope(std::string_view kind, const ObjectMeta& meta) {
  return {{"apiVersion", kApiVersion}, {"kind", kind}, {"metadata", EncodeMeta(meta)}};
}

// Checks a document's apiVersion and kind.
void CheckKind(const JsonIn& root, std::string_view kind) {
  const std::string api = root.Str("apiVersion", true);
  root.Check(api == kApiVersion, "apiVersion", fmt::format("\"{}\" is not supported; expected {}", api, kApiVersion));
  const std::string k = root.Str("kind", true);
  root.Check(k == kind, "kind", fmt::format("\"{}\" does not match; expected {}", k, kind));
}

}  // namespace

// Reads a kind's document: Decode<T> runs it over the JSON, SchemaOf<T> over a describing cursor.
template <typename T>
T ReadKind(const JsonIn& root);

// --- Cluster -----------------------------------------------------------------------------

template <>
std::string Encode(const Cluster& c) {
  json j = Envelope(Cluster::kKind, c.metadata);
  json spec = json::object();
  if (!c.spec.display_name.empty()) spec["displayName"] = c.spec.display_name;
  if (!c.spec.driver.empty()) spec["driver"] = c.spec.driver;
  if (!c.spec.region.empty()) spec["region"] = c.spec.region;
  j["spec"] = std::move(spec);
  j["status"] = {{"nodes", c.status.nodes}, {"gpus", c.status.gpus}};
  if (!c.status.conditions.empty()) j["status"]["conditions"] = EncodeConditions(c.status.conditions);
  return j.dump();
}

template <>
Cluster ReadKind(const JsonIn& root) {
  CheckKind(root, Cluster::kKind);
  Cluster c;
  c.metadata = DecodeMetaObj(root.Obj("metadata"));
  if (root.Has("spec")) {
    JsonIn s = root.Obj("spec");
    c.spec.display_name = s.Str("displayName");
    c.spec.driver = s.Str("driver");
    c.spec.region = s.Str("region");
  }
  if (root.Has("status")) {
    JsonIn s = root.Obj("status");
    c.status.nodes = s.Int("nodes");
    c.status.gpus = s.Int("gpus");
    c.status.conditions = DecodeConditions(s);
  }
  return c;
}

// --- ClusterRegistration -----------------------------------------------------------------

template <>
std::string Encode(const ClusterRegistration& c) {
  json j = Envelope(ClusterRegistration::kKind, c.metadata);
  json spec = {{"driver", c.spec.driver}, {"kubeconfig", c.spec.kubeconfig}};
  if (!c.spec.context.empty()) spec["context"] = c.spec.context;
  if (!c.spec.display_name.empty()) spec["displayName"] = c.spec.display_name;
  if (!c.spec.region.empty()) spec["region"] = c.spec.region;
  if (!c.spec.registered_by.empty()) spec["registeredBy"] = c.spec.registered_by;
  j["spec"] = std::move(spec);
  return j.dump();
}

template <>
ClusterRegistration ReadKind(const JsonIn& root) {
  CheckKind(root, ClusterRegistration::kKind);
  ClusterRegistration c;
  c.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  c.spec.driver = s.Str("driver", true);
  s.Check(c.spec.driver == "kubernetes", "driver",
          fmt::format("\"{}\" is not supported; expected kubernetes", c.spec.driver));
  c.spec.kubeconfig = s.Str("kubeconfig", true);
  c.spec.context = s.Str("context");
  c.spec.display_name = s.Str("displayName");
  c.spec.region = s.Str("region");
  c.spec.registered_by = s.Str("registeredBy");
  return c;
}

// --- NodeCapacity ------------------------------------------------------------------------

template <>
std::string Encode(const NodeCapacity& n) {
  json j = Envelope(NodeCapacity::kKind, n.metadata);
  j["spec"] = {{"cluster", n.spec.cluster},         {"nodeName", n.spec.node_name},
               {"gpuModel", n.spec.gpu_model},      {"gpuProduct", n.spec.gpu_product},
               {"gpuCount", n.spec.gpu_count},      {"cpuCores", n.spec.cpu_cores},
               {"memoryBytes", n.spec.memory_bytes}, {"schedulable", n.spec.schedulable}};
  json st = {{"physical", {{"gpus", n.status.physical_gpus},
                           {"gpuMemoryMiB", n.status.physical_gpu_memory_mib},
                           {"migEnabledGpus", n.status.mig_enabled_gpus}}},
             {"allocatable", json::object()},
             {"allocated", json::object()}};
  for (const auto& [k, v] : n.status.allocatable) st["allocatable"][k] = v;
  for (const auto& [k, v] : n.status.allocated) st["allocated"][k] = v;
  st["podRequests"] = {{"cpuMilli", n.status.pod_cpu_milli}, {"memoryBytes", n.status.pod_memory_bytes}};
  if (!n.status.conditions.empty()) st["conditions"] = EncodeConditions(n.status.conditions);
  j["status"] = std::move(st);
  return j.dump();
}

template <>
NodeCapacity ReadKind(const JsonIn& root) {
  CheckKind(root, NodeCapacity::kKind);
  NodeCapacity n;
  n.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  n.spec.cluster = s.Str("cluster", true);
  n.spec.node_name = s.Str("nodeName", true);
  n.spec.gpu_model = s.Str("gpuModel");
  n.spec.gpu_product = s.Str("gpuProduct");
  n.spec.gpu_count = s.Int("gpuCount");
  n.spec.cpu_cores = s.Int("cpuCores");
  n.spec.memory_bytes = s.Int("memoryBytes");
  n.spec.schedulable = s.Bool("schedulable", true);
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    if (st.Has("physical")) {
      JsonIn p = st.Obj("physical");
      n.status.physical_gpus = p.Int("gpus");
      n.status.physical_gpu_memory_mib = p.Int("gpuMemoryMiB");
      n.status.mig_enabled_gpus = p.Int("migEnabledGpus");
    }
    n.status.allocatable = st.Counts("allocatable");
    n.status.allocated = st.Counts("allocated");
    if (st.Has("podRequests")) {
      JsonIn r = st.Obj("podRequests");
      n.status.pod_cpu_milli = r.Int("cpuMilli");
      n.status.pod_memory_bytes = r.Int("memoryBytes");
    }
    n.status.conditions = DecodeConditions(st);
  }
  return n;
}

// --- GpuCapacity -------------------------------------------------------------------------

template <>
std::string Encode(const GpuCapacity& g) {
  json j = Envelope(GpuCapacity::kKind, g.metadata);
  j["spec"] = {{"cluster", g.spec.cluster}, {"node", g.spec.node},
               {"uuid", g.spec.uuid},       {"index", g.spec.index},
               {"model", g.spec.model},     {"product", g.spec.product},
               {"memoryMiB", g.spec.memory_mib}, {"migCapable", g.spec.mig_capable}};
  json st = {{"migMode", Name(kMigMode, g.status.mig_mode)},
             {"health", Name(kHealth, g.status.health)},
             {"allocated", g.status.allocated}};
  if (!g.status.mig_instances.empty()) {
    json a = json::array();
    for (const MigInstance& m : g.status.mig_instances) {
      a.push_back({{"profile", m.profile},
                   {"placement", {{"start", m.start}, {"size", m.size}}},
                   {"uuid", m.uuid},
                   {"allocated", m.allocated}});
      if (!m.pods.empty()) a.back()["pods"] = m.pods;
    }
    st["migInstances"] = std::move(a);
  }
  if (!g.status.pods.empty()) st["pods"] = g.status.pods;
  if (!g.status.conditions.empty()) st["conditions"] = EncodeConditions(g.status.conditions);
  j["status"] = std::move(st);
  return j.dump();
}

template <>
GpuCapacity ReadKind(const JsonIn& root) {
  CheckKind(root, GpuCapacity::kKind);
  GpuCapacity g;
  g.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  g.spec.cluster = s.Str("cluster", true);
  g.spec.node = s.Str("node", true);
  g.spec.uuid = s.Str("uuid", true);
  g.spec.index = s.Int("index");
  g.spec.model = s.Str("model", true);
  g.spec.product = s.Str("product");
  g.spec.memory_mib = s.Int("memoryMiB");
  g.spec.mig_capable = s.Bool("migCapable", false);
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    g.status.mig_mode = st.Enum("migMode", kMigMode, MigMode::kDisabled);
    g.status.health = st.Enum("health", kHealth, Health::kUnknown);
    g.status.allocated = st.Bool("allocated", false);
    g.status.pods = st.StrList("pods");
    st.Each("migInstances", [&](const JsonIn& m) {
      MigInstance inst;
      inst.profile = m.Str("profile", true);
      JsonIn p = m.Obj("placement");
      inst.start = p.Int("start", true);
      inst.size = p.Int("size", true, 1);
      inst.uuid = m.Str("uuid");
      inst.allocated = m.Bool("allocated", false);
      inst.pods = m.StrList("pods");
      g.status.mig_instances.push_back(std::move(inst));
    });
    g.status.conditions = DecodeConditions(st);
  }
  return g;
}

// --- SpecAndCount ------------------------------------------------------------------------

template <>
std::string Encode(const SpecAndCount& s) {
  json j = Envelope(SpecAndCount::kKind, s.metadata);
  j["spec"] = {{"cluster", s.spec.cluster}, {"node", s.spec.node}, {"model", s.spec.model},
               {"profile", s.spec.profile}, {"resourceName", s.spec.resource_name}};
  j["status"] = {{"count", s.status.count}, {"allocated", s.status.allocated},
                 {"free", s.status.free}};
  return j.dump();
}

template <>
SpecAndCount ReadKind(const JsonIn& root) {
  CheckKind(root, SpecAndCount::kKind);
  SpecAndCount s;
  s.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn sp = root.Obj("spec");
  s.spec.cluster = sp.Str("cluster", true);
  s.spec.node = sp.Str("node", true);
  s.spec.model = sp.Str("model", true);
  s.spec.profile = sp.Str("profile", true);
  s.spec.resource_name = sp.Str("resourceName");
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    s.status.count = st.Int("count");
    s.status.allocated = st.Int("allocated");
    s.status.free = st.Int("free");
    if (s.status.allocated + s.status.free != s.status.count) {
      FailAt("status", fmt::format("allocated ({}) + free ({}) must equal count ({})",
                                 s.status.allocated, s.status.free, s.status.count));
    }
  }
  return s;
}

// --- Project -----------------------------------------------------------------------------

namespace {

constexpr std::array<std::pair<std::string_view, WorkloadType>, 3> kWorkloadType = {{
    {"training", WorkloadType::kTraining},
    {"inference", WorkloadType::kInference},
    {"development", WorkloadType::kDevelopment},
}};

json EncodeCounts(const std::map<std::string, int64_t>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

}  // namespace

template <>
std::string Encode(const Project& p) {
  json j = Envelope(Project::kKind, p.metadata);
  json spec = json::object();
  if (!p.spec.display_name.empty()) spec["displayName"] = p.spec.display_name;
  if (p.spec.quota) {
    spec["quota"] = {{"fullGpus", EncodeCounts(p.spec.quota->full_gpus)},
                     {"migComputeSlices", EncodeCounts(p.spec.quota->mig_compute_slices)}};
    if (!p.spec.quota->borrowing.empty()) spec["quota"]["borrowing"] = EncodeCounts(p.spec.quota->borrowing);
  }
  if (p.spec.budget) {
    spec["budget"] = {{"amountMicros", p.spec.budget->amount_micros},
                      {"gpuHours", p.spec.budget->gpu_hours},
                      {"allowOverrun", p.spec.budget->allow_overrun}};
  }
  j["spec"] = std::move(spec);
  j["status"] = json::object();
  if (!p.status.conditions.empty()) j["status"]["conditions"] = EncodeConditions(p.status.conditions);
  return j.dump();
}

template <>
Project ReadKind(const JsonIn& root) {
  CheckKind(root, Project::kKind);
  Project p;
  p.metadata = DecodeMetaObj(root.Obj("metadata"));
  if (root.Has("spec")) {
    JsonIn s = root.Obj("spec");
    s.Doc("displayName", "The project's name as people read it.")
        .Doc("quota", "The most the project's live pools may hold together, by GPU model; a model without an entry is limited by the fleet only.")
        .Doc("budget", "A monthly spending limit: pools and approvals that would pass it are refused unless allowOverrun.");
    p.spec.display_name = s.Str("displayName");
    if (s.Has("quota")) {
      JsonIn q = s.Obj("quota");
      q.Doc("fullGpus", "Whole GPUs, by catalogue model (\"H200-SXM-141GB\": 8).")
          .Doc("migComputeSlices", "MIG compute slices, by model: a 3g instance takes 3 of a GPU's 7.")
          .Doc("borrowing", "The most devices (a whole GPU or a MIG instance each) the project's preemptible workloads may borrow at once, by model; a model without an entry: whatever is lent.");
      Project::Quota quota;
      for (auto& [k, v] : q.Counts("fullGpus")) quota.full_gpus[k] = v;
      for (auto& [k, v] : q.Counts("migComputeSlices")) quota.mig_compute_slices[k] = v;
      for (auto& [k, v] : q.Counts("borrowing")) quota.borrowing[k] = v;
      p.spec.quota = std::move(quota);
    }
    if (s.Has("budget")) {
      JsonIn b = s.Obj("budget");
      b.Doc("amountMicros", "The most the project may be billed a month, in millionths of the rate cards' currency; 0: no limit.")
          .Doc("gpuHours", "The most GPU-hours a month; 0: no limit.")
          .Doc("allowOverrun", "Warn instead of refusing when a pool would pass the budget.");
      p.spec.budget = Project::Budget{b.Int("amountMicros"), b.Int("gpuHours"), b.Bool("allowOverrun", false)};
    }
  }
  if (root.Has("status")) p.status.conditions = DecodeConditions(root.Obj("status"));
  return p;
}

// --- GpuPool -----------------------------------------------------------------------------

template <>
std::string Encode(const GpuPool& p) {
  json j = Envelope(GpuPool::kKind, p.metadata);
  json items = json::array();
  for (const PoolItem& i : p.spec.items) {
    items.push_back({{"model", i.model}, {"profile", i.profile}, {"count", i.count}});
  }
  json spec = {{"items", std::move(items)}, {"workloadType", Name(kWorkloadType, p.spec.workload_type)}};
  if (!p.spec.cluster.empty()) spec["cluster"] = p.spec.cluster;
  if (p.spec.time_slicing_replicas > 0) {
    spec["sharing"] = {{"timeSlicing", {{"replicas", p.spec.time_slicing_replicas}}}};
  }
  if (p.spec.move_idle_instances) spec["moveIdleInstances"] = true;
  if (const std::optional<GpuPool::Spec::Lending>& l = p.spec.lending) {
    spec["lending"] = {{"enabled", l->enabled}, {"idleAfterSeconds", l->idle_after_seconds},
                       {"reclaimGraceSeconds", l->reclaim_grace_seconds}};
  }
  if (p.spec.start_time) spec["startTime"] = FormatTime(*p.spec.start_time);
  if (p.spec.end_time) spec["endTime"] = FormatTime(*p.spec.end_time);
  if (const std::optional<GpuPool::Spec::ReleaseRequest>& r = p.spec.release_requested) {
    spec["releaseRequested"] = {{"time", FormatTime(r->time)}};
    if (!r->user.empty()) spec["releaseRequested"]["user"] = r->user;
  }
  j["spec"] = std::move(spec);
  json st = json::object();
  if (p.status.approval) {
    const GpuPool::Approval& a = *p.status.approval;
    st["approval"] = {{"approved", a.approved}, {"time", FormatTime(a.time)}};
    if (!a.reason.empty()) st["approval"]["reason"] = a.reason;
    if (!a.user.empty()) st["approval"]["user"] = a.user;
  }
  if (!p.status.allocation.empty()) {
    json a = json::array();
    for (const AllocatedDevice& d : p.status.allocation) {
      json e = {{"cluster", d.cluster}, {"node", d.node}, {"gpuUUID", d.gpu_uuid}, {"profile", d.profile}};
      if (d.profile != "full") e["placement"] = {{"start", d.start}};
      if (!d.instance_uuid.empty()) e["instanceUUID"] = d.instance_uuid;
      a.push_back(std::move(e));
    }
    st["allocation"] = std::move(a);
  }
  if (!p.status.conditions.empty()) st["conditions"] = EncodeConditions(p.status.conditions);
  j["status"] = std::move(st);
  return j.dump();
}

template <>
GpuPool ReadKind(const JsonIn& root) {
  CheckKind(root, GpuPool::kKind);
  GpuPool p;
  p.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  s.Doc("cluster", "The cluster to allocate in; any cluster when empty.")
      .Doc("items", "What the pool holds: whole GPUs (profile \"full\") and MIG instances, by model. Fixed once an operator decided on the pool.")
      .Doc("workloadType", "What the pool runs: training, inference or development.")
      .Doc("sharing", "How the pool's devices are shared between its workloads.")
      .Doc("moveIdleInstances", "An operator's defragmentation may move this pool's idle MIG instances to other GPUs.")
      .Doc("lending", "Lend the pool's idle devices to other projects' preemptible workloads, and take them back when the pool's work needs them (docs/lending.md).")
      .Doc("startTime", "A reservation's start: the devices are held from the approval, lent until this moment, and billed from it.")
      .Doc("endTime", "A reservation's end: the pool is released then.")
      .Doc("releaseRequested", "Who asked for the pool's release, and when (set by a release or a deletion; billing ends then).");
  p.spec.cluster = s.Str("cluster");
  s.Each("items", [&](const JsonIn& i) {
    i.Doc("model", "A catalogue GPU model (gpuaas catalog models), e.g. H200-SXM-141GB.")
        .Doc("profile", "\"full\" for whole GPUs, or a MIG profile of the model, e.g. 3g.71gb.")
        .Doc("count", "How many GPUs or instances.");
    p.spec.items.push_back({i.Str("model", true), i.Str("profile", true), i.Int("count", true, 1)});
  });
  p.spec.workload_type = s.Enum("workloadType", kWorkloadType, WorkloadType::kTraining);
  if (s.Has("sharing")) {
    JsonIn sh = s.Obj("sharing");
    sh.Doc("timeSlicing", "Each device is offered as this many replicas, so that several workloads share it.");
    if (sh.Has("timeSlicing")) p.spec.time_slicing_replicas = sh.Obj("timeSlicing").Int("replicas", true, 1);
  }
  p.spec.move_idle_instances = s.Bool("moveIdleInstances", false);
  p.spec.start_time = s.TimeField("startTime");
  p.spec.end_time = s.TimeField("endTime");
  if (s.Has("lending")) {
    JsonIn l = s.Obj("lending");
    l.Doc("enabled", "Whether the pool lends its idle devices.")
        .Doc("idleAfterSeconds", "A device is lent once no run of the project has used it for this long (default 600; 0: at once).")
        .Doc("reclaimGraceSeconds", "How long a borrower has to leave once the pool's work needs its device back (default 30, at most 600).");
    GpuPool::Spec::Lending lending;
    lending.enabled = l.Bool("enabled", true);
    if (l.Has("idleAfterSeconds")) lending.idle_after_seconds = l.Int("idleAfterSeconds");
    if (l.Has("reclaimGraceSeconds")) lending.reclaim_grace_seconds = l.Int("reclaimGraceSeconds");
    p.spec.lending = lending;
  }
  if (s.Has("releaseRequested")) {
    JsonIn r = s.Obj("releaseRequested");
    r.Str("time", true);
    p.spec.release_requested = GpuPool::Spec::ReleaseRequest{r.Str("user"), *r.TimeField("time")};
  }
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    st.Doc("approval", "The operator's decision, by whom and when.")
        .Doc("allocation", "The devices the pool holds: dedicated to it, no other project's pool may use them.")
        .Doc("conditions", "Approved, Allocated, Provisioned, Ready, DevicesHealthy and Released, as Argo CD and kubectl wait read them.");
    if (st.Has("approval")) {
      JsonIn a = st.Obj("approval");
      GpuPool::Approval ap;
      ap.approved = a.Bool("approved", false);
      ap.reason = a.Str("reason");
      ap.user = a.Str("user");
      ap.time = a.TimeField("time").value_or(Time{});
      p.status.approval = ap;
    }
    st.Each("allocation", [&](const JsonIn& d) {
      AllocatedDevice dev;
      dev.cluster = d.Str("cluster", true);
      dev.node = d.Str("node", true);
      dev.gpu_uuid = d.Str("gpuUUID", true);
      dev.profile = d.Str("profile", true);
      if (d.Has("placement")) dev.start = d.Obj("placement").Int("start");
      dev.instance_uuid = d.Str("instanceUUID");
      p.status.allocation.push_back(std::move(dev));
    });
    p.status.conditions = DecodeConditions(st);
  }
  // A pool stored before spec.releaseRequested existed was marked released by its Released
  // condition alone: that condition's first transition was the request.
  if (!p.spec.release_requested) {
    if (const Condition* rel = FindCondition(p.status.conditions, kReleased)) {
      p.spec.release_requested = GpuPool::Spec::ReleaseRequest{"", rel->last_transition_time};
    }
  }
  return p;
}

std::string_view ToString(WorkloadType t) { return Name(kWorkloadType, t); }

// --- Workload and Profile ----------------------------------------------------------------

namespace {
constexpr std::array<std::pair<std::string_view, PriorityClass>, 3> kPriority = {{
    {"inference", PriorityClass::kInference},
    {"batch", PriorityClass::kBatch},
    {"preemptible", PriorityClass::kPreemptible},
}};
constexpr std::array<std::pair<std::string_view, WorkloadPhase>, 4> kPhase = {{
    {"Pending", WorkloadPhase::kPending},
    {"Running", WorkloadPhase::kRunning},
    {"Succeeded", WorkloadPhase::kSucceeded},
    {"Evicted", WorkloadPhase::kEvicted},
}};

json EncodeDevices(const std::vector<WorkloadDevice>& ds) {
  json a = json::array();
  for (const WorkloadDevice& d : ds) {
    json e = {{"gpuUUID", d.gpu_uuid}};
    if (!d.instance_uuid.empty()) e["instanceUUID"] = d.instance_uuid;
    a.push_back(std::move(e));
  }
  return a;
}

std::vector<WorkloadDevice> DecodeDevices(const JsonIn& in, std::string_view key) {
  std::vector<WorkloadDevice> out;
  in.Each(key, [&](const JsonIn& d) { out.push_back({d.Str("gpuUUID", true), d.Str("instanceUUID")}); });
  return out;
}
}  // namespace

std::string_view ToString(PriorityClass p) { return Name(kPriority, p); }
std::string_view ToString(WorkloadPhase p) { return Name(kPhase, p); }

template <>
std::string Encode(const Workload& w) {
  json j = Envelope(Workload::kKind, w.metadata);
  j["spec"] = {{"pool", w.spec.pool},
               {"resources", {{w.spec.resource, w.spec.count}}},
               {"priorityClassName", Name(kPriority, w.spec.priority)}};
  if (!w.spec.model.empty()) j["spec"]["model"] = w.spec.model;
  if (!w.spec.requeue_on_reclaim) j["spec"]["requeueOnReclaim"] = false;
  json st = {{"phase", Name(kPhase, w.status.phase)}};
  if (!w.status.reason.empty()) st["reason"] = w.status.reason;
  if (!w.status.message.empty()) st["message"] = w.status.message;
  if (!w.status.devices.empty()) st["devices"] = EncodeDevices(w.status.devices);
  if (w.status.start_time) st["startTime"] = FormatTime(*w.status.start_time);
  if (!w.status.profile.empty()) st["profile"] = w.status.profile;
  if (w.status.borrowed_from) {
    st["borrowedFrom"] = {{"project", w.status.borrowed_from->project}, {"pool", w.status.borrowed_from->pool}};
  }
  if (w.status.reclaim_deadline) st["reclaimDeadline"] = FormatTime(*w.status.reclaim_deadline);
  j["status"] = std::move(st);
  return j.dump();
}

template <>
Workload ReadKind(const JsonIn& root) {
  CheckKind(root, Workload::kKind);
  Workload w;
  w.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  s.Doc("pool", "The project's pool the workload runs on; empty for a preemptible workload that borrows lent devices.")
      .Doc("resources", "The one GPU resource and how many: {\"nvidia.com/gpu\": 2} or {\"nvidia.com/mig-3g.71gb\": 1}.")
      .Doc("priorityClassName", "inference runs before batch, and may preempt it; preemptible may also borrow other projects' idle devices, which are taken back on a deadline.")
      .Doc("model", "A borrower's GPU model (catalogue name); empty: any model.")
      .Doc("requeueOnReclaim", "A reclaimed borrower queues again (default); false: it ends Evicted.");
  w.spec.pool = s.Str("pool");
  ResourceList res = s.Counts("resources");
  s.Check(res.size() == 1, "resources", "name exactly one GPU resource, e.g. {\"nvidia.com/gpu\": 1}");
  if (!res.empty()) {
    w.spec.resource = res.begin()->first;
    w.spec.count = res.begin()->second;
  }
  w.spec.priority = s.Enum("priorityClassName", kPriority, PriorityClass::kBatch);
  w.spec.model = s.Str("model");
  w.spec.requeue_on_reclaim = s.Bool("requeueOnReclaim", true);
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    st.Doc("phase", "Pending (waiting for room), Running, Succeeded or Evicted.").Doc("devices", "The devices of the run.");
    w.status.phase = st.Enum("phase", kPhase, WorkloadPhase::kPending);
    w.status.reason = st.Str("reason");
    w.status.message = st.Str("message");
    w.status.devices = DecodeDevices(st, "devices");
    w.status.start_time = st.TimeField("startTime");
    w.status.profile = st.Str("profile");
    if (st.Has("borrowedFrom")) {
      JsonIn b = st.Obj("borrowedFrom");
      w.status.borrowed_from = Workload::Lender{b.Str("project", true), b.Str("pool", true)};
    }
    w.status.reclaim_deadline = st.TimeField("reclaimDeadline");
  }
  return w;
}

template <>
std::string Encode(const Loan& l) {
  json j = Envelope(Loan::kKind, l.metadata);
  j["spec"] = {{"borrower", l.spec.borrower}, {"workload", l.spec.workload}, {"lender", l.spec.lender},
               {"pool", l.spec.pool}, {"model", l.spec.model}, {"profile", l.spec.profile},
               {"devices", EncodeDevices(l.spec.devices)}, {"start", FormatTime(l.spec.start)}};
  if (l.spec.end) j["spec"]["end"] = FormatTime(*l.spec.end);
  if (!l.spec.end_reason.empty()) j["spec"]["endReason"] = l.spec.end_reason;
  if (l.spec.credit_from) j["spec"]["creditFrom"] = FormatTime(*l.spec.credit_from);
  j["status"] = json::object();
  if (!l.status.removed_pods.empty()) j["status"]["removedPods"] = l.status.removed_pods;
  if (!l.status.stuck_pods.empty()) j["status"]["stuckPods"] = l.status.stuck_pods;
  return j.dump();
}

template <>
Loan ReadKind(const JsonIn& root) {
  CheckKind(root, Loan::kKind);
  Loan l;
  l.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  s.Doc("borrower", "The project whose preemptible workload ran on the lent devices.")
      .Doc("lender", "The project whose pool lent them.")
      .Doc("end", "When the run left the devices; absent while it runs.")
      .Doc("endReason", "Reclaimed, Deleted, PoolReleased or DeviceFailed.")
      .Doc("creditFrom", "The lender is credited from this moment: a reservation's start (before it, its own billing has not begun).");
  l.spec.borrower = s.Str("borrower", true);
  l.spec.workload = s.Str("workload", true);
  l.spec.lender = s.Str("lender", true);
  l.spec.pool = s.Str("pool", true);
  l.spec.model = s.Str("model", true);
  l.spec.profile = s.Str("profile", true);
  l.spec.devices = DecodeDevices(s, "devices");
  l.spec.start = s.TimeField("start").value_or(Time{});
  l.spec.end = s.TimeField("end");
  l.spec.end_reason = s.Str("endReason");
  l.spec.credit_from = s.TimeField("creditFrom");
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    st.Doc("removedPods", "The borrower's pods deleted (grace period 0) when the loan ended, as namespace/name.")
        .Doc("stuckPods", "Those still on the devices a minute after the loan's end; emptied once they are gone.");
    l.status.removed_pods = st.StrList("removedPods");
    l.status.stuck_pods = st.StrList("stuckPods");
  }
  return l;
}

template <>
std::string Encode(const Profile& p) {
  json j = Envelope(Profile::kKind, p.metadata);
  j["spec"] = {{"pod", p.spec.pod}, {"pool", p.spec.pool}, {"project", p.spec.project},
               {"devices", EncodeDevices(p.spec.devices)}, {"start", FormatTime(p.spec.start)}};
  if (p.spec.end) j["spec"]["end"] = FormatTime(*p.spec.end);
  j["status"] = json::object();
  return j.dump();
}

template <>
Profile ReadKind(const JsonIn& root) {
  CheckKind(root, Profile::kKind);
  Profile p;
  p.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  p.spec.pod = s.Str("pod", true);
  p.spec.pool = s.Str("pool", true);
  p.spec.project = s.Str("project", true);
  p.spec.devices = DecodeDevices(s, "devices");
  p.spec.start = s.TimeField("start").value_or(Time{});
  p.spec.end = s.TimeField("end");
  if (root.Has("status")) root.Obj("status");  // a record: nothing in it yet
  return p;
}

// --- MigLayout ---------------------------------------------------------------------------

namespace {
constexpr std::array<std::pair<std::string_view, MigLayout::State>, 4> kLayoutState = {{
    {"Pending", MigLayout::State::kPending},
    {"Applying", MigLayout::State::kApplying},
    {"Applied", MigLayout::State::kApplied},
    {"Failed", MigLayout::State::kFailed},
}};
}  // namespace

std::string_view ToString(MigLayout::State s) { return Name(kLayoutState, s); }

template <>
std::string Encode(const MigLayout& m) {
  json j = Envelope(MigLayout::kKind, m.metadata);
  json insts = json::array();
  for (const MigLayout::Instance& i : m.spec.instances) {
    insts.push_back({{"profile", i.profile}, {"start", i.start}});
  }
  j["spec"] = {{"cluster", m.spec.cluster}, {"node", m.spec.node}, {"gpuUUID", m.spec.gpu_uuid},
               {"migEnabled", m.spec.mig_enabled}, {"instances", std::move(insts)}};
  j["status"] = {{"state", Name(kLayoutState, m.status.state)}, {"attempts", m.status.attempts},
                 {"observedGeneration", m.status.observed_generation}};
  if (!m.status.message.empty()) j["status"]["message"] = m.status.message;
  if (m.status.last_attempt != Time{}) j["status"]["lastAttempt"] = FormatTime(m.status.last_attempt);
  return j.dump();
}

template <>
MigLayout ReadKind(const JsonIn& root) {
  CheckKind(root, MigLayout::kKind);
  MigLayout m;
  m.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  m.spec.cluster = s.Str("cluster", true);
  m.spec.node = s.Str("node", true);
  m.spec.gpu_uuid = s.Str("gpuUUID", true);
  m.spec.mig_enabled = s.Bool("migEnabled", true);
  s.Each("instances", [&](const JsonIn& i) {
    m.spec.instances.push_back({i.Str("profile", true), i.Int("start", true)});
  });
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    m.status.state = st.Enum("state", kLayoutState, MigLayout::State::kPending);
    m.status.message = st.Str("message");
    m.status.attempts = st.Int("attempts");
    m.status.last_attempt = st.TimeField("lastAttempt").value_or(Time{});
    m.status.observed_generation = st.Int("observedGeneration");
  }
  return m;
}

// --- Defragmentation ---------------------------------------------------------------------

namespace {
constexpr std::array<std::pair<std::string_view, Defragmentation::Phase>, 3> kDefragPhase = {{
    {"Pending", Defragmentation::Phase::kPending},
    {"Applied", Defragmentation::Phase::kApplied},
    {"Failed", Defragmentation::Phase::kFailed},
}};

json MovesJson(const std::vector<Defragmentation::Move>& moves) {
  json out = json::array();
  for (const Defragmentation::Move& mv : moves) {
    json relocations = json::array();
    for (const Defragmentation::Relocation& r : mv.relocations) {
      relocations.push_back(
          {{"pool", r.pool},
           {"profile", r.profile},
           {"from", {{"gpu", r.from_gpu}, {"start", r.from_start}}},
           {"to", {{"gpu", r.to_gpu}, {"node", r.to_node}, {"start", r.to_start}, {"instance", r.to_instance}}}});
    }
    out.push_back({{"gpu", mv.gpu_uuid},
                   {"cluster", mv.cluster},
                   {"node", mv.node},
                   {"model", mv.model},
                   {"before", mv.before},
                   {"after", mv.after},
                   {"destroys", mv.destroys},
                   {"largestBefore", mv.largest_before},
                   {"largestAfter", mv.largest_after},
                   {"moves", std::move(relocations)}});
  }
  return out;
}

Defragmentation::Move DecodeMove(const JsonIn& m) {
  Defragmentation::Move mv{m.Str("gpu", true), m.Str("cluster"),  m.Str("node"),          m.Str("model"),
                           m.Str("before"),    m.Str("after"),    m.Str("destroys"),      m.Str("largestBefore"),
                           m.Str("largestAfter"), {}};
  m.Each("moves", [&](const JsonIn& r) {
    const JsonIn from = r.Obj("from"), to = r.Obj("to");
    mv.relocations.push_back({r.Str("pool", true), r.Str("profile", true), from.Str("gpu", true), from.Int("start"),
                              to.Str("gpu", true), to.Str("node"), to.Int("start"), to.Str("instance")});
  });
  return mv;
}
}  // namespace

std::string_view ToString(Defragmentation::Phase p) { return Name(kDefragPhase, p); }

std::string EncodeMoves(const std::vector<Defragmentation::Move>& moves) { return MovesJson(moves).dump(); }

template <>
std::string Encode(const Defragmentation& d) {
  json j = Envelope(Defragmentation::kKind, d.metadata);
  j["spec"] = {{"gpus", d.spec.gpus}, {"requestedBy", d.spec.requested_by}};
  j["status"] = {{"phase", Name(kDefragPhase, d.status.phase)}, {"moves", MovesJson(d.status.moves)}};
  if (!d.status.message.empty()) j["status"]["message"] = d.status.message;
  if (d.status.completed) j["status"]["completed"] = FormatTime(*d.status.completed);
  return j.dump();
}

template <>
Defragmentation ReadKind(const JsonIn& root) {
  CheckKind(root, Defragmentation::kKind);
  Defragmentation d;
  d.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  d.spec.gpus = s.StrList("gpus");
  d.spec.requested_by = s.Str("requestedBy");
  if (root.Has("status")) {
    JsonIn st = root.Obj("status");
    d.status.phase = st.Enum("phase", kDefragPhase, Defragmentation::Phase::kPending);
    d.status.message = st.Str("message");
    st.Each("moves", [&](const JsonIn& m) { d.status.moves.push_back(DecodeMove(m)); });
    d.status.completed = st.TimeField("completed");
  }
  return d;
}

std::string_view TopLevelMember(std::string_view text, std::string_view key) {
  int depth = 0;
  bool expect_key = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const size_t start = i + 1;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
      if (i >= text.size()) return {};
      if (depth == 1 && expect_key) {
        expect_key = false;
        if (text.substr(start, i - start) != key) continue;
        size_t v = text.find(':', i + 1);
        if (v == std::string_view::npos) return {};
        for (++v; v < text.size() && (text[v] == ' ' || text[v] == '\t' || text[v] == '\n' || text[v] == '\r'); ++v) {
        }
        if (v >= text.size() || text[v] != '{') return {};
        // Find the matching brace.
        int d = 0;
        for (size_t e = v; e < text.size(); ++e) {
          if (text[e] == '"') {
            for (++e; e < text.size() && text[e] != '"'; ++e) {
              if (text[e] == '\\') ++e;
            }
          } else if (text[e] == '{' || text[e] == '[') {
            ++d;
          } else if (text[e] == '}' || text[e] == ']') {
            if (--d == 0) return text.substr(v, e - v + 1);
          }
        }
        return {};
      }
    } else if (c == '{' || c == '[') {
      ++depth;
      expect_key = depth == 1 && c == '{';
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 1) {
      expect_key = true;
    }
  }
  return {};
}

// --- RateCard ----------------------------------------------------------------------------

namespace {

constexpr std::array<std::pair<std::string_view, RateCard::MigPricing>, 3> kMigPricing = {{
    {"compute", RateCard::MigPricing::kCompute},
    {"memory", RateCard::MigPricing::kMemory},
    {"explicit", RateCard::MigPricing::kExplicit},
}};

}  // namespace

std::string_view ToString(RateCard::MigPricing p) { return Name(kMigPricing, p); }

template <>
std::string Encode(const RateCard& c) {
  json j = Envelope(RateCard::kKind, c.metadata);
  json prices = json::array();
  for (const RateCard::Price& p : c.spec.prices) {
    prices.push_back({{"model", p.model}, {"profile", p.profile}, {"pricePerHourMicros", p.price_per_hour_micros}});
  }
  j["spec"] = {{"currency", c.spec.currency},
               {"effectiveFrom", FormatTime(c.spec.effective_from)},
               {"prices", std::move(prices)},
               {"migPricing", Name(kMigPricing, c.spec.mig_pricing)},
               {"preemptiblePricePercent", c.spec.preemptible_price_percent}};
  j["status"] = json::object();
  return j.dump();
}

template <>
RateCard ReadKind(const JsonIn& root) {
  CheckKind(root, RateCard::kKind);
  RateCard c;
  c.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  s.Doc("currency", "ISO 4217 code; every card prices in one currency.")
      .Doc("effectiveFrom", "When the card takes effect, no earlier than the current month; a later card supersedes it.")
      .Doc("migPricing", "How MIG instances are priced from a GPU's price: by compute slices or by memory.")
      .Doc("prices", "Hourly prices by model and profile.")
      .Doc("preemptiblePricePercent", "What a borrowed device-hour costs the borrower, and earns its lender, as a percentage of its price (default 40).");
  c.spec.currency = s.Str("currency", true);
  if (s.Has("preemptiblePricePercent")) c.spec.preemptible_price_percent = s.Int("preemptiblePricePercent");
  s.Needs("effectiveFrom");
  c.spec.effective_from = *s.TimeField("effectiveFrom");
  c.spec.mig_pricing = s.Enum("migPricing", kMigPricing, RateCard::MigPricing::kCompute);
  s.Needs("prices");
  s.Each("prices", [&](const JsonIn& p) {
    c.spec.prices.push_back({p.Str("model", true), p.Str("profile", true), p.Int("pricePerHourMicros", true)});
  });
  if (root.Has("status")) root.Obj("status");  // a record: nothing in it
  return c;
}

// --- CreditNote --------------------------------------------------------------------------

template <>
std::string Encode(const CreditNote& n) {
  json j = Envelope(CreditNote::kKind, n.metadata);
  j["spec"] = {{"period", n.spec.period},
               {"amountMicros", n.spec.amount_micros},
               {"reason", n.spec.reason},
               {"issued", FormatTime(n.spec.issued)},
               {"issuedBy", n.spec.issued_by}};
  j["status"] = json::object();
  return j.dump();
}

template <>
CreditNote ReadKind(const JsonIn& root) {
  CheckKind(root, CreditNote::kKind);
  CreditNote n;
  n.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  s.Doc("period", "The closed month the note corrects: YYYY-MM.")
      .Doc("amountMicros", "The credit, in millionths of the currency.")
      .Doc("reason", "Why the credit is given.");
  n.spec.period = s.Str("period", true);
  n.spec.amount_micros = s.Int("amountMicros", true);
  n.spec.reason = s.Str("reason", true);
  n.spec.issued = s.TimeField("issued").value_or(Time{});
  n.spec.issued_by = s.Str("issuedBy");
  if (root.Has("status")) root.Obj("status");  // a record: nothing in it
  return n;
}

// --- UsageRecord -------------------------------------------------------------------------

template <>
std::string Encode(const UsageRecord& u) {
  json j = Envelope(UsageRecord::kKind, u.metadata);
  json items = json::array();
  for (const PoolItem& i : u.spec.items) items.push_back({{"model", i.model}, {"profile", i.profile}, {"count", i.count}});
  json credits = json::array();
  for (const UsageRecord::Credit& c : u.spec.credits) {
    json cj = {{"gpuUUID", c.gpu_uuid}, {"model", c.model}, {"profile", c.profile}, {"reason", c.reason},
               {"start", FormatTime(c.start)}};
    if (c.end) cj["end"] = FormatTime(*c.end);
    credits.push_back(std::move(cj));
  }
  json spec = {{"pool", u.spec.pool}, {"poolUID", u.spec.pool_uid}, {"items", std::move(items)},
               {"start", FormatTime(u.spec.start)}};
  if (u.spec.end) spec["end"] = FormatTime(*u.spec.end);
  if (!u.spec.cluster.empty()) spec["cluster"] = u.spec.cluster;
  if (!u.spec.credits.empty()) spec["credits"] = std::move(credits);
  if (u.spec.held) {
    json held = json::array();
    for (const UsageRecord::Held& h : *u.spec.held) {
      json hj = {{"model", h.model}, {"profile", h.profile}, {"count", h.count}, {"since", FormatTime(h.since)}};
      if (!h.devices.empty()) hj["devices"] = h.devices;
      held.push_back(std::move(hj));
    }
    spec["held"] = std::move(held);
  }
  j["spec"] = std::move(spec);
  j["status"] = json::object();
  return j.dump();
}

template <>
UsageRecord ReadKind(const JsonIn& root) {
  CheckKind(root, UsageRecord::kKind);
  UsageRecord u;
  u.metadata = DecodeMetaObj(root.Obj("metadata"));
  JsonIn s = root.Obj("spec");
  u.spec.pool = s.Str("pool", true);
  u.spec.pool_uid = s.Str("poolUID");
  u.spec.cluster = s.Str("cluster");
  s.Each("items", [&](const JsonIn& i) { u.spec.items.push_back({i.Str("model", true), i.Str("profile", true), i.Int("count", true)}); });
  s.Needs("start");
  u.spec.start = *s.TimeField("start");
  u.spec.end = s.TimeField("end");
  s.Each("credits", [&](const JsonIn& c) {
    UsageRecord::Credit credit;
    credit.gpu_uuid = c.Str("gpuUUID", true);
    credit.model = c.Str("model", true);
    credit.profile = c.Str("profile", true);
    credit.reason = c.Str("reason");
    c.Needs("start");
    credit.start = *c.TimeField("start");
    credit.end = c.TimeField("end");
    u.spec.credits.push_back(std::move(credit));
  });
  if (s.Has("held")) {
    u.spec.held.emplace();
    s.Each("held", [&](const JsonIn& h) {
      UsageRecord::Held held{h.Str("model", true), h.Str("profile", true), h.Int("count", true, 1), {}};
      h.Needs("since");
      held.since = *h.TimeField("since");
      held.devices = h.StrList("devices");
      u.spec.held->push_back(std::move(held));
    });
  }
  if (root.Has("status")) root.Obj("status");  // a record: nothing in it
  return u;
}

absl::StatusOr<ObjectMeta> DecodeMeta(std::string_view text) {
  if (std::string_view meta = TopLevelMember(text, "metadata"); !meta.empty()) {
    absl::StatusOr<ObjectMeta> m =
        ReadJson(meta, {.path = "metadata"}, [](const JsonIn& in) { return DecodeMetaObj(in); });
    if (m.ok()) return m;
  }
  return ReadJson(text, [](const JsonIn& root) { return DecodeMetaObj(root.Obj("metadata")); });
}

std::string_view ToString(MigMode m) { return Name(kMigMode, m); }
std::string_view ToString(Health h) { return Name(kHealth, h); }
std::string_view ToString(ConditionStatus s) { return Name(kConditionStatus, s); }

template <typename T>
absl::StatusOr<T> Decode(std::string_view text, JsonFields* fields) {
  return ReadJson(text, {.fields = fields}, [](const JsonIn& root) { return ReadKind<T>(root); });
}

template <typename T>
std::string SchemaOf() {
  json schema;
  DescribeJson([](const JsonIn& root) { ReadKind<T>(root); }, schema);
  return schema.dump();
}

#define GPUAAS_KIND_CODEC(T)                                                   \
  template absl::StatusOr<T> Decode<T>(std::string_view, JsonFields*); \
  template std::string SchemaOf<T>();
GPUAAS_KIND_CODEC(Cluster)
GPUAAS_KIND_CODEC(ClusterRegistration)
GPUAAS_KIND_CODEC(NodeCapacity)
GPUAAS_KIND_CODEC(GpuCapacity)
GPUAAS_KIND_CODEC(SpecAndCount)
GPUAAS_KIND_CODEC(Project)
GPUAAS_KIND_CODEC(GpuPool)
GPUAAS_KIND_CODEC(Workload)
GPUAAS_KIND_CODEC(Profile)
GPUAAS_KIND_CODEC(MigLayout)
GPUAAS_KIND_CODEC(Defragmentation)
GPUAAS_KIND_CODEC(RateCard)
GPUAAS_KIND_CODEC(CreditNote)
GPUAAS_KIND_CODEC(Loan)
GPUAAS_KIND_CODEC(UsageRecord)
#undef GPUAAS_KIND_CODEC

}  // namespace gpuaas::model
