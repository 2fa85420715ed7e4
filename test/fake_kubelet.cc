#include "test/fake_kubelet.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>

namespace gpuaas::testing {

class FakeKubelet::Service final : public v1::PodResourcesLister::Service {
 public:
  explicit Service(std::atomic<int>& lists) : lists_(lists) {}
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    ++lists_;
    std::lock_guard<std::mutex> lock(mu_);
    *out = answer_;
    return grpc::Status::OK;
  }
  void Set(v1::ListPodResourcesResponse a) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(a);
  }

 private:
  std::atomic<int>& lists_;
  std::mutex mu_;
  v1::ListPodResourcesResponse answer_;
};

FakeKubelet::FakeKubelet(std::string socket) : socket_(std::move(socket)), service_(std::make_unique<Service>(lists_)) {}

FakeKubelet::~FakeKubelet() { Stop(); }

bool FakeKubelet::Start() {
  std::error_code ec;
  std::filesystem::remove(socket_, ec);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
  b.RegisterService(service_.get());
  server_ = b.BuildAndStart();
  return server_ != nullptr;
}

void FakeKubelet::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  std::error_code ec;
  std::filesystem::remove(socket_, ec);
}

void FakeKubelet::Set(v1::ListPodResourcesResponse answer) { service_->Set(std::move(answer)); }

void AddDevices(v1::ListPodResourcesResponse& r, const std::string& ns, const std::string& pod,
                const std::string& container, const std::string& resource, const std::vector<std::string>& ids) {
  v1::PodResources* p = nullptr;
  for (v1::PodResources& existing : *r.mutable_pod_resources()) {
    if (existing.name() == pod && existing.namespace_() == ns) p = &existing;
  }
  if (p == nullptr) {
    p = r.add_pod_resources();
    p->set_name(pod);
    p->set_namespace_(ns);
  }
  v1::ContainerResources* c = nullptr;
  for (v1::ContainerResources& existing : *p->mutable_containers()) {
    if (existing.name() == container) c = &existing;
  }
  if (c == nullptr) {
    c = p->add_containers();
    c->set_name(container);
  }
  v1::ContainerDevices* d = c->add_devices();
  d->set_resource_name(resource);
  for (const std::string& id : ids) d->add_device_ids(id);
  d->mutable_topology()->add_nodes()->set_id(0);
}

}  // namespace gpuaas::testing
