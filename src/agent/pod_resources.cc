#include "agent/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "agent/podresources/api.grpc.pb.h"
#include "fmt/format.h"

namespace gpuaas::agent {

std::string_view DeviceUuid(std::string_view device_id) {
  const size_t sep = device_id.find("::");
  return sep == std::string_view::npos ? device_id : device_id.substr(0, sep);
}

void AttachPods(telemetry::NodeReport& report, const std::vector<PodDevice>& devices) {
  std::map<std::string_view, std::vector<telemetry::PodRef>> by_uuid;
  for (const PodDevice& d : devices) {
    if (d.uuid.empty() || !d.resource.starts_with("nvidia.com/")) continue;
    std::vector<telemetry::PodRef>& refs = by_uuid[d.uuid];
    telemetry::PodRef ref{d.ns, d.pod, d.container};
    // A time-sliced device is listed once per container that shares it.
    if (std::find(refs.begin(), refs.end(), ref) == refs.end()) refs.push_back(std::move(ref));
  }
  auto pods_of = [&](const std::string& uuid) {
    auto it = by_uuid.find(uuid);
    return it == by_uuid.end() ? std::vector<telemetry::PodRef>{} : it->second;
  };
  for (telemetry::GpuReport& g : report.gpus) {
    g.pods = pods_of(g.uuid);
    for (telemetry::InstanceReport& in : g.instances) in.pods = pods_of(in.uuid);
  }
}

struct PodResourcesClient::Impl {
  std::string socket;
  std::chrono::milliseconds timeout;
  std::mutex mu;
  std::shared_ptr<grpc::Channel> channel;  // guarded by mu; dropped after a failed call
};

PodResourcesClient::PodResourcesClient(std::string socket, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->socket = std::move(socket);
  impl_->timeout = timeout;
}

PodResourcesClient::~PodResourcesClient() = default;

absl::StatusOr<std::vector<PodDevice>> PodResourcesClient::List() {
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->channel) {
      impl_->channel = grpc::CreateChannel("unix:" + impl_->socket, grpc::InsecureChannelCredentials());
    }
    channel = impl_->channel;
  }
  std::unique_ptr<v1::PodResourcesLister::Stub> stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + impl_->timeout);
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  const grpc::Status s = stub->List(&ctx, req, &resp);
  if (!s.ok()) {
    // A kubelet restart recreates the socket: a new channel finds it without gRPC's reconnect
    // backoff (up to two minutes).
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->channel == channel) impl_->channel.reset();
    return absl::UnavailableError(
        fmt::format("kubelet PodResources at {}: {} ({})", impl_->socket, s.error_message(), static_cast<int>(s.error_code())));
  }
  std::vector<PodDevice> out;
  for (const v1::PodResources& pod : resp.pod_resources()) {
    for (const v1::ContainerResources& c : pod.containers()) {
      for (const v1::ContainerDevices& d : c.devices()) {
        for (const std::string& id : d.device_ids()) {
          PodDevice pd;
          pd.ns = pod.namespace_();
          pd.pod = pod.name();
          pd.container = c.name();
          pd.resource = d.resource_name();
          pd.uuid = std::string(DeviceUuid(id));
          out.push_back(std::move(pd));
        }
      }
      for (const v1::DynamicResource& dr : c.dynamic_resources()) {
        for (const v1::ClaimResource& cr : dr.claim_resources()) {
          PodDevice pd;
          pd.ns = pod.namespace_();
          pd.pod = pod.name();
          pd.container = c.name();
          pd.claim = fmt::format("{}/{}", dr.claim_namespace(), dr.claim_name());
          pd.driver = cr.driver_name();
          pd.pool = cr.pool_name();
          pd.device = cr.device_name();
          out.push_back(std::move(pd));
        }
      }
    }
  }
  return out;
}

}  // namespace gpuaas::agent
