#include "agent/nvml.h"

#include <dlfcn.h>

#include <cstring>
#include <vector>

#include "fmt/format.h"

namespace gpuaas::agent {
namespace {

using telemetry::Field;

// NVML's ABI as the agent uses it (types and values from nvml.h of NVML 12/13; declared here so
// that building needs no CUDA headers).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEventSet_t = struct nvmlEventSet_st*;
using nvmlGpuInstance_t = struct nvmlGpuInstance_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr unsigned long long kEventXid = 0x8;  // nvmlEventTypeXidCriticalError
constexpr unsigned kFieldRecoveryAction = 230;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned gpu, memory;
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};
struct nvmlFieldValue_t {
  unsigned fieldId;
  unsigned scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value;
};
struct nvmlGpuInstanceInfo_t {
  nvmlDevice_t device;
  unsigned id;
  unsigned profileId;
  unsigned start;
  unsigned size;
};

struct Api {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*DriverVersion)(char*, unsigned);
  nvmlReturn_t (*Count)(unsigned*);
  nvmlReturn_t (*HandleByIndex)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*Uuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*Name)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*Index)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*Memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*Power)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*Energy)(nvmlDevice_t, unsigned long long*);
  nvmlReturn_t (*Utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*Temperature)(nvmlDevice_t, int, unsigned*);
  nvmlReturn_t (*EccErrors)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*RemappedRows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);
  nvmlReturn_t (*MigMode)(nvmlDevice_t, unsigned*, unsigned*);
  nvmlReturn_t (*MaxMigDevices)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*MigHandle)(nvmlDevice_t, unsigned, nvmlDevice_t*);
  nvmlReturn_t (*GpuInstanceId)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*GpuInstanceById)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*);
  nvmlReturn_t (*GpuInstanceInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
  nvmlReturn_t (*FieldValues)(nvmlDevice_t, int, nvmlFieldValue_t*);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*EventWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
};

class NvmlSource final : public GpuSource {
 public:
  NvmlSource(std::string node, void* lib, Api api) : node_(std::move(node)), lib_(lib), api_(api) {}
  ~NvmlSource() override {
    if (events_ != nullptr && api_.EventSetFree) api_.EventSetFree(events_);
    api_.Shutdown();
    dlclose(lib_);
  }

