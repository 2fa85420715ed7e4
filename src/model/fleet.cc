#include "model/fleet.h"

#include <string>

#include "fmt/format.h"

namespace gpuaas::model {

bool SetDriverHealth(GpuCapacity& g, bool driver_healthy, Time now) {
  return SetCondition(g.status.conditions,
                      driver_healthy
                          ? Condition{std::string(kGpuDriverHealthy), ConditionStatus::kTrue, "DriverReportedHealthy", "", now, 0}
                          : Condition{std::string(kGpuDriverHealthy), ConditionStatus::kFalse, std::string(kReasonDriverUnhealthy),
                                      "the cluster driver reports the GPU unhealthy", now, 0});
}

bool DriverReportedHealthy(const GpuCapacity& g) {
  const Condition* c = FindCondition(g.status.conditions, kGpuDriverHealthy);
  return c == nullptr || c->status != ConditionStatus::kFalse;
}

bool SummarizeGpuHealth(GpuCapacity& g, Time now) {
  std::string why;
  for (std::string_view type : {kGpuMemoryErrors, kGpuResetRequired}) {
    const Condition* c = FindCondition(g.status.conditions, type);
    if (c != nullptr && c->status == ConditionStatus::kTrue) {
      if (!why.empty()) why += "; ";
      why += fmt::format("{}: {}", type, c->message.empty() ? c->reason : c->message);
    }
  }
  Condition healthy{std::string(kGpuHealthy), ConditionStatus::kTrue, "Healthy", "", now, 0};
  if (!DriverReportedHealthy(g)) {
    healthy = {std::string(kGpuHealthy), ConditionStatus::kFalse, std::string(kReasonDriverUnhealthy),
               why.empty() ? "the cluster driver reports the GPU unhealthy"
                           : "the cluster driver reports the GPU unhealthy; " + why,
               now, 0};
  } else if (!why.empty()) {
    const Condition* mem = FindCondition(g.status.conditions, kGpuMemoryErrors);
    const bool memory = mem != nullptr && mem->status == ConditionStatus::kTrue;
    healthy = {std::string(kGpuHealthy), ConditionStatus::kFalse, memory ? "MemoryErrors" : "ResetRequired", why,
               now, 0};
  }
  const Health h = healthy.status == ConditionStatus::kTrue ? Health::kHealthy : Health::kUnhealthy;
  bool changed = g.status.health != h;
  g.status.health = h;
  changed |= SetCondition(g.status.conditions, std::move(healthy));
  return changed;
}

}  // namespace gpuaas::model
