// GPU health from telemetry: rules over readings and XID events that decide each GPU's
// conditions (MemoryErrors, ResetRequired, Overheating), whether it must leave allocation, and
// the alerts operators see. Pure: takes readings with their timestamps, keeps state per GPU, no
// clock and no I/O. Not thread-safe (the Hub serialises it).
//
// XID actions follow NVIDIA's XID catalogue ("Analyzing Xid Errors with the Xid Catalog",
// shared/reference/monitoring-billing.md §3): 79 reboot the node; 48 the double-bit ECC
// workflow; 46/62/64/95/109/119/120/140/143/158 reset the GPU; 94 restart the application and
// reset when convenient; 13/31/45 application faults, not the hardware; 43/63/92 informational;
// 74 the NVLink workflow. An XID counts once per event: dcgm-exporter's DCGM_FI_DEV_XID_ERRORS
// is a gauge that repeats the last XID, so only a change of its value is a new event (a second
// identical XID in a row is therefore invisible in that source; the agent's NVML events are not).
//
// A reset clears what a reset clears: the energy counter (mJ since the driver loaded) going
// down, or the volatile ECC counters going back to zero, means the GPU was reset or its node
// rebooted, and XID- and volatile-ECC-based conditions end. A row-remap failure stays until the
// GPU reports none (it is an RMA criterion).
#ifndef GPUAAS_TELEMETRY_HEALTH_H_
#define GPUAAS_TELEMETRY_HEALTH_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/fields.h"

namespace gpuaas::telemetry {

enum class Severity { kInfo, kWarning, kCritical };
std::string_view ToString(Severity s);

// What an XID asks of the operator.
enum class XidEffect {
  kInformational,        // 43, 63, 92: nothing to do
  kApplication,          // 13, 31, 45: the tenant's application, not the hardware
  kResetWhenConvenient,  // 94: contained; restart the app, reset when idle
  kResetGpu,             // reset the GPU before it takes work again
  kRebootNode,           // 79
  kMemoryError,          // 48: double-bit ECC; reset, then field diagnostics / RMA check
  kNvlink,               // 74: reset or reboot; check the remote end of the link
  kUnknown,
};

struct XidInfo {
  int xid = 0;
  std::string_view mnemonic;
  std::string_view meaning;
  XidEffect effect = XidEffect::kUnknown;
  Severity severity = Severity::kWarning;
  std::string_view action;  // NVIDIA's recommended action, in words
};
XidInfo LookupXid(int xid);

struct Alert {
  int64_t id = 0;
  int64_t t_ms = 0;
  Severity severity = Severity::kInfo;
  std::string gpu_uuid;
  int gpu_instance = -1;  // MIG GPU instance id, -1 for the whole GPU
  std::string source;     // "XID 79", "ECC", "RowRemap", "RecoveryAction", "Temperature"
  std::string condition;  // the condition it set, empty for informational alerts
  std::string reason;
  std::string message;
  std::string action;
  bool active = true;
  int64_t resolved_ms = 0;
  // The same in codes, for front ends that word them in their reader's language: `reason` names
  // the event, `action_code` what to do ("RebootNode", "ResetGpu", ...: ActionCodes()), and
  // `params` the figures the message quotes ("xid", "count", "celsius", ...).
  std::string action_code{};
  std::map<std::string, double> params{};
};
// Every action_code an alert may carry.
const std::vector<std::string_view>& ActionCodes();

struct ConditionVerdict {
  bool active = false;  // the condition's status is True
  std::string reason;
  std::string message;
  friend bool operator==(const ConditionVerdict&, const ConditionVerdict&) = default;
};

struct GpuVerdict {
  ConditionVerdict memory_errors;
  ConditionVerdict reset_required;
  ConditionVerdict overheating;
  // Must leave allocation: MemoryErrors or ResetRequired is True. Overheating alone is a warning
  // (the GPU throttles itself).
  bool failed() const { return memory_errors.active || reset_required.active; }
  friend bool operator==(const GpuVerdict&, const GpuVerdict&) = default;
};

inline constexpr double kOverheatC = 90;  // Overheating=True at or above
inline constexpr double kCoolC = 85;      // and False again below

class HealthTracker {
 public:
  // Per-GPU state; callers on a hot path keep the pointer from Track (stable for the tracker's
  // life) instead of looking the GPU up by UUID for every reading.
  struct XidFault {
    int xid = 0;
    int64_t t_ms = 0;
  };
  struct GpuState {
    std::string uuid;
    std::optional<XidFault> reset_xid;     // reset / reboot / NVLink
    std::optional<XidFault> memory_xid;    // 48, 64, 95, 140
    std::optional<XidFault> convenient_xid;  // 94
    double dbe_volatile = 0;  // the counter as its reporter last read it
    bool dbe_fault = false;   // it rose since the last reset: MemoryErrors until the next one
    std::optional<double> dbe_aggregate_base;
    double dbe_aggregate = 0;
    bool remap_failure = false;
    bool remap_pending = false;
    int recovery_action = 0;
    bool hot = false;
    std::optional<double> energy_mj;
    std::map<int, double> xid_gauge;  // by GPU instance: the last value seen
    // Verdicts a previous run wrote into the GpuCapacity, restored at start: they hold until a
    // reset, as the faults behind them would have.
    std::optional<ConditionVerdict> restored_memory, restored_reset;
    // Whose counters (energy, ECC, the XID gauge) the history above follows, and when it last
    // read them: a reset is believed only from that reporter's own history.
    std::string counters_from;
    std::string counters_boot;  // its node's boot, when it says
    int64_t counters_seen_ms = 0;
    std::string second_reporter;  // another reporter set aside (reported once)
  };
  // Who sent a reading: an agent instance, a scrape, the token that pushed. Its node's boot id
  // (Linux's /proc/sys/kernel/random/boot_id), when it says, tells a reboot from a new agent.
  struct Reporter {
    std::string id;
    std::string boot_id;
  };
  // How long a reporter's counters stay its GPU's history after its last reading: another
  // reporter's are set aside until then, and taken as a new history (not a reset) after.
  static constexpr int64_t kReporterQuietMs = 120'000;
  GpuState* Track(std::string_view gpu_uuid);
  // `from`: who read it (null: one reporter, as in tests). Counter readings of a reporter other
  // than the one the GPU's history follows are set aside while that one still reports (a second
  // agent for the node: reported once as an alert), and start a new history after it went
  // quiet: a new reporter's first counters are a baseline, never a reset, unless its node booted
  // since (a reboot resets the GPU).
  void Observe(GpuState* gpu, int gpu_instance, Field field, double value, int64_t t_ms, const Reporter* from = nullptr);

