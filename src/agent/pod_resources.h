// Which pod holds which GPU device on this node, from the kubelet's PodResources API (gRPC
// `v1.PodResourcesLister/List` on the kubelet's unix socket, by default
// /var/lib/kubelet/pod-resources/kubelet.sock), as dcgm-exporter reads it: the node agent labels
// each GPU and MIG instance with the pods that hold it. gRPC and the generated messages stay in
// pod_resources.cc.
#ifndef GPUAAS_AGENT_POD_RESOURCES_H_
#define GPUAAS_AGENT_POD_RESOURCES_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "telemetry/report.h"

namespace gpuaas::agent {

inline constexpr std::string_view kKubeletPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

// One device the kubelet gave one container.
struct PodDevice {
  std::string ns;
  std::string pod;
  std::string container;
  // Device plugin devices: the resource ("nvidia.com/gpu", "nvidia.com/mig-1g.18gb") and the
  // device's UUID ("GPU-…", "MIG-…"; a "::N" suffix, which shared devices carry on some
  // platforms, removed).
  std::string resource;
  std::string uuid;
  // Devices of a ResourceClaim (DRA): driver, pool and device as the ResourceSlice names them;
  // `uuid` empty (the slice, not the kubelet, knows it).
  std::string claim;  // "namespace/name"
  std::string driver;
  std::string pool;
  std::string device;
  friend bool operator==(const PodDevice&, const PodDevice&) = default;
};

// "MIG-…::3" -> "MIG-…"; other ids unchanged.
std::string_view DeviceUuid(std::string_view device_id);

// Labels the report's GPUs and MIG instances with the pods holding them (by UUID); devices that
// are not NVIDIA's are ignored. Pure.
void AttachPods(telemetry::NodeReport& report, const std::vector<PodDevice>& devices);

class PodResourcesClient {
 public:
  // `socket`: the kubelet's socket path. Connects at the first List.
  explicit PodResourcesClient(std::string socket, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  // Every device the kubelet assigned, per container. Unavailable (with the socket named) when
  // the kubelet does not answer; the next call connects afresh, so a kubelet that restarted and
  // recreated its socket is found again at once.
  absl::StatusOr<std::vector<PodDevice>> List();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuaas::agent

#endif  // GPUAAS_AGENT_POD_RESOURCES_H_