  absl::Status Start() {
    unsigned n = 0;
    if (nvmlReturn_t rc = api_.Count(&n); rc != kSuccess) return Fail("nvmlDeviceGetCount_v2", rc);
    for (unsigned i = 0; i < n; ++i) {
      nvmlDevice_t d = nullptr;
      if (nvmlReturn_t rc = api_.HandleByIndex(i, &d); rc != kSuccess) return Fail("nvmlDeviceGetHandleByIndex_v2", rc);
      devices_.push_back(d);
    }
    // XID events: optional (not every GPU or privilege level supports them).
    if (api_.EventSetCreate && api_.RegisterEvents && api_.EventWait && api_.EventSetCreate(&events_) == kSuccess) {
      for (nvmlDevice_t d : devices_) (void)api_.RegisterEvents(d, kEventXid, events_);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<telemetry::NodeReport> Read(int64_t now_ms) override {
    telemetry::NodeReport r;
    r.node = node_;
    r.time_ms = now_ms;
    char buf[96] = {};
    if (api_.DriverVersion(buf, sizeof buf) == kSuccess) r.driver_version = buf;
    std::vector<std::pair<nvmlDevice_t, telemetry::XidEvent>> xids;
    if (events_ != nullptr) {
      nvmlEventData_t e{};
      for (int k = 0; k < 256 && api_.EventWait(events_, &e, 0) == kSuccess; ++k) {
        if ((e.eventType & kEventXid) == 0) continue;
        const int gi = e.gpuInstanceId == 0xFFFFFFFFu ? -1 : static_cast<int>(e.gpuInstanceId);
        xids.push_back({e.device, {static_cast<int>(e.eventData), gi, now_ms}});
      }
    }
    for (size_t i = 0; i < devices_.size(); ++i) {
      nvmlDevice_t d = devices_[i];
      telemetry::GpuReport g;
      g.index = static_cast<int>(i);
      if (api_.Uuid(d, buf, sizeof buf) == kSuccess) g.uuid = buf;
      if (api_.Name(d, buf, sizeof buf) == kSuccess) g.name = buf;
      nvmlMemory_t mem{};
      if (api_.Memory(d, &mem) == kSuccess) {
        g.memory_mib = static_cast<int64_t>(mem.total >> 20);
        g.readings[Field::kFbTotalMib] = static_cast<double>(mem.total >> 20);
        g.readings[Field::kFbUsedMib] = static_cast<double>(mem.used >> 20);
        g.readings[Field::kFbFreeMib] = static_cast<double>(mem.free >> 20);
      }
      unsigned mw = 0;
      if (api_.Power(d, &mw) == kSuccess) g.readings[Field::kPowerW] = mw / 1000.0;
      unsigned long long mj = 0;
      if (api_.Energy(d, &mj) == kSuccess) g.readings[Field::kEnergyMj] = static_cast<double>(mj);
      unsigned temp = 0;
      if (api_.Temperature(d, 0, &temp) == kSuccess) g.readings[Field::kTempC] = temp;
      const std::pair<Field, std::pair<int, int>> ecc[] = {
          {Field::kEccSbeVolatile, {0, 0}}, {Field::kEccDbeVolatile, {1, 0}},
          {Field::kEccSbeAggregate, {0, 1}}, {Field::kEccDbeAggregate, {1, 1}}};
      for (const auto& [f, kind] : ecc) {
        unsigned long long n = 0;
        if (api_.EccErrors(d, kind.first, kind.second, &n) == kSuccess) g.readings[f] = static_cast<double>(n);
      }
      unsigned corr = 0, unc = 0, pending = 0, failure = 0;
      if (api_.RemappedRows && api_.RemappedRows(d, &corr, &unc, &pending, &failure) == kSuccess) {
        g.readings[Field::kRemapCorrectable] = corr;
        g.readings[Field::kRemapUncorrectable] = unc;
        g.readings[Field::kRemapPending] = pending;
        g.readings[Field::kRemapFailure] = failure;
      }
      if (api_.FieldValues) {
        nvmlFieldValue_t fv{};
        fv.fieldId = kFieldRecoveryAction;
        if (api_.FieldValues(d, 1, &fv) == kSuccess && fv.nvmlReturn == kSuccess) {
          g.readings[Field::kRecoveryAction] = static_cast<double>(fv.value.ui);
        }
      }
      unsigned current = 0, pending_mode = 0;
      g.mig_enabled = api_.MigMode && api_.MigMode(d, &current, &pending_mode) == kSuccess && current == 1;
      if (!g.mig_enabled) {
        nvmlUtilization_t u{};
        if (api_.Utilization(d, &u) == kSuccess) g.readings[Field::kGpuUtil] = u.gpu;
      } else {
        ReadInstances(d, g);
      }
      for (const auto& [dev, x] : xids) {
        if (dev == d) g.xid_events.push_back(x);
      }
      r.gpus.push_back(std::move(g));
    }
    return r;
  }

 private:
  void ReadInstances(nvmlDevice_t d, telemetry::GpuReport& g) {
    unsigned max = 0;
    if (!api_.MaxMigDevices || api_.MaxMigDevices(d, &max) != kSuccess) return;
    for (unsigned k = 0; k < max; ++k) {
      nvmlDevice_t m = nullptr;
      if (api_.MigHandle(d, k, &m) != kSuccess) continue;
      telemetry::InstanceReport in;
      char buf[96] = {};
      unsigned gi = 0;
      if (api_.GpuInstanceId(m, &gi) != kSuccess) continue;
      in.gi = static_cast<int>(gi);
      if (api_.Uuid(m, buf, sizeof buf) == kSuccess) in.uuid = buf;
      // MIG device names end in the profile: "NVIDIA H200 MIG 3g.71gb".
      if (api_.Name(m, buf, sizeof buf) == kSuccess) {
        const std::string name = buf;
        const size_t at = name.rfind("MIG ");
        in.profile = at == std::string::npos ? "" : name.substr(at + 4);
      }
      nvmlGpuInstance_t inst = nullptr;
      nvmlGpuInstanceInfo_t info{};
      in.start = -1;
      if (api_.GpuInstanceById && api_.GpuInstanceInfo && api_.GpuInstanceById(d, gi, &inst) == kSuccess &&
          api_.GpuInstanceInfo(inst, &info) == kSuccess) {
        in.start = static_cast<int>(info.start);
        in.size = static_cast<int>(info.size);
      }
      nvmlMemory_t mem{};
      if (api_.Memory(m, &mem) == kSuccess) {
        in.readings[Field::kFbTotalMib] = static_cast<double>(mem.total >> 20);
        in.readings[Field::kFbUsedMib] = static_cast<double>(mem.used >> 20);
        in.readings[Field::kFbFreeMib] = static_cast<double>(mem.free >> 20);
      }
      g.instances.push_back(std::move(in));
    }
  }

  absl::Status Fail(std::string_view call, nvmlReturn_t rc) const {
    return absl::FailedPreconditionError(
        fmt::format("NVML {}: {} (error {})", call, api_.ErrorString ? api_.ErrorString(rc) : "unknown", rc));
  }

  std::string node_;
  void* lib_;
  Api api_;
  std::vector<nvmlDevice_t> devices_;
  nvmlEventSet_t events_ = nullptr;
};

template <typename F>
bool Load(void* lib, const char* name, F& fn, bool required, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr && required) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuSource>> OpenNvml(const std::string& node, const std::string& library) {
  const std::string path = library.empty() ? "libnvidia-ml.so.1" : library;
  void* lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(fmt::format(
        "cannot load NVML ({}): {}. Is the NVIDIA driver installed? Use --simulate to run without a GPU.", path,
        why ? why : "unknown error"));
  }
  Api api{};
  std::string missing;
  Load(lib, "nvmlInit_v2", api.Init, true, missing);
  Load(lib, "nvmlShutdown", api.Shutdown, true, missing);
  Load(lib, "nvmlErrorString", api.ErrorString, false, missing);
  Load(lib, "nvmlSystemGetDriverVersion", api.DriverVersion, true, missing);
  Load(lib, "nvmlDeviceGetCount_v2", api.Count, true, missing);
  Load(lib, "nvmlDeviceGetHandleByIndex_v2", api.HandleByIndex, true, missing);
  Load(lib, "nvmlDeviceGetUUID", api.Uuid, true, missing);
  Load(lib, "nvmlDeviceGetName", api.Name, true, missing);
  Load(lib, "nvmlDeviceGetIndex", api.Index, false, missing);
  Load(lib, "nvmlDeviceGetMemoryInfo", api.Memory, true, missing);
  Load(lib, "nvmlDeviceGetPowerUsage", api.Power, true, missing);
  Load(lib, "nvmlDeviceGetTotalEnergyConsumption", api.Energy, true, missing);
  Load(lib, "nvmlDeviceGetUtilizationRates", api.Utilization, true, missing);
  Load(lib, "nvmlDeviceGetTemperature", api.Temperature, true, missing);
  Load(lib, "nvmlDeviceGetTotalEccErrors", api.EccErrors, true, missing);
  Load(lib, "nvmlDeviceGetRemappedRows", api.RemappedRows, false, missing);
  Load(lib, "nvmlDeviceGetMigMode", api.MigMode, false, missing);
  Load(lib, "nvmlDeviceGetMaxMigDeviceCount", api.MaxMigDevices, false, missing);
  Load(lib, "nvmlDeviceGetMigDeviceHandleByIndex", api.MigHandle, false, missing);
  Load(lib, "nvmlDeviceGetGpuInstanceId", api.GpuInstanceId, false, missing);
  Load(lib, "nvmlDeviceGetGpuInstanceById", api.GpuInstanceById, false, missing);
  Load(lib, "nvmlGpuInstanceGetInfo", api.GpuInstanceInfo, false, missing);
  Load(lib, "nvmlDeviceGetFieldValues", api.FieldValues, false, missing);
  Load(lib, "nvmlEventSetCreate", api.EventSetCreate, false, missing);
  Load(lib, "nvmlDeviceRegisterEvents", api.RegisterEvents, false, missing);
  Load(lib, "nvmlEventSetWait_v2", api.EventWait, false, missing);
  Load(lib, "nvmlEventSetFree", api.EventSetFree, false, missing);
  if (!api.MigHandle || !api.GpuInstanceId) api.MaxMigDevices = nullptr;  // MIG needs all three
  if (!missing.empty()) {
    dlclose(lib);
    return absl::FailedPreconditionError(fmt::format("NVML ({}) lacks {}: the driver is too old", path, missing));
  }
  if (nvmlReturn_t rc = api.Init(); rc != kSuccess) {
    const std::string why = api.ErrorString ? api.ErrorString(rc) : "unknown";
    dlclose(lib);
    return absl::FailedPreconditionError(fmt::format("nvmlInit_v2 failed: {} (error {})", why, rc));
  }
  auto src = std::make_unique<NvmlSource>(node, lib, api);
  if (absl::Status s = src->Start(); !s.ok()) return s;
  return std::unique_ptr<GpuSource>(std::move(src));
}

}  // namespace gpuaas::agent