  // A reading of a GPU (gpu_instance -1) or MIG instance. Blank values must be dropped before.
  void Observe(std::string_view gpu_uuid, int gpu_instance, Field field, double value, int64_t t_ms);
  // Restores what a previous run concluded (the GpuCapacity's MemoryErrors and ResetRequired when
  // True), so that a restart does not make a failed GPU healthy; raises the matching alerts.
  void Restore(std::string_view gpu_uuid, std::optional<ConditionVerdict> memory_errors,
               std::optional<ConditionVerdict> reset_required, int64_t t_ms);
  // An XID event (from NVML events or a change of the XID gauge).
  void Xid(std::string_view gpu_uuid, int gpu_instance, int xid, int64_t t_ms);

  GpuVerdict Verdict(std::string_view gpu_uuid) const;
  // GPUs whose verdict may have changed since the last call.
  std::set<std::string> TakeChanged();
  bool HasChanged() const { return !changed_.empty(); }
  // Newest first; at most the last `kMaxAlerts`.
  std::vector<Alert> Alerts(bool active_only) const;
  int64_t xid_events() const { return xid_events_; }
  // Counter readings set aside because another reporter's history was followed (see Observe).
  int64_t second_reporter_readings() const { return second_reporter_readings_; }

  static constexpr size_t kMaxAlerts = 10000;

 private:
  GpuVerdict Compute(const GpuState& g) const;
  void Raise(Alert a);
  void Resolve(const std::string& uuid, std::string_view condition, int64_t t_ms);
  void Reset(GpuState& g, int64_t t_ms);
  // Whether a counter reading `from` belongs to the GPU's history (see Observe); `handover` is
  // set when it starts a new one.
  bool Follows(GpuState& g, const Reporter* from, int64_t t_ms, bool& handover);
  void Recheck(const GpuState& g, int64_t t_ms);

  std::map<std::string, GpuState, std::less<>> gpus_;
  std::map<std::string, GpuVerdict, std::less<>> last_verdict_;
  std::set<std::string> changed_;
  std::deque<Alert> alerts_;  // oldest first
  int64_t next_alert_ = 1;
  int64_t xid_events_ = 0;
  int64_t second_reporter_readings_ = 0;
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_HEALTH_H_
