#include "telemetry/fields.h"

#include <array>

namespace gpuaas::telemetry {
namespace {

constexpr std::array<FieldInfo, kFieldCount> kFields = {{
    {Field::kPowerW, "DCGM_FI_DEV_POWER_USAGE", "power_w", false, false, "Power draw (in W)."},
    {Field::kEnergyMj, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_mj", true, false,
     "Total energy consumption since boot (in mJ)."},
    {Field::kGpuUtil, "DCGM_FI_DEV_GPU_UTIL", "gpu_util", false, false, "GPU utilization (in %)."},
    {Field::kSmActive, "DCGM_FI_PROF_SM_ACTIVE", "sm_active", false, true,
     "The ratio of cycles an SM has at least 1 warp assigned (in %)."},
    {Field::kGrEngineActive, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr_engine_active", false, true,
     "Ratio of time the graphics engine is active."},
    {Field::kFbUsedMib, "DCGM_FI_DEV_FB_USED", "fb_used_mib", false, true, "Framebuffer memory used (in MiB)."},
    {Field::kFbFreeMib, "DCGM_FI_DEV_FB_FREE", "fb_free_mib", false, true, "Framebuffer memory free (in MiB)."},
    {Field::kTempC, "DCGM_FI_DEV_GPU_TEMP", "temp_c", false, false, "GPU temperature (in C)."},
    {Field::kMemTempC, "DCGM_FI_DEV_MEMORY_TEMP", "mem_temp_c", false, false, "Memory temperature (in C)."},
    {Field::kXid, "DCGM_FI_DEV_XID_ERRORS", "xid", false, true, "Value of the last XID error encountered."},
    {Field::kEccSbeVolatile, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_sbe_volatile", true, false,
     "Total number of single-bit volatile ECC errors."},
    {Field::kEccDbeVolatile, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe_volatile", true, false,
     "Total number of double-bit volatile ECC errors."},
    {Field::kEccSbeAggregate, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "ecc_sbe_aggregate", true, false,
     "Total number of single-bit persistent ECC errors."},
    {Field::kEccDbeAggregate, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "ecc_dbe_aggregate", true, false,
     "Total number of double-bit persistent ECC errors."},
    {Field::kRetiredSbe, "DCGM_FI_DEV_RETIRED_SBE", "retired_sbe", true, false,
     "Total number of retired pages due to single-bit errors."},
    {Field::kRetiredDbe, "DCGM_FI_DEV_RETIRED_DBE", "retired_dbe", true, false,
     "Total number of retired pages due to double-bit errors."},
    {Field::kRetiredPending, "DCGM_FI_DEV_RETIRED_PENDING", "retired_pending", true, false,
     "Total number of pages pending retirement."},
    {Field::kRemapCorrectable, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "remapped_rows_correctable", true, false,
     "Number of remapped rows for correctable errors"},
    {Field::kRemapUncorrectable, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "remapped_rows_uncorrectable", true,
     false, "Number of remapped rows for uncorrectable errors"},
    {Field::kRemapFailure, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "row_remap_failure", false, false,
     "Whether remapping of rows has failed"},
    {Field::kRemapPending, "DCGM_FI_DEV_ROW_REMAP_PENDING", "row_remap_pending", false, false,
     "Whether remapping of rows is pending (a GPU reset applies it)"},
    {Field::kRecoveryAction, "DCGM_FI_DEV_GPU_RECOVERY_ACTION", "recovery_action", false, false,
     "Recovery action the driver asks for (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset)"},
    {Field::kFbTotalMib, "DCGM_FI_DEV_FB_TOTAL", "fb_total_mib", false, true, "Framebuffer memory total (in MiB)."},
}};

}  // namespace

std::span<const FieldInfo> AllFields() { return kFields; }

const FieldInfo& Info(Field f) { return kFields[static_cast<size_t>(f)]; }

std::optional<Field> FieldFromDcgm(std::string_view name) {
  for (const FieldInfo& i : kFields) {
    if (i.dcgm == name) return i.field;
  }
  return std::nullopt;
}

std::optional<Field> FieldFromSeries(std::string_view name) {
  for (const FieldInfo& i : kFields) {
    if (i.series == name) return i.field;
  }
  return std::nullopt;
}

bool IsDcgmBlank(double v) {
  // DCGM_INT64_BLANK as a double (9223372036854775792) and DCGM_FP64_BLANK (2^47).
  // 0x7ffffffffffffff0 and the codes above it all round to 2^63 as doubles.
  return v >= 9.2233720368547e18 || (v >= 140737488355328.0 && v < 140737488355328.0 + 16);
}

}  // namespace gpuaas::telemetry
