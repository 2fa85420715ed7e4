#include "telemetry/health.h"

#include <optional>

#include "fmt/format.h"

namespace gpuaas::telemetry {
namespace {

constexpr std::string_view kMemoryErrors = "MemoryErrors";
constexpr std::string_view kResetRequired = "ResetRequired";
constexpr std::string_view kOverheating = "Overheating";

std::string_view RecoveryActionName(int a) {
  switch (a) {
    case 0: return "none";
    case 1: return "GPU reset";
    case 2: return "node reboot";
    case 3: return "drain peer-to-peer";
    case 4: return "drain and reset";
    default: return "unknown";
  }
}

// An XID or enum reading as an int; nullopt for what cannot be one (fractions, huge values).
std::optional<int> SmallInt(double v) {
  if (!(v >= 0 && v <= 1e6) || v != static_cast<double>(static_cast<int>(v))) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

std::string_view ToString(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "info";
}

XidInfo LookupXid(int xid) {
  using E = XidEffect;
  using S = Severity;
  switch (xid) {
    case 13: return {13, "ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception", E::kApplication, S::kInfo,
                     "application fault, not the hardware: tell the tenant (restart the application)"};
    case 31: return {31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", E::kApplication, S::kInfo,
                     "usually an application bug: tell the tenant (restart the application)"};
    case 43: return {43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (software-induced fault)",
                     E::kInformational, S::kInfo, "none: the GPU remains healthy"};
    case 45: return {45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup after earlier errors",
                     E::kApplication, S::kInfo, "none on its own; follow the other XIDs it accompanies"};
    case 46: return {46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", E::kResetGpu, S::kCritical,
                     "reset the GPU"};
    case 48: return {48, "ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit ECC error", E::kMemoryError, S::kCritical,
                     "double-bit ECC workflow: reset the GPU or reboot the node, run field diagnostics, RMA if "
                     "the SRAM threshold is exceeded"};
    case 62: return {62, "PMU_HALT_ERROR", "internal micro-controller halt", E::kResetGpu, S::kCritical, "reset the GPU"};
    case 63: return {63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", E::kInformational, S::kInfo,
                     "none now; a GPU reset applies the remap (schedule one when the GPU is idle)"};
    case 64: return {64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", E::kResetGpu,
                     S::kCritical, "reset the GPU; a remapping failure is an RMA criterion"};
    case 74: return {74, "NVLINK_ERROR", "NVLink error", E::kNvlink, S::kCritical,
                     "NVLink workflow: reset the GPU or reboot the node; check the device at the link's remote end"};
    case 79: return {79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", E::kRebootNode,
                     S::kCritical, "reboot the node (often a PCI Express link hardware failure)"};
    case 92: return {92, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate", E::kInformational,
                     S::kInfo, "none now; contact support if it persists"};
    case 94: return {94, "ROBUST_CHANNEL_CONTAINED_ERROR", "contained memory error", E::kResetWhenConvenient,
                     S::kWarning, "restart the application; reset the GPU when convenient"};
    case 95: return {95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained memory error", E::kResetGpu,
                     S::kCritical, "reset the GPU before applications restart"};
    case 109: return {109, "CTXSW_TIMEOUT_ERROR", "context switch timeout", E::kResetGpu, S::kCritical, "reset the GPU"};
    case 119: return {119, "GSP_RPC_TIMEOUT", "GSP RPC timeout", E::kResetGpu, S::kCritical,
                      "reset the GPU (power-cycle the node if it persists)"};
    case 120: return {120, "GSP_ERROR", "GSP error", E::kResetGpu, S::kCritical,
                      "reset the GPU (power-cycle the node if it persists)"};
    case 140: return {140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC unrecovered", E::kResetGpu, S::kCritical,
                      "reset the GPU; contact the vendor if it persists"};
    case 143: return {143, "GPU_INIT_ERROR", "GPU initialisation error", E::kResetGpu, S::kCritical, "reset the GPU"};
    case 158: return {158, "GPU_FATAL_TIMEOUT", "GPU fatal timeout", E::kResetGpu, S::kCritical, "reset the GPU"};
    default: return {xid, "UNKNOWN", "an XID gpuaas has no rule for", E::kUnknown, S::kWarning,
                     "look it up in NVIDIA's XID catalogue"};
  }
}

namespace {

std::string_view ActionOf(XidEffect e) {
  switch (e) {
    case XidEffect::kInformational: return "None";
    case XidEffect::kApplication: return "RestartApplication";
    case XidEffect::kResetWhenConvenient: return "ResetWhenConvenient";
    case XidEffect::kResetGpu: return "ResetGpu";
    case XidEffect::kRebootNode: return "RebootNode";
    case XidEffect::kMemoryError: return "MemoryError";
    case XidEffect::kNvlink: return "CheckNvlink";
    case XidEffect::kUnknown: return "Investigate";
  }
  return "Investigate";
}

// NVML's recovery actions (nvmlDeviceGetGpuRecoveryAction) as action codes.
std::string_view ActionOfRecovery(int a) {
  switch (a) {
    case 1: return "ResetGpu";
    case 2: return "RebootNode";
    case 3: return "DrainPeerToPeer";
    case 4: return "DrainAndReset";
    default: return "Investigate";
  }
}

}  // namespace

const std::vector<std::string_view>& ActionCodes() {
  static const std::vector<std::string_view> kCodes = {
      "None",       "RestartApplication", "ResetWhenConvenient", "ResetGpu",      "RebootNode",   "MemoryError",
      "CheckNvlink", "Investigate",       "DrainPeerToPeer",     "DrainAndReset", "ReplaceGpu",   "ResetWhenIdle",
      "CheckCooling", "ResetClears", "OneReporterPerNode"};
  return kCodes;
}

void HealthTracker::Raise(Alert a) {
  a.id = next_alert_++;
  alerts_.push_back(std::move(a));
  while (alerts_.size() > kMaxAlerts) alerts_.pop_front();
}

void HealthTracker::Resolve(const std::string& uuid, std::string_view condition, int64_t t_ms) {
  for (Alert& a : alerts_) {
    if (a.active && a.gpu_uuid == uuid && a.condition == condition) {
      a.active = false;
      a.resolved_ms = t_ms;
    }
  }
}

void HealthTracker::Reset(GpuState& g, int64_t t_ms) {
  const std::string& uuid = g.uuid;
  const bool had = g.reset_xid || g.memory_xid || g.convenient_xid || g.dbe_fault || g.restored_memory ||
                   g.restored_reset;
  g.reset_xid.reset();
  g.memory_xid.reset();
  g.convenient_xid.reset();
  g.restored_memory.reset();
  g.restored_reset.reset();
  g.dbe_volatile = 0;
  g.dbe_fault = false;
  g.remap_pending = false;
  // The lifetime counter keeps its count; what it had before the reset is history now.
  if (g.dbe_aggregate_base) g.dbe_aggregate_base = g.dbe_aggregate;
  if (had) {
    Raise({0, t_ms, Severity::kInfo, uuid, -1, "Reset", "", "GpuReset",
           "the GPU was reset or its driver reloaded (energy or volatile ECC counters restarted)", "none", false, t_ms, std::string("None"), {}});
  }
}

HealthTracker::GpuState* HealthTracker::Track(std::string_view gpu_uuid) {
  auto it = gpus_.find(gpu_uuid);
  if (it == gpus_.end()) {
    it = gpus_.try_emplace(std::string(gpu_uuid)).first;
    it->second.uuid = it->first;
  }
  return &it->second;
}

void HealthTracker::Restore(std::string_view gpu_uuid, std::optional<ConditionVerdict> memory_errors,
                            std::optional<ConditionVerdict> reset_required, int64_t t_ms) {
  GpuState& g = *Track(gpu_uuid);
  g.restored_memory = std::move(memory_errors);
  g.restored_reset = std::move(reset_required);
  for (const auto* v : {&g.restored_memory, &g.restored_reset}) {
    if (!*v) continue;
    Raise({0, t_ms, Severity::kCritical, g.uuid, -1, "Restored",
           std::string(v == &g.restored_memory ? kMemoryErrors : kResetRequired), (*v)->reason,
           (*v)->message + " (as recorded before gpuaas restarted)", "see the message; a GPU reset clears it", true, 0, std::string("ResetClears"), {}});
  }
  last_verdict_[g.uuid] = Compute(g);
}

void HealthTracker::Xid(std::string_view gpu_uuid, int gi, int xid, int64_t t_ms) {
  GpuState& g = *Track(gpu_uuid);
  ++xid_events_;
  const XidInfo info = LookupXid(xid);
  std::string condition;
  switch (info.effect) {
    case XidEffect::kRebootNode:
    case XidEffect::kResetGpu:
    case XidEffect::kNvlink:
      // The strongest outstanding action wins: a reboot is not downgraded by a later reset XID.
      if (!g.reset_xid || LookupXid(g.reset_xid->xid).effect != XidEffect::kRebootNode) g.reset_xid = XidFault{xid, t_ms};
      condition = kResetRequired;
      if (xid == 64 || xid == 95 || xid == 140) g.memory_xid = XidFault{xid, t_ms};
      break;
    case XidEffect::kMemoryError:
      g.memory_xid = XidFault{xid, t_ms};
      condition = kMemoryErrors;
      break;
    case XidEffect::kResetWhenConvenient:
      g.convenient_xid = XidFault{xid, t_ms};
      break;
    default:
      break;
  }
  Raise({0, t_ms, info.severity, g.uuid, gi, fmt::format("XID {}", xid), condition,
         fmt::format("Xid{}", xid),
         fmt::format("XID {} ({}): {}", xid, info.mnemonic, info.meaning), std::string(info.action), true, 0, std::string(ActionOf(info.effect)), {{"xid", xid}}});
  if (condition.empty()) alerts_.back().active = false;  // informational: nothing to resolve
  Recheck(g, t_ms);
}

void HealthTracker::Observe(std::string_view gpu_uuid, int gi, Field field, double v, int64_t t_ms) {
  Observe(Track(gpu_uuid), gi, field, v, t_ms);
}

bool HealthTracker::Follows(GpuState& g, const Reporter* from, int64_t t_ms, bool& handover) {
  handover = false;
  if (from == nullptr || from->id == g.counters_from) {
    g.counters_seen_ms = std::max(g.counters_seen_ms, t_ms);
    return true;
  }
  if (!g.counters_from.empty() && t_ms - g.counters_seen_ms <= kReporterQuietMs) {
    // A second reporter while the first still reports (a restarted agent beside the old one, or
    // an agent and a scrape): its counters would read as a reset whenever they are lower.
    if (g.second_reporter != from->id) {
      g.second_reporter = from->id;
      Raise({0, t_ms, Severity::kWarning, g.uuid, -1, "Reporters", "", "SecondReporter",
             fmt::format("{} reports this GPU while {} still does; its counters are set aside until {} has been "
                         "quiet for {} s",
                         from->id, g.counters_from, g.counters_from, kReporterQuietMs / 1000),
             "run one agent (or one scrape) per node", false, t_ms, "OneReporterPerNode", {}});
    }
    ++second_reporter_readings_;
    return false;
  }
  // The first reporter, or the last one went quiet: this one's history starts. Its node having
  // booted since the last reporter's readings is a reset (a reboot resets every GPU).
  const bool rebooted = !g.counters_from.empty() && !from->boot_id.empty() && !g.counters_boot.empty() &&
                        from->boot_id != g.counters_boot;
  handover = !g.counters_from.empty() && !rebooted;
  if (rebooted) Reset(g, t_ms);
  g.counters_from = from->id;
  g.counters_boot = from->boot_id;
  g.counters_seen_ms = t_ms;
  return true;
}

void HealthTracker::Observe(GpuState* gp, int gi, Field field, double v, int64_t t_ms, const Reporter* from) {
  GpuState& g = *gp;
  const std::string& uuid = g.uuid;
  // Counters tell of resets only against their own reporter's history.
  bool handover = false;
  if ((field == Field::kXid || field == Field::kEnergyMj || field == Field::kEccDbeVolatile ||
       field == Field::kEccDbeAggregate) &&
      !Follows(g, from, t_ms, handover)) {
    return;
  }
  if (handover) {
    // A new history: its first reading is a baseline, and faults seen before stay.
    switch (field) {
      case Field::kEnergyMj:
        g.energy_mj = v;
        return;
      case Field::kEccDbeVolatile:
        if (v <= g.dbe_volatile) {
          g.dbe_volatile = v;
          return;
        }
        break;  // it rose even so: a fault
      case Field::kEccDbeAggregate:
        if (g.dbe_aggregate_base) g.dbe_aggregate_base = v - (g.dbe_aggregate - *g.dbe_aggregate_base);
        g.dbe_aggregate = v;
        return;
      default:
        break;
    }
  }
  // Most readings change nothing; only a change of state is rechecked (this runs per sample).
  switch (field) {
    case Field::kXid: {
      auto [x, fresh] = g.xid_gauge.try_emplace(gi, v);
      if (!fresh && x->second == v) return;
      x->second = v;
      if (std::optional<int> xid = SmallInt(v); xid && *xid > 0) Xid(uuid, gi, *xid, t_ms);
      return;
    }
    case Field::kEnergyMj: {
      const bool reset = g.energy_mj && v < *g.energy_mj;
      g.energy_mj = v;
      if (!reset) return;
      Reset(g, t_ms);
      break;
    }
    case Field::kEccDbeVolatile:
      if (v == g.dbe_volatile) return;
      if (v < g.dbe_volatile && v == 0) {
        Reset(g, t_ms);
      } else if (v > g.dbe_volatile) {
        g.dbe_fault = true;
        Raise({0, t_ms, Severity::kCritical, uuid, -1, "ECC", std::string(kMemoryErrors), "DoubleBitEccErrors",
               fmt::format("{} double-bit ECC error(s) since the driver loaded", v),
               std::string(LookupXid(48).action), true, 0, std::string("MemoryError"), {{"count", v}}});
      }
      g.dbe_volatile = v;
      break;
    case Field::kEccDbeAggregate:
      if (g.dbe_aggregate_base && v == g.dbe_aggregate) return;
      if (!g.dbe_aggregate_base) {
        g.dbe_aggregate_base = v;  // history from before gpuaas watched is not a new fault
      } else if (v > g.dbe_aggregate) {
        Raise({0, t_ms, Severity::kCritical, uuid, -1, "ECC", std::string(kMemoryErrors), "DoubleBitEccErrors",
               fmt::format("lifetime double-bit ECC errors rose to {}", v), std::string(LookupXid(48).action), true, 0, std::string("MemoryError"), {{"count", v}, {"lifetime", 1}}});
      }
      g.dbe_aggregate = v;
      break;
    case Field::kRemapFailure: {
      const bool b = v != 0;
      if (b == g.remap_failure) return;
      if (b) {
        Raise({0, t_ms, Severity::kCritical, uuid, -1, "RowRemap", std::string(kMemoryErrors), "RowRemapFailure",
               "row remapping failed: the GPU has no spare rows left", "take the GPU out of service; RMA", true, 0, std::string("ReplaceGpu"), {}});
      }
      g.remap_failure = b;
      break;
    }
    case Field::kRemapPending: {
      const bool b = v != 0;
      if (b == g.remap_pending) return;
      if (b) {
        Raise({0, t_ms, Severity::kInfo, uuid, -1, "RowRemap", "", "RowRemapPending",
               "a row remap waits for the next GPU reset", "reset the GPU when it is idle", false, t_ms, std::string("ResetWhenIdle"), {}});
      }
      g.remap_pending = b;
      break;
    }
    case Field::kRecoveryAction: {
      const std::optional<int> action = SmallInt(v);
      if (!action) return;  // not one of NVML's values
      const int a = *action;
      if (a == g.recovery_action) return;
      if (a != 0) {
        Raise({0, t_ms, Severity::kCritical, uuid, -1, "RecoveryAction", std::string(kResetRequired),
               "RecoveryAction", fmt::format("the driver asks for a {}", RecoveryActionName(a)),
               fmt::format("{} (NVML recovery action {})", RecoveryActionName(a), a), true, 0, std::string(ActionOfRecovery(a)), {{"recoveryAction", a}}});
      }
      g.recovery_action = a;
      break;
    }
    case Field::kTempC:
      if (!g.hot && v >= kOverheatC) {
        g.hot = true;
        Raise({0, t_ms, Severity::kWarning, uuid, -1, "Temperature", std::string(kOverheating), "Overheating",
               fmt::format("GPU temperature {} °C (at or above {} °C)", v, kOverheatC),
               "check cooling and airflow; the GPU throttles itself", true, 0, std::string("CheckCooling"), {{"celsius", v}, {"limit", kOverheatC}}});
      } else if (g.hot && v < kCoolC) {
        g.hot = false;
      } else {
        return;
      }
      break;
    default:
      return;
  }
  Recheck(g, t_ms);
}

void HealthTracker::Recheck(const GpuState& g, int64_t t_ms) {
  const std::string& uuid = g.uuid;
  const GpuVerdict now = Compute(g);
  auto [lv, fresh] = last_verdict_.try_emplace(uuid, now);
  if (fresh && !now.failed() && !now.overheating.active) return;
  if (!fresh && lv->second == now) return;
  const GpuVerdict before = fresh ? GpuVerdict{} : lv->second;
  if (before.memory_errors.active && !now.memory_errors.active) Resolve(uuid, kMemoryErrors, t_ms);
  if (before.reset_required.active && !now.reset_required.active) Resolve(uuid, kResetRequired, t_ms);
  if (before.overheating.active && !now.overheating.active) Resolve(uuid, kOverheating, t_ms);
  lv->second = now;
  changed_.insert(uuid);
}

GpuVerdict HealthTracker::Compute(const GpuState& g) const {
  GpuVerdict v;
  if (g.remap_failure) {
    v.memory_errors = {true, "RowRemapFailure", "row remapping failed: take the GPU out of service (RMA)"};
  } else if (g.memory_xid) {
    const XidInfo i = LookupXid(g.memory_xid->xid);
    v.memory_errors = {true, fmt::format("Xid{}", i.xid), fmt::format("XID {} ({}): {}", i.xid, i.meaning, i.action)};
  } else if (g.dbe_fault || (g.dbe_aggregate_base && g.dbe_aggregate > *g.dbe_aggregate_base)) {
    v.memory_errors = {true, "DoubleBitEccErrors",
                       fmt::format("{} volatile double-bit ECC error(s); reset the GPU, then run field diagnostics",
                                   g.dbe_volatile)};
  } else if (g.restored_memory) {
    v.memory_errors = *g.restored_memory;
  } else {
    v.memory_errors = {false, "NoUncorrectableErrors", ""};
  }
  if (g.reset_xid) {
    const XidInfo i = LookupXid(g.reset_xid->xid);
    v.reset_required = {true, fmt::format("Xid{}", i.xid), fmt::format("XID {} ({}): {}", i.xid, i.meaning, i.action)};
  } else if (g.recovery_action != 0) {
    v.reset_required = {true, "RecoveryAction",
                        fmt::format("the driver asks for a {}", RecoveryActionName(g.recovery_action))};
  } else if (g.memory_xid || g.dbe_fault) {
    v.reset_required = {true, "DoubleBitEccErrors", "a GPU reset or node reboot clears the double-bit ECC error"};
  } else if (g.restored_reset) {
    v.reset_required = *g.restored_reset;
  } else if (g.convenient_xid || g.remap_pending) {
    v.reset_required = {false, "ResetWhenConvenient",
                        g.convenient_xid ? "XID 94 (contained memory error): reset the GPU when convenient"
                                         : "a row remap waits for the next GPU reset"};
  } else {
    v.reset_required = {false, "NoResetNeeded", ""};
  }
  v.overheating = g.hot ? ConditionVerdict{true, "Overheating", fmt::format("at or above {} °C", kOverheatC)}
                        : ConditionVerdict{false, "TemperatureNormal", ""};
  return v;
}

GpuVerdict HealthTracker::Verdict(std::string_view gpu_uuid) const {
  auto it = gpus_.find(gpu_uuid);
  return it == gpus_.end() ? Compute(GpuState{}) : Compute(it->second);
}

std::set<std::string> HealthTracker::TakeChanged() {
  std::set<std::string> out;
  out.swap(changed_);
  return out;
}

std::vector<Alert> HealthTracker::Alerts(bool active_only) const {
  std::vector<Alert> out;
  for (auto it = alerts_.rbegin(); it != alerts_.rend(); ++it) {
    if (!active_only || it->active) out.push_back(*it);
  }
  return out;
}

}  // namespace gpuaas::telemetry
