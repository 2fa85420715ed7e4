// A kubelet's PodResources service (gRPC v1.PodResourcesLister, the real protobuf) on a unix
// socket, for tests of the node agent: List answers what the test set. Stop removes the socket
// and Start makes it again on the same path, as a kubelet restart does.
#ifndef GPUAAS_TEST_FAKE_KUBELET_H_
#define GPUAAS_TEST_FAKE_KUBELET_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "agent/podresources/api.grpc.pb.h"

namespace gpuaas::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string socket);
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  // Serves on the socket (made afresh) before it returns. False when it cannot.
  bool Start();
  // Shuts the server down and removes the socket.
  void Stop();
  void Set(v1::ListPodResourcesResponse answer);
  int lists() const { return lists_.load(); }

 private:
  class Service;
  std::string socket_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> lists_{0};
};

// A container's devices under one resource, as a device plugin gives them.
void AddDevices(v1::ListPodResourcesResponse& r, const std::string& ns, const std::string& pod,
                const std::string& container, const std::string& resource, const std::vector<std::string>& ids);

}  // namespace gpuaas::testing

#endif  // GPUAAS_TEST_FAKE_KUBELET_H_
