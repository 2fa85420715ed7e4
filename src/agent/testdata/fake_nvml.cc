// A stand-in for libnvidia-ml.so.1 in tests: the entry points the agent loads, answering for two
// GPUs (GPU 0 whole, GPU 1 in MIG mode with two 3g instances) and one pending XID 79 event.
// Values are fixed so that tests can check the agent's unit conversions.
#include <cstring>

extern "C" {

typedef int nvmlReturn_t;
struct Dev { int index; int mig; int gi; };
static Dev g_gpus[2] = {{0, -1, 0}, {1, -1, 0}};
static Dev g_migs[2] = {{1, 0, 1}, {1, 1, 2}};
static int g_xid_pending = 1;
static int g_inits = 0;

struct nvmlMemory_t { unsigned long long total, free, used; };
struct nvmlUtilization_t { unsigned gpu, memory; };
struct nvmlEventData_t { void* device; unsigned long long eventType, eventData; unsigned gi, ci; };
struct nvmlFieldValue_t {
  unsigned fieldId, scopeId; long long timestamp, latencyUsec; int valueType; nvmlReturn_t nvmlReturn;
  union { double d; unsigned ui; unsigned long long ull; } value;
};
struct nvmlGpuInstanceInfo_t { void* device; unsigned id, profileId, start, size; };

static void Put(char* buf, unsigned len, const char* s) { std::strncpy(buf, s, len - 1); buf[len - 1] = 0; }

nvmlReturn_t nvmlInit_v2() { ++g_inits; return 0; }
nvmlReturn_t nvmlShutdown() { return 0; }
const char* nvmlErrorString(nvmlReturn_t) { return "fake"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char* b, unsigned n) { Put(b, n, "570.124.06"); return 0; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) { *n = 2; return 0; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) { if (i > 1) return 2; *d = &g_gpus[i]; return 0; }
nvmlReturn_t nvmlDeviceGetUUID(void* d, char* b, unsigned n) {
  Dev* x = static_cast<Dev*>(d);
  if (x->mig >= 0) { Put(b, n, x->mig == 0 ? "MIG-aaaa" : "MIG-bbbb"); return 0; }
  Put(b, n, x->index == 0 ? "GPU-fake-0" : "GPU-fake-1");
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(void* d, char* b, unsigned n) {
  Put(b, n, static_cast<Dev*>(d)->mig >= 0 ? "NVIDIA H200 MIG 3g.71gb" : "NVIDIA H200");
  return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void* d, nvmlMemory_t* m) {
  if (static_cast<Dev*>(d)->mig >= 0) { m->total = 71ull << 30; m->used = 10ull << 30; m->free = 61ull << 30; return 0; }
  m->total = 143771ull << 20; m->used = 40000ull << 20; m->free = m->total - m->used;
  return 0;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(void*, unsigned* mw) { *mw = 412345; return 0; }
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(void*, unsigned long long* mj) { *mj = 987654321ull; return 0; }
nvmlReturn_t nvmlDeviceGetUtilizationRates(void* d, nvmlUtilization_t* u) {
  if (static_cast<Dev*>(d)->index == 1) return 3;  // not supported under MIG
  u->gpu = 87; u->memory = 40; return 0;
}
nvmlReturn_t nvmlDeviceGetTemperature(void*, int, unsigned* t) { *t = 61; return 0; }
nvmlReturn_t nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* n) {
  *n = static_cast<Dev*>(d)->index == 1 && type == 1 && counter == 0 ? 2 : 0;
  return 0;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(void*, unsigned* c, unsigned* u, unsigned* p, unsigned* f) {
  *c = 1; *u = 0; *p = 0; *f = 0; return 0;
}
nvmlReturn_t nvmlDeviceGetMigMode(void* d, unsigned* cur, unsigned* pend) {
  *cur = *pend = static_cast<Dev*>(d)->index == 1 ? 1 : 0; return 0;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(void*, unsigned* n) { *n = 7; return 0; }
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(void* d, unsigned i, void** m) {
  if (static_cast<Dev*>(d)->index != 1 || i > 1) return 2;
  *m = &g_migs[i]; return 0;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(void* m, unsigned* id) { *id = static_cast<Dev*>(m)->gi; return 0; }
nvmlReturn_t nvmlDeviceGetGpuInstanceById(void*, unsigned id, void** gi) { *gi = &g_migs[id - 1]; return 0; }
nvmlReturn_t nvmlGpuInstanceGetInfo(void* gi, nvmlGpuInstanceInfo_t* info) {
  info->id = static_cast<Dev*>(gi)->gi; info->profileId = 9; info->start = (info->id - 1) * 4; info->size = 4;
  return 0;
}
nvmlReturn_t nvmlDeviceGetFieldValues(void*, int n, nvmlFieldValue_t* v) {
  for (int i = 0; i < n; ++i) { v[i].nvmlReturn = 0; v[i].valueType = 1; v[i].value.ui = 0; }
  return 0;
}
nvmlReturn_t nvmlEventSetCreate(void** s) { static int set; *s = &set; return 0; }
nvmlReturn_t nvmlDeviceRegisterEvents(void*, unsigned long long, void*) { return 0; }
nvmlReturn_t nvmlEventSetWait_v2(void*, nvmlEventData_t* e, unsigned) {
  if (!g_xid_pending) return 10;  // timeout
  g_xid_pending = 0;
  e->device = &g_gpus[0]; e->eventType = 0x8; e->eventData = 79; e->gi = 0xFFFFFFFFu; e->ci = 0xFFFFFFFFu;
  return 0;
}
nvmlReturn_t nvmlEventSetFree(void*) { return 0; }

}  // extern "C"
