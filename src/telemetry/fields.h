// The GPU readings gpuaas keeps, and how they map to dcgm-exporter's metric names. One table
// serves the ingest (dcgm-exporter text to readings), the agent's exporter (readings to the same
// text, so existing Grafana dashboards work) and the query API (series names).
//
// Sources: dcgm-exporter etc/default-counters.csv and dcgm_fields.h, as summarised in
// shared/reference/monitoring-billing.md §1.2 and §1.4.
#ifndef GPUAAS_TELEMETRY_FIELDS_H_
#define GPUAAS_TELEMETRY_FIELDS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace gpuaas::telemetry {

enum class Field : uint8_t {
  kPowerW,           // DCGM_FI_DEV_POWER_USAGE, gauge W
  kEnergyMj,         // DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter mJ since driver load
  kGpuUtil,          // DCGM_FI_DEV_GPU_UTIL, gauge % (not on MIG instances)
  kSmActive,         // DCGM_FI_PROF_SM_ACTIVE, ratio 0-1 (GPU or compute instance)
  kGrEngineActive,   // DCGM_FI_PROF_GR_ENGINE_ACTIVE, ratio 0-1
  kFbUsedMib,        // DCGM_FI_DEV_FB_USED, MiB
  kFbFreeMib,        // DCGM_FI_DEV_FB_FREE, MiB
  kTempC,            // DCGM_FI_DEV_GPU_TEMP
  kMemTempC,         // DCGM_FI_DEV_MEMORY_TEMP
  kXid,              // DCGM_FI_DEV_XID_ERRORS: the last XID (a gauge that repeats)
  kEccSbeVolatile,   // DCGM_FI_DEV_ECC_SBE_VOL_TOTAL
  kEccDbeVolatile,   // DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
  kEccSbeAggregate,  // DCGM_FI_DEV_ECC_SBE_AGG_TOTAL
  kEccDbeAggregate,  // DCGM_FI_DEV_ECC_DBE_AGG_TOTAL
  kRetiredSbe,       // DCGM_FI_DEV_RETIRED_SBE
  kRetiredDbe,       // DCGM_FI_DEV_RETIRED_DBE
  kRetiredPending,   // DCGM_FI_DEV_RETIRED_PENDING
  kRemapCorrectable,    // DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
  kRemapUncorrectable,  // DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS
  kRemapFailure,     // DCGM_FI_DEV_ROW_REMAP_FAILURE, 0/1
  kRemapPending,     // DCGM_FI_DEV_ROW_REMAP_PENDING, 0/1
  kRecoveryAction,   // DCGM_FI_DEV_GPU_RECOVERY_ACTION, NVML's nvmlDeviceGpuRecoveryAction_t
  kFbTotalMib,       // DCGM_FI_DEV_FB_TOTAL, MiB
};
inline constexpr int kFieldCount = 23;

struct FieldInfo {
  Field field;
  std::string_view dcgm;    // dcgm-exporter's metric name
  std::string_view series;  // gpuaas's series name in queries
  bool counter;             // else a gauge
  // Per MIG instance (GPU_I/GPU_CI entity level) rather than GPU level: GPU-level readings repeat
  // on every instance row and are kept once, for the GPU.
  bool per_instance;
  std::string_view help;
};

std::span<const FieldInfo> AllFields();
const FieldInfo& Info(Field f);
std::optional<Field> FieldFromDcgm(std::string_view metric_name);
std::optional<Field> FieldFromSeries(std::string_view series_name);

// DCGM's blank sentinels: values the hardware does not support or could not read
// (DCGM_INT64_BLANK = 0x7ffffffffffffff0 and above, DCGM_FP64_BLANK = 140737488355328.0 and
// above; dcgm_structs.h). They are not readings and are dropped.
bool IsDcgmBlank(double v);

// NVML's nvmlDeviceGpuRecoveryAction_t.
enum class RecoveryAction { kNone = 0, kGpuReset = 1, kNodeReboot = 2, kDrainP2P = 3, kDrainAndReset = 4 };

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_FIELDS_H_
