// The Kubernetes driver against the fake API server (test/fake_kube_apiserver.h), fed with the
// GPU Operator's recorded node labels: the client, the list-and-watch loop and the inventory the
// control plane writes from them, through injected faults.
#include <array>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "cluster/kubernetes/admission.h"
#include "cluster/kubernetes/client.h"
#include "cluster/kubernetes/client_config.h"
#include "cluster/kubernetes/driver.h"
#include "cluster/kubernetes/mig_config.h"
#include "cluster/kubernetes/nodes.h"
#include "cluster/kubernetes/resource_slices.h"
#include "common/status.h"
#include "common/strings.h"
#include "controller/control_plane.h"
#include "gtest/gtest.h"
#include "model/fleet.h"
#include "nlohmann/json.hpp"
#include "service/clusters.h"
#include "service/pools.h"
#include "store/cache.h"
#include "store/objects.h"
#include "store/store.h"
#include "telemetry/hub.h"
#include "test/fake_kube_apiserver.h"
#include "test/test_certs.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas {
namespace {

using cluster::kubernetes::AdmissionMode;
using cluster::kubernetes::Client;
using cluster::kubernetes::ClientConfig;
using cluster::kubernetes::KubernetesDriver;
using cluster::kubernetes::PoolsFrom;
using cluster::kubernetes::ReviewClaim;
using cluster::kubernetes::UuidSelector;
using cluster::kubernetes::DeviceTaintRuleName;
using nlohmann::json;
using testing::FakeKubeApiServer;

constexpr char kNodes[] = "/api/v1/nodes";

// The GPU Operator's recorded mixed-strategy node (an H100 80GB with all-balanced MIG); null when
// the file cannot be read.
json RecordedMixedNodeLabels() {
  std::ifstream in("test/testdata/fixtures/nvidia-cloud-native-docs_gpu-operator_output_mig-mixed-node-labels.json");
  if (!in) return json();
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// Its GPU labels, for tests that need a MIG node but not the recording.
json H100AllBalancedLabels() {
  return {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu.count", "1"},
          {"nvidia.com/gpu.memory", "81559"},                 {"nvidia.com/mig.capable", "true"},
          {"nvidia.com/mig.strategy", "mixed"},               {"nvidia.com/mig-1g.10gb.count", "2"},
          {"nvidia.com/mig-2g.20gb.count", "1"},              {"nvidia.com/mig-3g.40gb.count", "1"}};
}

// A Node as the API server has it: `labels` as GFD wrote them, capacity as the device plugin.
std::string NodeJson(const std::string& name, const json& labels, const json& capacity) {
  return json{{"metadata", {{"name", name}, {"uid", "uid-" + name}, {"labels", labels}}},
              {"spec", json::object()},
              {"status",
               {{"capacity", capacity},
                {"allocatable", capacity},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}}
      .dump();
}

std::string MigNode(const std::string& name, const json& labels = H100AllBalancedLabels()) {
  return NodeJson(name, labels,
                  {{"cpu", "128"}, {"memory", "1056451724Ki"}, {"nvidia.com/mig-1g.10gb", "2"},
                   {"nvidia.com/mig-2g.20gb", "1"}, {"nvidia.com/mig-3g.40gb", "1"}});
}

json H200Labels(int gpus) {
  return {{"nvidia.com/gpu.product", "NVIDIA-H200"}, {"nvidia.com/gpu.count", std::to_string(gpus)},
          {"nvidia.com/gpu.memory", "143771"}, {"nvidia.com/mig.capable", "true"}};
}

// Eight H200s with the MIG manager idle: mixed strategy, MIG off, its last config applied.
json MigReadyH200Labels() {
  json labels = H200Labels(8);
  labels["nvidia.com/mig.strategy"] = "mixed";
  labels["nvidia.com/mig.config"] = "all-disabled";
  labels["nvidia.com/mig.config.state"] = "success";
  return labels;
}

std::string H200Node(const std::string& name, int gpus) {
  return NodeJson(name, H200Labels(gpus), {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", std::to_string(gpus)}});
}

std::string CpuNode(const std::string& name) {
  return NodeJson(name, {{"kubernetes.io/os", "linux"}}, {{"cpu", "16"}, {"memory", "64Gi"}});
}

// Waits for `pred` with a deadline; the driver's threads move on their own.
template <typename F>
bool Eventually(F pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

cluster::kubernetes::DriverOptions FastOptions() {
  cluster::kubernetes::DriverOptions o;
  o.backoff.initial = std::chrono::milliseconds(50);
  o.backoff.max = std::chrono::milliseconds(400);
  o.timeouts.watch = std::chrono::seconds(5);
  return o;
}

std::unique_ptr<KubernetesDriver> Driver(const std::string& name, const FakeKubeApiServer& api,
                                         const std::string& token = "t0ken") {
  ClientConfig c;
  c.server = api.url();
  c.token = token;
  absl::StatusOr<std::unique_ptr<KubernetesDriver>> d = KubernetesDriver::Make(name, c, FastOptions());
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(*d);
}

int CountWatches(const FakeKubeApiServer& api, bool watch) {
  int n = 0;
  for (const auto& r : api.requests()) n += r.watch == watch ? 1 : 0;
  return n;
}

// A test that fails right after starting the fake stops it at once: that must not hang.
TEST(FakeKubeApiServerTest, StopsRightAfterStarting) {
  for (int i = 0; i < 20; ++i) {
    FakeKubeApiServer api;
    api.Start();
    api.Stop();
    api.Start();  // the same port again
    EXPECT_GT(api.port(), 0);
  }
}

TEST(KubernetesClient, ListsPageByPageAndSaysWhatTheServerRefused) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  for (int i = 0; i < 5; ++i) api.Put(kNodes, "Node", H200Node("h200-" + std::to_string(i), 8));
  ClientConfig c;
  c.server = api.url();
  c.token = "t0ken";
  std::unique_ptr<Client> client = *Client::Make(c);
  absl::StatusOr<cluster::kubernetes::ListResult> list = client->List(kNodes, /*page_size=*/2);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 5u);
  EXPECT_EQ(list->resource_version, api.resource_version());
  EXPECT_EQ(json::parse(list->items[0])["kind"], "Node") << "list items get their kind back";
  EXPECT_EQ(CountWatches(api, false), 3) << "5 items, 2 a page";

  api.FailNext(429, 1, /*retry_after_s=*/7);
  absl::StatusOr<std::string> limited = client->Get(kNodes);
  ASSERT_TRUE(absl::IsResourceExhausted(limited.status())) << limited.status();
  EXPECT_EQ(std::string(*limited.status().GetPayload(cluster::kubernetes::kRetryAfterPayload)), "7");
  api.FailNext(409);
  EXPECT_TRUE(absl::IsAborted(client->Get(kNodes).status()));
  api.FailNext(500);
  EXPECT_TRUE(absl::IsUnavailable(client->Get(kNodes).status()));

  c.token = "wrong";
  EXPECT_TRUE(absl::IsUnauthenticated((*Client::Make(c))->Get(kNodes).status()));
  c.server = "ftp://example";
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Make(c).status()));
  c.server = "https://127.0.0.1:1";
  c.ca_pem = "not a certificate";
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Make(c).status()));
  c.ca_pem.clear();
  c.client_cert_pem = "junk";
  c.client_key_pem = "junk";
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Make(c).status()));
}

TEST(KubernetesClient, ARotatedTokenFileIsReadAgain) {
  FakeKubeApiServer api("first");
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  char tmpl[] = "/tmp/gpuaas-token-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/token") << "first\n";
  // A kubeconfig whose user reads its token from a file, as a projected service account token.
  const std::string kubeconfig = "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                                 "clusters: [{name: k, cluster: {server: '" + api.url() + "'}}]\n"
                                 "users: [{name: u, user: {tokenFile: token}}]\n"
                                 "contexts: [{name: c, context: {cluster: k, user: u}}]\n";
  absl::StatusOr<ClientConfig> c = cluster::kubernetes::ParseKubeconfig(kubeconfig, "", [dir](const std::string& p) -> absl::StatusOr<std::string> {
    std::ifstream in(dir + "/" + p);
    if (!in) return absl::NotFoundError(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  });
  ASSERT_TRUE(c.ok()) << c.status();
  std::unique_ptr<Client> client = *Client::Make(*c);
  EXPECT_TRUE(client->Get(kNodes).ok());
  // The token rotates: the server takes only the new one, and the file has it.
  api.SetToken("second");
  std::ofstream(dir + "/token") << "second\n";
  EXPECT_TRUE(absl::IsUnauthenticated(client->Get(kNodes).status())) << "still the token read a moment ago";
  EXPECT_TRUE(client->Get(kNodes).ok()) << "a 401 makes the client read the file again";
  EXPECT_EQ(client->Token(), "second");
  // A file that cannot be read keeps the last token.
  std::filesystem::remove(dir + "/token");
  api.SetToken("third");
  EXPECT_FALSE(client->Get(kNodes).ok());
  EXPECT_EQ(client->Token(), "second");
  std::filesystem::remove_all(dir);
}

TEST(KubernetesClient, AnExpiredContinueTokenListsFromTheStartOnce) {
  FakeKubeApiServer api;
  api.Start();
  for (int i = 0; i < 4; ++i) api.Put(kNodes, "Node", H200Node("n" + std::to_string(i), 8));
  ClientConfig c;
  c.server = api.url();
  std::unique_ptr<Client> client = *Client::Make(c);
  // The second page's token has expired (the list outlived the server's snapshot): the list
  // starts over and still returns every node once.
  api.FailNextPage(410);
  absl::StatusOr<cluster::kubernetes::ListResult> list = client->List(kNodes, 2);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 4u);
  EXPECT_EQ(CountWatches(api, false), 4) << "page 1, page 2 (410), page 1, page 2";
  // Twice in a row is an error, not a loop.
  api.FailNextPage(410, 2);
  EXPECT_TRUE(absl::IsOutOfRange(client->List(kNodes, 2).status()));
}

TEST(KubernetesClient, HttpsTrustsOnlyTheKubeconfigsAuthorityAndPresentsTheClientCertificate) {
  const testing::TestPki pki = testing::MakeTestPki();
  const testing::TestPki other = testing::MakeTestPki();
  FakeKubeApiServer api;  // no token: the client certificate is the credential
  api.UseTls(pki.server.cert_pem, pki.server.key_pem, /*client_ca_pem=*/pki.ca.cert_pem);
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  ClientConfig c;
  c.server = api.url();
  ASSERT_TRUE(c.server.starts_with("https://"));
  c.ca_pem = pki.ca.cert_pem;
  c.client_cert_pem = pki.client.cert_pem;
  c.client_key_pem = pki.client.key_pem;
  absl::StatusOr<cluster::kubernetes::ListResult> list = (*Client::Make(c))->List(kNodes);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 1u);

  // A server whose certificate another authority signed is not trusted...
  ClientConfig wrong_ca = c;
  wrong_ca.ca_pem = other.ca.cert_pem;
  absl::StatusOr<std::string> refused = (*Client::Make(wrong_ca))->Get(kNodes);
  ASSERT_TRUE(absl::IsUnavailable(refused.status()));
  EXPECT_NE(refused.status().message().find("not trusted"), std::string_view::npos) << refused.status();
  // ...unless the kubeconfig says to skip the check.
  wrong_ca.insecure_skip_tls_verify = true;
  EXPECT_TRUE((*Client::Make(wrong_ca))->Get(kNodes).ok());
  // The server refuses a client without a certificate its authority signed.
  ClientConfig no_cert = c;
  no_cert.client_cert_pem = other.client.cert_pem;
  no_cert.client_key_pem = other.client.key_pem;
  EXPECT_FALSE((*Client::Make(no_cert))->Get(kNodes).ok());
  no_cert.client_cert_pem.clear();
  no_cert.client_key_pem.clear();
  EXPECT_FALSE((*Client::Make(no_cert))->Get(kNodes).ok());
  // A key that is not the certificate's is refused before any request.
  ClientConfig mismatched = c;
  mismatched.client_key_pem = other.client.key_pem;
  absl::StatusOr<std::unique_ptr<Client>> bad = Client::Make(mismatched);
  ASSERT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("does not match"), std::string_view::npos) << bad.status();
}

class KubernetesDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenStore("sqlite::memory:"));
    cache_ = std::make_unique<store::ObjectCache>(*store_);
    ASSERT_TRUE(cache_->Start(controller::ControlPlaneKinds()).ok());
  }
  void TearDown() override {
    if (cp_) cp_->Stop();
    for (auto& d : drivers_) d->Stop();
    cache_->Stop();
  }
  void StartControlPlane() {
    std::map<std::string, cluster::ClusterDriver*> by_name;
    for (auto& d : drivers_) by_name[std::string(d->ClusterName())] = d.get();
    cp_ = std::make_unique<controller::ControlPlane>(*store_, *cache_, RealClock::Get(), by_name, hub_, options_);
    // Alternately before and after the control plane listens: either way the first list reaches it.
    for (size_t i = 0; i < drivers_.size(); ++i) {
      if (i % 2 == 0) drivers_[i]->Start();
    }
    cp_->Start();
    for (size_t i = 0; i < drivers_.size(); ++i) {
      if (i % 2 == 1) drivers_[i]->Start();
    }
  }
  template <typename T>
  std::vector<T> All(const std::string& cluster = "") {
    std::vector<T> out;
    EXPECT_TRUE(store_->Transact([&](store::Txn& tx) {
      auto r = store::ListObjects<T>(tx);
      if (r.ok()) {
        for (T& o : *r) {
          bool in = cluster.empty();
          if constexpr (requires { o.spec.cluster; }) in = in || o.spec.cluster == cluster;
          if (in) out.push_back(std::move(o));
        }
      }
      return r.status();
    }).ok());
    return out;
  }
  std::optional<model::Cluster> ClusterObject(const std::string& name) {
    for (model::Cluster& c : All<model::Cluster>()) {
      if (c.metadata.name == name) return c;
    }
    return std::nullopt;
  }
  bool Reachable(const std::string& name) {
    std::optional<model::Cluster> c = ClusterObject(name);
    if (!c) return false;
    const model::Condition* r = model::FindCondition(c->status.conditions, "Reachable");
    return r != nullptr && r->status == model::ConditionStatus::kTrue;
  }
  int64_t Gpus(const std::string& cluster) { return static_cast<int64_t>(All<model::GpuCapacity>(cluster).size()); }
  // Project vision and its pool train of `gpus` whole H200s in cluster lab (of `fleet` in all),
  // approved unless told otherwise; the service that made them.
  std::unique_ptr<service::PoolService> VisionPool(int64_t gpus, int64_t fleet, bool approve = true) {
    auto pools = std::make_unique<service::PoolService>(
        *store_, RealClock::Get(), [fleet] { return std::map<std::string, int64_t>{{"H200-SXM-141GB", fleet}}; });
    model::Project project;
    project.metadata.name = "vision";
    EXPECT_TRUE(pools->CreateProject(project, "ops").ok());
    model::GpuPool pool;
    pool.metadata.name = "train";
    pool.metadata.ns = "vision";
    pool.spec.cluster = "lab";
    pool.spec.items = {{"H200-SXM-141GB", "full", gpus}};
    EXPECT_TRUE(pools->CreatePool(pool, "alice").ok());
    if (approve) {
      EXPECT_TRUE(pools->Approve("vision", "train", true, "ok", "ops").ok());
    }
    return pools;
  }
  // The store's revision once the controllers are done writing (health writes its verdicts
  // after the inventory's writes): unchanged for 300 ms.
  int64_t Settled() {
    int64_t before = -1, now = store_->Revision();
    while (before != now) {
      before = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      now = store_->Revision();
    }
    return now;
  }

  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::ObjectCache> cache_;
  telemetry::Hub hub_;
  std::vector<std::unique_ptr<KubernetesDriver>> drivers_;
  controller::ControlPlaneOptions options_;
  std::unique_ptr<controller::ControlPlane> cp_;
};

TEST_F(KubernetesDriverTest, TheInventoryIsWhatTheNodesSay) {
  const json recorded = RecordedMixedNodeLabels();
  ASSERT_FALSE(recorded.is_null()) << "the recorded node labels in test/testdata/fixtures/";
  FakeKubeApiServer api("t0ken");
  api.Start();
  api.Put(kNodes, "Node", MigNode("mig-node", recorded));
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  api.Put(kNodes, "Node", CpuNode("cpu-a"));
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 9; })) << Gpus("lab");

  std::optional<model::Cluster> c = ClusterObject("lab");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->spec.driver, "kubernetes");
  EXPECT_EQ(c->status.nodes, 2) << "the CPU node is not a GPU node";
  EXPECT_EQ(c->status.gpus, 9);
  std::map<std::string, model::NodeCapacity> nodes;
  for (model::NodeCapacity& n : All<model::NodeCapacity>("lab")) nodes[n.spec.node_name] = n;
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes["h200-a"].spec.gpu_model, "H200-SXM-141GB");
  EXPECT_EQ(nodes["h200-a"].status.allocatable.at("nvidia.com/gpu"), 8);
  EXPECT_EQ(nodes["mig-node"].spec.gpu_model, "H100-SXM5-80GB");
  EXPECT_EQ(nodes["mig-node"].status.mig_enabled_gpus, 1);
  EXPECT_EQ(nodes["mig-node"].status.allocatable.at("nvidia.com/mig-1g.10gb"), 2);
  EXPECT_EQ(nodes["mig-node"].status.allocatable.at("nvidia.com/mig-3g.40gb"), 1);
  // SpecAndCount: what the device plugin advertises per profile.
  std::map<std::string, int64_t> specs;
  for (const model::SpecAndCount& s : All<model::SpecAndCount>("lab")) specs[s.spec.node + "/" + s.spec.profile] += s.status.count;
  EXPECT_EQ(specs, (std::map<std::string, int64_t>{{"lab.h200-a/full", 8},
                                                   {"lab.mig-node/1g.10gb", 2},
                                                   {"lab.mig-node/2g.20gb", 1},
                                                   {"lab.mig-node/3g.40gb", 1}}));
  EXPECT_EQ(drivers_[0]->node_stats().lists, 1);
}

TEST_F(KubernetesDriverTest, WatchedChangesReachTheInventoryWithoutListingAgain) {
  FakeKubeApiServer api("t0ken");
  api.SetBookmarkInterval(100);
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 8; }));

  api.Put(kNodes, "Node", H200Node("h200-b", 4));  // a node joins
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 12; })) << Gpus("lab");
  json cordoned = json::parse(H200Node("h200-a", 8));
  cordoned["spec"]["unschedulable"] = true;
  api.Put(kNodes, "Node", cordoned.dump());  // kubectl cordon h200-a
  ASSERT_TRUE(Eventually([&] {
    for (const model::NodeCapacity& n : All<model::NodeCapacity>("lab")) {
      if (n.spec.node_name == "h200-a") return !n.spec.schedulable;
    }
    return false;
  }));
  api.Delete(kNodes, "h200-b");  // and leaves
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 8; })) << Gpus("lab");

  // A heartbeat (status only, same GPUs) is not a change the inventory hears of.
  const int64_t revision = Settled();
  json beat = cordoned;
  beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-03T10:00:00Z";
  api.Put(kNodes, "Node", beat.dump());
  ASSERT_TRUE(Eventually([&] { return drivers_[0]->node_stats().resource_version == api.resource_version(); }));
  EXPECT_EQ(store_->Revision(), revision);

  ASSERT_TRUE(Eventually([&] { return !drivers_[0]->node_stats().resource_version.empty(); }));
  EXPECT_EQ(drivers_[0]->node_stats().lists, 1) << "every change came through the watch";
}

// A pod as the API server has it: bound to `node`, in `phase`, its container limited to `limits`.
std::string PodJson(const std::string& name, const std::string& node, const std::string& phase, const json& limits) {
  return json{{"metadata", {{"name", name}, {"namespace", "vision"}}},
              {"spec", {{"nodeName", node}, {"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}}},
              {"status", {{"phase", phase}}}}
      .dump();
}

TEST_F(KubernetesDriverTest, GpuPodsMarkTheirDevicesInUseUntilTheyFinish) {
  constexpr char kPods[] = "/api/v1/pods";
  FakeKubeApiServer api("t0ken");
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  api.Put(kNodes, "Node", MigNode("mig-node"));
  api.Put(kPods, "Pod", PodJson("train-0", "h200-a", "Running", {{"nvidia.com/gpu", "2"}, {"cpu", "8"}}));
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  auto allocated = [&](const std::string& node, const std::string& profile) {
    for (const model::SpecAndCount& s : All<model::SpecAndCount>("lab")) {
      if (s.spec.node == "lab." + node && s.spec.profile == profile) return s.status.allocated;
    }
    return int64_t{-1};
  };
  ASSERT_TRUE(Eventually([&] { return allocated("h200-a", "full") == 2; })) << allocated("h200-a", "full");
  int in_use = 0;
  for (const model::GpuCapacity& g : All<model::GpuCapacity>("lab")) in_use += g.status.allocated ? 1 : 0;
  EXPECT_EQ(in_use, 2);

  // A MIG pod takes an instance of its profile; a pending pod with no node and a CPU pod take nothing.
  api.Put(kPods, "Pod", PodJson("infer-0", "mig-node", "Running", {{"nvidia.com/mig-1g.10gb", "1"}}));
  api.Put(kPods, "Pod", PodJson("queued", "", "Pending", {{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(Eventually([&] { return allocated("mig-node", "1g.10gb") == 1; }));
  // Every running pod's CPU counts against its node's room (what the allocator avoids
  // stranding GPUs behind); a pod without GPUs takes no device.
  auto pod_cpu = [&](const std::string& node) {
    for (const model::NodeCapacity& n : All<model::NodeCapacity>("lab")) {
      if (n.metadata.name == "lab." + node) return n.status.pod_cpu_milli;
    }
    return int64_t{-1};
  };
  EXPECT_TRUE(Eventually([&] { return pod_cpu("h200-a") == 8000; })) << pod_cpu("h200-a");
  api.Put(kPods, "Pod", PodJson("web", "h200-a", "Running", {{"cpu", "1500m"}}));
  EXPECT_TRUE(Eventually([&] { return pod_cpu("h200-a") == 9500; })) << pod_cpu("h200-a");
  EXPECT_EQ(allocated("h200-a", "full"), 2);
  const int64_t revision = Settled();
  json relabelled = json::parse(PodJson("web", "h200-a", "Running", {{"cpu", "1500m"}}));
  relabelled["metadata"]["labels"] = {{"app", "web"}};
  api.Put(kPods, "Pod", relabelled.dump());
  ASSERT_TRUE(Eventually([&] { return drivers_[0]->pod_stats().resource_version == api.resource_version(); }));
  EXPECT_EQ(store_->Revision(), revision) << "a pod change that moves neither devices nor requests writes nothing";

  // Finished or deleted pods give their devices and their CPU back.
  api.Put(kPods, "Pod", PodJson("train-0", "h200-a", "Succeeded", {{"nvidia.com/gpu", "2"}}));
  api.Delete(kPods, "infer-0");
  ASSERT_TRUE(Eventually([&] { return allocated("h200-a", "full") == 0 && allocated("mig-node", "1g.10gb") == 0; }));
  EXPECT_TRUE(Eventually([&] { return pod_cpu("h200-a") == 1500; })) << pod_cpu("h200-a");
  EXPECT_EQ(pod_cpu("mig-node"), 0);
}

// The MIG manager, played by the test: takes the node's asked config (pending), then reports
// `outcome`; on success GFD relabels the node with the config's device counts.
void PlayMigManager(FakeKubeApiServer& api, const std::string& node, const std::string& outcome) {
  json n = json::parse(api.Get(kNodes, node));
  const std::string config = n["metadata"]["labels"]["nvidia.com/mig.config"];
  n["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending";
  api.Put(kNodes, "Node", n.dump());
  if (outcome == "success") {
    const json cm = json::parse(api.Get("/api/v1/namespaces/gpu-operator/configmaps", "gpuaas-mig-parted-config"));
    absl::StatusOr<std::map<int, cluster::kubernetes::GpuMigSpec>> want =
        cluster::kubernetes::ReadMigConfig(cm["data"]["config.yaml"].get<std::string>(), config, 8);
    ASSERT_TRUE(want.ok()) << want.status();
    std::map<std::string, int64_t> counts;
    for (const auto& [i, spec] : *want) {
      for (const auto& [p, c] : spec.devices) counts[p] += c;
    }
    for (const auto& [p, c] : counts) n["metadata"]["labels"]["nvidia.com/mig-" + p + ".count"] = std::to_string(c);
  }
  n["metadata"]["labels"]["nvidia.com/mig.config.state"] = outcome;
  api.Put(kNodes, "Node", n.dump());
}

TEST_F(KubernetesDriverTest, MigLayoutsGoThroughTheMigManagersConfigMapAndLabel) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  const json labels = MigReadyH200Labels();
  api.Put(kNodes, "Node", NodeJson("h200-a", labels, {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", "8"}}));
  cluster::kubernetes::DriverOptions o = FastOptions();
  o.mig_pending_timeout = std::chrono::milliseconds(4000);  // well past a loaded machine's delays
  o.mig_write_delay = std::chrono::milliseconds(500);
  ClientConfig c;
  c.server = api.url();
  c.token = "t0ken";
  drivers_.push_back(std::move(*KubernetesDriver::Make("lab", c, o)));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 8; }));

  // gpuaas wants GPUs 0 and 1 split: 3g.71gb@4 2g.35gb@0 2g.35gb@2 (H200 MIG geometry).
  auto want = [&](int index) {
    model::MigLayout l;
    l.metadata.name = ToLower(cluster::kubernetes::DerivedGpuUuid("lab", "h200-a", index));
    l.spec = {"lab", "lab.h200-a", cluster::kubernetes::DerivedGpuUuid("lab", "h200-a", index), true,
              {{"2g.35gb", 0}, {"2g.35gb", 2}, {"3g.71gb", 4}}};
    return l;
  };
  model::MigLayout first = want(0), second = want(1);
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) {
    RETURN_IF_ERROR(store::CreateObject(tx, first, RealClock::Get().Now()));
    return store::CreateObject(tx, second, RealClock::Get().Now());
  }).ok());
  ASSERT_TRUE(Eventually([&] { return api.writes().size() == 2; })) << api.writes().size();
  // Exactly one ConfigMap write and one label patch for the node, however many GPUs changed.
  const std::vector<FakeKubeApiServer::Write> w = api.writes();
  EXPECT_EQ(w[0].method, "POST");
  EXPECT_EQ(w[0].path, "/api/v1/namespaces/gpu-operator/configmaps");
  EXPECT_EQ(w[1].method, "PATCH");
  EXPECT_EQ(w[1].path, "/api/v1/nodes/h200-a");
  const std::string config = json::parse(w[1].body)["metadata"]["labels"]["nvidia.com/mig.config"];
  EXPECT_TRUE(config.starts_with("gpuaas-h200-a-")) << config;
  const json cm = json::parse(api.Get("/api/v1/namespaces/gpu-operator/configmaps", "gpuaas-mig-parted-config"));
  absl::StatusOr<std::map<int, cluster::kubernetes::GpuMigSpec>> asked =
      cluster::kubernetes::ReadMigConfig(cm["data"]["config.yaml"].get<std::string>(), config, 8);
  ASSERT_TRUE(asked.ok()) << asked.status() << cm.dump();
  const cluster::kubernetes::GpuMigSpec split{true, {{"2g.35gb", 2}, {"3g.71gb", 1}}};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(asked->at(i), i < 2 ? split : cluster::kubernetes::GpuMigSpec{}) << "GPU " << i;
  }
  EXPECT_EQ(drivers_[0]->NodeMigState("h200-a").state, "pending");

  PlayMigManager(api, "h200-a", "success");
  auto state = [&](int index) {
    for (const model::MigLayout& l : All<model::MigLayout>()) {
      if (l.metadata.name == want(index).metadata.name) return l.status.state;
    }
    return model::MigLayout::State::kPending;
  };
  ASSERT_TRUE(Eventually([&] { return state(0) == model::MigLayout::State::kApplied && state(1) == model::MigLayout::State::kApplied; }));
  for (const model::GpuCapacity& g : All<model::GpuCapacity>("lab")) {
    if (g.spec.index > 1) continue;
    EXPECT_EQ(g.status.mig_mode, model::MigMode::kEnabled);
    EXPECT_EQ(g.status.mig_instances.size(), 3u);
  }
  EXPECT_EQ(api.writes().size(), 2u) << "concluded: nothing written again";
  EXPECT_EQ(drivers_[0]->writes(), 2);

  // The MIG manager fails on the next change: surfaced on the layout, and asked again under a new
  // config name (the label must change for the manager to run again).
  model::MigLayout third = want(2);
  ASSERT_TRUE(store_->Transact([&](store::Txn& tx) { return store::CreateObject(tx, third, RealClock::Get().Now()); }).ok());
  ASSERT_TRUE(Eventually([&] { return api.writes().size() == 4; }));
  PlayMigManager(api, "h200-a", "failed");
  std::string message;
  ASSERT_TRUE(Eventually([&] {
    for (const model::MigLayout& l : All<model::MigLayout>()) {
      if (l.metadata.name == third.metadata.name && l.status.state == model::MigLayout::State::kFailed) message = l.status.message;
    }
    return !message.empty();
  }));
  EXPECT_NE(message.find("nvidia.com/mig.config.state=failed"), std::string::npos) << message;
  ASSERT_TRUE(Eventually([&] { return api.writes().size() >= 6; })) << "retried after the backoff";
  EXPECT_NE(json::parse(api.writes()[5].body)["metadata"]["labels"]["nvidia.com/mig.config"],
            json::parse(api.writes()[3].body)["metadata"]["labels"]["nvidia.com/mig.config"]);

  // A manager stuck pending (gpu-operator #2833) fails after the timeout.
  json n = json::parse(api.Get(kNodes, "h200-a"));
  n["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending";
  api.Put(kNodes, "Node", n.dump());
  EXPECT_TRUE(Eventually([&] { return drivers_[0]->NodeMigState("h200-a").state == "failed"; }));
  EXPECT_NE(drivers_[0]->NodeMigState("h200-a").message.find("has not applied"), std::string::npos);

  // A node with GPU pods is not reconfigured: the MIG manager would stop them.
  api.Put("/api/v1/pods", "Pod", PodJson("train", "h200-a", "Running", {{"nvidia.com/gpu", "1"}}));
  // Seen once the pods' version reaches the pod's (other writes may move the server's on).
  const int64_t pod_rv = std::stoll(api.resource_version());
  ASSERT_TRUE(Eventually([&] {
    const std::string rv = drivers_[0]->pod_stats().resource_version;
    return !rv.empty() && std::stoll(rv) >= pod_rv;
  }));
  // The cordon's patch is at the node's version as last watched: a write of the MIG writer not
  // yet seen makes it 409 (Aborted), which the MIG controller asks again after; so does the test.
  absl::Status refused;
  ASSERT_TRUE(Eventually([&] {
    refused = drivers_[0]->ApplyMigLayout("h200-a", cluster::kubernetes::DerivedGpuUuid("lab", "h200-a", 5), false, {});
    return !absl::IsAborted(refused);
  })) << refused;
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("vision/train"), std::string_view::npos) << refused;
}

// A MIG change on a node with GPU pods: the node is cordoned so that no new ones start, the
// change waits until they finish, and the node is given back once the MIG manager is done. A
// node an operator cordoned stays cordoned.
TEST_F(KubernetesDriverTest, ANodeWithGpuPodsIsCordonedAndChangedOnceTheyFinish) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  const json labels = MigReadyH200Labels();
  api.Put(kNodes, "Node", NodeJson("h200-a", labels, {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", "8"}}));
  json held = json::parse(NodeJson("h200-b", labels, {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", "8"}}));
  held["spec"]["unschedulable"] = true;  // an operator's cordon
  api.Put(kNodes, "Node", held.dump());
  cluster::kubernetes::DriverOptions o = FastOptions();
  o.mig_write_delay = std::chrono::milliseconds(100);
  ClientConfig c;
  c.server = api.url();
  c.token = "t0ken";
  drivers_.push_back(std::move(*KubernetesDriver::Make("lab", c, o)));
  KubernetesDriver& d = *drivers_[0];
  d.Start();
  auto synced = [&] { return d.pod_stats().resource_version == api.resource_version() || d.node_stats().resource_version == api.resource_version(); };
  api.Put("/api/v1/pods", "Pod", PodJson("train", "h200-a", "Running", {{"nvidia.com/gpu", "1"}}));
  api.Put("/api/v1/pods", "Pod", PodJson("serve", "h200-b", "Running", {{"nvidia.com/gpu", "1"}}));
  // Both listed: pods caught up says nothing of the nodes' own list.
  ASSERT_TRUE(Eventually([&] { return d.node_stats().synced && d.pod_stats().resource_version == api.resource_version(); }));
  const std::string gpu = cluster::kubernetes::DerivedGpuUuid("lab", "h200-a", 0);
  const std::vector<cluster::ObservedMigInstance> split = {{"3g.71gb", 4, 4, "", false}};

  absl::Status waiting = d.ApplyMigLayout("h200-a", gpu, true, split);
  ASSERT_TRUE(absl::IsFailedPrecondition(waiting)) << waiting;
  EXPECT_NE(waiting.message().find("vision/train"), std::string_view::npos) << waiting;
  EXPECT_NE(waiting.message().find("cordoned"), std::string_view::npos) << waiting;
  json node = json::parse(api.Get(kNodes, "h200-a"));
  EXPECT_EQ(node["spec"]["unschedulable"], true);
  EXPECT_TRUE(node["metadata"]["annotations"].contains("gpuaas.io/cordoned-for-mig"));
  ASSERT_EQ(api.writes().size(), 1u);
  ASSERT_TRUE(Eventually([&] { return synced(); }));
  EXPECT_TRUE(absl::IsFailedPrecondition(d.ApplyMigLayout("h200-a", gpu, true, split)));
  EXPECT_EQ(api.writes().size(), 1u) << "cordoned once";
  // Someone else's cordon is not ours to take or give back.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      d.ApplyMigLayout("h200-b", cluster::kubernetes::DerivedGpuUuid("lab", "h200-b", 0), true, split)));
  EXPECT_EQ(api.writes().size(), 1u);

  // The pods finish: the change goes ahead, and once the MIG manager is done the node is back.
  api.Put("/api/v1/pods", "Pod", PodJson("train", "h200-a", "Succeeded", {{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(Eventually([&] { return d.pod_stats().resource_version == api.resource_version(); }));
  ASSERT_TRUE(d.ApplyMigLayout("h200-a", gpu, true, split).ok());
  ASSERT_TRUE(Eventually([&] { return api.writes().size() == 3; })) << api.writes().size();
  EXPECT_EQ(json::parse(api.Get(kNodes, "h200-a"))["spec"]["unschedulable"], true) << "cordoned while it changes";
  PlayMigManager(api, "h200-a", "success");
  ASSERT_TRUE(Eventually([&] { return api.writes().size() == 4; })) << api.writes().size();
  node = json::parse(api.Get(kNodes, "h200-a"));
  EXPECT_FALSE(node["spec"].value("unschedulable", false)) << node.dump();
  EXPECT_FALSE(node["metadata"].contains("annotations") &&
               node["metadata"]["annotations"].contains("gpuaas.io/cordoned-for-mig"));
  EXPECT_EQ(d.NodeMigState("h200-a").state, "success");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(api.writes().size(), 4u) << "given back once";
  EXPECT_EQ(json::parse(api.Get(kNodes, "h200-b"))["spec"]["unschedulable"], true);
}

TEST_F(KubernetesDriverTest, AProjectsNamespaceQuotaIsWhatItsPoolsHold) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 8; }));
  std::unique_ptr<service::PoolService> pools = VisionPool(3, 8, /*approve=*/false);
  EXPECT_TRUE(Eventually([&] { return !api.writes().empty(); }, std::chrono::milliseconds(500)) == false)
      << "a pool not yet approved holds nothing: no namespace, no quota";
  ASSERT_TRUE(pools->Approve("vision", "train", true, "ok", "ops").ok());

  // The namespace, then its quota: 3 whole GPUs, and none of any other GPU resource.
  const std::string quotas = "/api/v1/namespaces/vision/resourcequotas";
  ASSERT_TRUE(Eventually([&] { return !api.Get(quotas, "gpuaas-pools").empty(); })) << api.writes().size();
  json q = json::parse(api.Get(quotas, "gpuaas-pools"));
  EXPECT_EQ(q["spec"]["hard"]["requests.nvidia.com/gpu"], "3");
  EXPECT_EQ(q["spec"]["hard"]["requests.nvidia.com/mig-3g.71gb"], "0");
  EXPECT_EQ(q["spec"]["hard"]["requests.nvidia.com/mig-1g.10gb"], "0");
  EXPECT_EQ(json::parse(api.Get("/api/v1/namespaces", "vision"))["metadata"]["labels"]["gpuaas.io/project"], "vision");
  std::vector<FakeKubeApiServer::Write> w = api.writes();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].path, "/api/v1/namespaces");
  EXPECT_EQ(w[1].path, quotas);

  // Released: the quota goes back to none, in one write; the namespace stays (its pods' history).
  ASSERT_TRUE(pools->Release("vision", "train", "alice").ok());
  ASSERT_TRUE(Eventually([&] {
    const std::string now = api.Get(quotas, "gpuaas-pools");
    return !now.empty() && json::parse(now)["spec"]["hard"]["requests.nvidia.com/gpu"] == "0";
  }));
  Settled();
  w = api.writes();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[2].method, "PUT");
  // Told again with nothing changed (a restart), the driver writes nothing.
  EXPECT_TRUE(drivers_[0]->EnforceProjectQuota("vision", {}).ok());
  EXPECT_EQ(api.writes().size(), 3u);
}

// A pool that holds a node whole has it labelled and tainted for itself (the node's own taints
// kept), one patch a node; released, the node is given back in one patch; nothing else writes.
TEST_F(KubernetesDriverTest, NodesAPoolHoldsWholeAreLabelledAndTaintedForIt) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  for (const std::string name : {"h200-a", "h200-b"}) {
    json node = json::parse(H200Node(name, 2));
    node["spec"]["taints"] = json::array({{{"key", "maintenance"}, {"value", "planned"}, {"effect", "PreferNoSchedule"}}});
    api.Put(kNodes, "Node", node.dump());
  }
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 4; }));
  std::unique_ptr<service::PoolService> pools = VisionPool(3, 4);

  // Three GPUs: one node whole, one GPU of the other.
  auto node_writes = [&] {
    std::vector<FakeKubeApiServer::Write> out;
    for (const FakeKubeApiServer::Write& w : api.writes()) {
      if (w.path.starts_with("/api/v1/nodes/")) out.push_back(w);
    }
    return out;
  };
  ASSERT_TRUE(Eventually([&] { return node_writes().size() == 1; })) << node_writes().size();
  Settled();
  std::vector<FakeKubeApiServer::Write> w = node_writes();
  ASSERT_EQ(w.size(), 1u);
  const std::string whole = w[0].path.substr(std::string("/api/v1/nodes/").size());
  const std::string shared = whole == "h200-a" ? "h200-b" : "h200-a";
  json node = json::parse(api.Get(kNodes, whole));
  EXPECT_EQ(node["metadata"]["labels"]["gpuaas.io/pool"], "vision.train");
  EXPECT_EQ(node["spec"]["taints"],
            json::parse(R"([{"key": "maintenance", "value": "planned", "effect": "PreferNoSchedule"},
                            {"key": "gpuaas.io/pool", "value": "vision.train", "effect": "NoSchedule"}])"));
  EXPECT_FALSE(json::parse(api.Get(kNodes, shared))["metadata"]["labels"].contains("gpuaas.io/pool"));
  EXPECT_EQ(cp_->fencing().enforced("lab"),
            (std::map<std::string, cluster::ClusterDriver::NodeOwner>{{whole, {"vision.train", 0}}}));
  // The node's label shows in its NodeCapacity.
  ASSERT_TRUE(Eventually([&] {
    for (const model::NodeCapacity& n : All<model::NodeCapacity>("lab")) {
      if (n.spec.node_name == whole) return n.metadata.labels.count("gpuaas.io/pool") > 0;
    }
    return false;
  }));

  // Released: the node is everyone's again, its own taint kept.
  ASSERT_TRUE(pools->Release("vision", "train", "alice").ok());
  ASSERT_TRUE(Eventually([&] { return node_writes().size() == 2; })) << node_writes().size();
  Settled();
  EXPECT_EQ(node_writes().size(), 2u);
  node = json::parse(api.Get(kNodes, whole));
  EXPECT_FALSE(node["metadata"]["labels"].contains("gpuaas.io/pool")) << node.dump();
  EXPECT_EQ(node["spec"]["taints"],
            json::parse(R"([{"key": "maintenance", "value": "planned", "effect": "PreferNoSchedule"}])"));
  // Told again with nothing changed, the driver writes nothing.
  EXPECT_TRUE(drivers_[0]->EnforceNodeOwners({}).ok());
  EXPECT_EQ(node_writes().size(), 2u);

  // A pool that shares its GPUs by time, holding a node whole: the device plugin's ConfigMap gets
  // a time-slicing config (written before the node points at it), the node its label.
  model::GpuPool serve;
  serve.metadata.name = "serve";
  serve.metadata.ns = "vision";
  serve.spec.cluster = "lab";
  serve.spec.items = {{"H200-SXM-141GB", "full", 4}};
  serve.spec.time_slicing_replicas = 4;
  ASSERT_TRUE(pools->CreatePool(serve, "alice").ok());
  ASSERT_TRUE(pools->Approve("vision", "serve", true, "ok", "ops").ok());
  const std::string configs = "/api/v1/namespaces/gpu-operator/configmaps";
  ASSERT_TRUE(Eventually([&] { return node_writes().size() == 4; })) << node_writes().size();
  const json cm = json::parse(api.Get(configs, "gpuaas-device-plugin-config"));
  const std::string ts = cm["data"]["gpuaas-time-slicing-4"];
  EXPECT_NE(ts.find("timeSlicing"), std::string::npos) << ts;
  EXPECT_NE(ts.find("replicas: 4"), std::string::npos) << ts;
  EXPECT_NE(ts.find("name: nvidia.com/gpu"), std::string::npos) << ts;
  std::vector<FakeKubeApiServer::Write> all = api.writes();
  size_t config_at = all.size(), first_node_at = all.size();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].path == configs && config_at == all.size()) config_at = i;
    if (all[i].path.starts_with("/api/v1/nodes/") && i > 0 && node_writes().size() > 2 && first_node_at == all.size() &&
        all[i].body.find("device-plugin.config") != std::string::npos) {
      first_node_at = i;
    }
  }
  EXPECT_LT(config_at, first_node_at) << "the config before the label that names it";
  for (const std::string n : {"h200-a", "h200-b"}) {
    node = json::parse(api.Get(kNodes, n));
    EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/device-plugin.config"], "gpuaas-time-slicing-4") << n;
    EXPECT_EQ(node["metadata"]["labels"]["gpuaas.io/pool"], "vision.serve") << n;
  }
  // Released, the nodes lose the label; the config stays for whoever else uses it.
  ASSERT_TRUE(pools->Release("vision", "serve", "alice").ok());
  ASSERT_TRUE(Eventually([&] {
    return !json::parse(api.Get(kNodes, "h200-a"))["metadata"]["labels"].contains("nvidia.com/device-plugin.config");
  }));
}

// A cluster registered while the control plane runs is followed at once, its credentials never
// shown; taken out, its driver stops and its inventory goes; it cannot be taken out while pools
// hold its devices.
TEST_F(KubernetesDriverTest, ClustersRegisteredAtRunTimeAreFollowedAndForgotten) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  auto make = [](const model::ClusterRegistration& r) -> absl::StatusOr<std::shared_ptr<cluster::ClusterDriver>> {
    cluster::kubernetes::DriverOptions o = FastOptions();
    o.region = r.spec.region;
    ASSIGN_OR_RETURN(std::unique_ptr<KubernetesDriver> d,
                     cluster::kubernetes::DriverFromKubeconfig(r.metadata.name, r.spec.kubeconfig, r.spec.context, o));
    return std::shared_ptr<cluster::ClusterDriver>(std::move(d));
  };
  options_.connect = make;
  StartControlPlane();
  service::ClusterService clusters(
      *store_, RealClock::Get(), cp_->clusters(),
      [&](const model::ClusterRegistration& r) { return make(r).status(); },
      [](const model::ClusterRegistration& r) {
        auto c = cluster::kubernetes::ParseSelfContainedKubeconfig(r.spec.kubeconfig, r.spec.context);
        return service::ClusterService::Endpoint{c->server, c->context};
      });
  ClientConfig c;
  c.context = "lab-admin";
  c.server = api.url();
  c.token = "t0ken";
  model::ClusterRegistration reg;
  reg.metadata.name = "lab";
  reg.spec.kubeconfig = cluster::kubernetes::SelfContainedKubeconfig(c);
  reg.spec.region = "kr-central";

  // Refused, and nothing stored: a kubeconfig that names a file, one that is not one, a bad name.
  model::ClusterRegistration bad = reg;
  bad.spec.kubeconfig = "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: x\n  cluster:\n"
                        "    server: https://10.0.0.1\n    certificate-authority: /etc/ca.crt\n"
                        "contexts:\n- name: x\n  context:\n    cluster: x\n";
  absl::StatusOr<model::ClusterRegistration> refused = clusters.Register(bad, "ops");
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("/etc/ca.crt"), std::string_view::npos) << refused.status();
  bad.spec.kubeconfig = "{not: [yaml";
  EXPECT_TRUE(absl::IsInvalidArgument(clusters.Register(bad, "ops").status()));
  bad = reg;
  bad.metadata.name = "Lab_1";
  EXPECT_TRUE(absl::IsInvalidArgument(clusters.Register(bad, "ops").status()));
  EXPECT_TRUE(All<model::ClusterRegistration>().empty());

  const int64_t before = store_->Revision();
  absl::StatusOr<model::ClusterRegistration> made = clusters.Register(reg, "ops");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->spec.kubeconfig.empty()) << "the credentials are not handed back";
  EXPECT_GT(store_->Revision(), before);
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 8 && Reachable("lab"); })) << Gpus("lab");
  EXPECT_EQ(ClusterObject("lab")->spec.region, "kr-central");
  EXPECT_TRUE(absl::IsAlreadyExists(clusters.Register(reg, "ops").status()));
  absl::StatusOr<std::vector<service::ClusterEntry>> listed = clusters.List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].source, "registered");
  EXPECT_TRUE((*listed)[0].connected);
  EXPECT_EQ((*listed)[0].server, api.url());
  EXPECT_EQ((*listed)[0].context, "lab-admin");
  EXPECT_EQ((*listed)[0].registered_by, "ops");

  // Pools holding its devices keep it.
  std::unique_ptr<service::PoolService> pools = VisionPool(2, 8);
  ASSERT_TRUE(Eventually([&] { return !api.Get("/api/v1/namespaces/vision/resourcequotas", "gpuaas-pools").empty(); }))
      << "the registered cluster enforces the pool's quota";
  absl::Status kept = clusters.Unregister("lab", "ops");
  ASSERT_TRUE(absl::IsFailedPrecondition(kept)) << kept;
  EXPECT_NE(kept.message().find("vision/train"), std::string_view::npos) << kept;
  ASSERT_TRUE(pools->Release("vision", "train", "alice").ok());
  ASSERT_TRUE(Eventually([&] { return clusters.Unregister("lab", "ops").ok(); }));

  // Gone: the inventory of the cluster is deleted and nobody asks its API server anything more.
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 0 && !ClusterObject("lab"); })) << Gpus("lab");
  EXPECT_TRUE(All<model::NodeCapacity>("lab").empty());
  EXPECT_TRUE(All<model::SpecAndCount>("lab").empty());
  EXPECT_EQ(cp_->clusters().size(), 0u);
  Settled();
  const size_t requests = api.requests().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(api.requests().size(), requests) << "the driver of a removed cluster stopped";
  EXPECT_TRUE(absl::IsNotFound(clusters.Unregister("lab", "ops")));

  // Registered again under the same name: followed again.
  ASSERT_TRUE(clusters.Register(reg, "ops").ok());
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 8; })) << Gpus("lab");
}

// A ResourceSlice of NVIDIA's DRA driver (resource.k8s.io/v1) in the shape the driver publishes
// (dra-driver-nvidia-gpu #719 shows one from AKS): typed attributes, capacity quantities, MIG
// devices with their memory slices.
json SliceDevice(const std::string& name, const std::string& type, const std::string& uuid,
                 const std::string& parent = "", const std::string& profile = "", int start = 0, int size = 0) {
  json d = {{"name", name},
            {"attributes",
             {{"type", {{"string", type}}},
              {"uuid", {{"string", uuid}}},
              {"productName", {{"string", "NVIDIA H200"}}},
              {"architecture", {{"string", "Hopper"}}},
              {"driverVersion", {{"version", "580.95.5"}}},
              {"cudaComputeCapability", {{"version", "9.0.0"}}}}},
            {"capacity", {{"memory", {{"value", type == "gpu" ? "143771Mi" : "35Gi"}}}}}};
  if (type == "mig") {
    d["attributes"]["parentUUID"] = {{"string", parent}};
    d["attributes"]["profile"] = {{"string", profile}};
    for (int i = start; i < start + size; ++i) d["capacity"]["memorySlice" + std::to_string(i)] = {{"value", "1"}};
  }
  return d;
}

std::string Slice(const std::string& name, const std::string& node, int64_t generation, int64_t count,
                  const json& devices, const std::string& driver = "gpu.nvidia.com") {
  return json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceSlice"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"driver", driver},
                {"nodeName", node},
                {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", count}}},
                {"devices", devices}}}}
      .dump();
}

// A node of `gpus` H200s (GFD labels) whose DRA pool names them by `uuids` (gpu-0, gpu-1, ...).
void PutDraNode(FakeKubeApiServer& api, const std::string& node, const std::vector<std::string>& uuids) {
  api.Put(kNodes, "Node", H200Node(node, static_cast<int>(uuids.size())));
  json devices = json::array();
  for (size_t i = 0; i < uuids.size(); ++i) devices.push_back(SliceDevice("gpu-" + std::to_string(i), "gpu", uuids[i]));
  api.Put(FakeKubeApiServer::kResourceSlicesPath.data(), "ResourceSlice", Slice(node + "-gpu.nvidia.com-x", node, 1, 1, devices));
}

// deploy/server.yaml's RBAC, read as the API server would apply it, against every request the
// driver makes while it lists, watches, changes MIG layouts and fences a project: each is allowed,
// and no rule is left that no request needed (least privilege).
struct RbacRule {
  std::string ns;  // empty: a ClusterRole's rule
  std::set<std::string> groups, resources, verbs, names;
};

std::vector<RbacRule> DeployedRbac() {
  std::vector<RbacRule> rules;
  for (const YAML::Node& doc : YAML::LoadAllFromFile("deploy/server.yaml")) {
    const std::string kind = doc["kind"].as<std::string>();
    if (kind != "ClusterRole" && kind != "Role") continue;
    for (const YAML::Node& r : doc["rules"]) {
      RbacRule rule;
      if (kind == "Role") rule.ns = doc["metadata"]["namespace"].as<std::string>();
      for (const YAML::Node& x : r["apiGroups"]) rule.groups.insert(x.as<std::string>());
      for (const YAML::Node& x : r["resources"]) rule.resources.insert(x.as<std::string>());
      for (const YAML::Node& x : r["verbs"]) rule.verbs.insert(x.as<std::string>());
      if (r["resourceNames"]) {
        for (const YAML::Node& x : r["resourceNames"]) rule.names.insert(x.as<std::string>());
      }
      rules.push_back(std::move(rule));
    }
  }
  return rules;
}

// The RBAC attributes of a request: API group, namespace, resource, name, verb.
std::array<std::string, 5> RbacAttributes(const FakeKubeApiServer::Request& r) {
  std::string path = r.path.substr(0, r.path.find('?'));
  std::string group;
  size_t prefix = std::string("/api/v1/").size();
  if (path.starts_with("/apis/")) {  // /apis/GROUP/VERSION/...
    const size_t g = path.find('/', 6);
    group = path.substr(6, g - 6);
    prefix = path.find('/', g + 1) + 1;
  }
  std::vector<std::string> parts;
  for (size_t at = prefix; at <= path.size();) {
    const size_t slash = path.find('/', at);
    parts.push_back(path.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    at = slash == std::string::npos ? path.size() + 1 : slash + 1;
  }
  std::string ns;
  if (parts.size() >= 3 && parts[0] == "namespaces") {
    ns = parts[1];
    parts.erase(parts.begin(), parts.begin() + 2);
  }
  const std::string resource = parts[0], name = parts.size() > 1 ? parts[1] : "";
  std::string verb;
  if (r.method == "GET") verb = r.watch ? "watch" : (name.empty() ? "list" : "get");
  if (r.method == "POST") verb = "create";
  if (r.method == "PUT") verb = "update";
  if (r.method == "PATCH") verb = "patch";
  if (r.method == "DELETE") verb = "delete";
  return {group, ns, resource, name, verb};
}

TEST_F(KubernetesDriverTest, TheDeployedRbacAllowsEveryRequestTheDriverMakes) {
  FakeKubeApiServer api("t0ken");
  api.ServeDra(true);
  api.Start();
  const json labels = MigReadyH200Labels();
  api.Put(kNodes, "Node", NodeJson("h200-a", labels, {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", "8"}}));
  cluster::kubernetes::DriverOptions o = FastOptions();
  o.mig_write_delay = std::chrono::milliseconds(100);
  ClientConfig c;
  c.server = api.url();
  c.token = "t0ken";
  drivers_.push_back(std::move(*KubernetesDriver::Make("lab", c, o)));
  drivers_[0]->Start();
  ASSERT_TRUE(Eventually([&] { return drivers_[0]->Observe().ok(); }));
  const std::string gpu = cluster::kubernetes::DerivedGpuUuid("lab", "h200-a", 0);
  // The MIG config twice (created, then updated), the node's label, a project fenced twice.
  ASSERT_TRUE(drivers_[0]->ApplyMigLayout("h200-a", gpu, true, {{"3g.71gb", 4, 4, "", false}}).ok());
  ASSERT_TRUE(Eventually([&] { return api.writes().size() == 2; }));
  PlayMigManager(api, "h200-a", "success");
  ASSERT_TRUE(Eventually([&] { return drivers_[0]->NodeMigState("h200-a").state == "success"; }));
  ASSERT_TRUE(drivers_[0]->ApplyMigLayout("h200-a", gpu, false, {}).ok());
  ASSERT_TRUE(Eventually([&] { return api.writes().size() == 4; }));
  ASSERT_TRUE(drivers_[0]->EnforceProjectQuota("vision", {{"nvidia.com/gpu", 2}}).ok());
  ASSERT_TRUE(drivers_[0]->EnforceProjectQuota("vision", {}).ok());
  // A DRA device tainted for a project, then given back.
  const std::string dra_gpu = "GPU-0a000000-0000-0000-0000-0000000000aa";
  api.Put(FakeKubeApiServer::kResourceSlicesPath.data(), "ResourceSlice",
          Slice("h200-a-gpu.nvidia.com-x", "h200-a", 1, 1, json::array({SliceDevice("gpu-0", "gpu", dra_gpu)})));
  ASSERT_TRUE(Eventually([&] { return drivers_[0]->slice_stats().resource_version == api.resource_version(); }));
  ASSERT_TRUE(drivers_[0]->EnforceProjectDevices("vision", {dra_gpu}).ok());
  ASSERT_TRUE(drivers_[0]->EnforceProjectDevices("vision", {}).ok());
  // A borrower's pod told of a reclaim, then removed.
  api.Put("/api/v1/pods", "Pod", PodJson("borrower-0", "h200-a", "Running", {{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(drivers_[0]->TellPodsOfReclaim({"vision/borrower-0"}, RealClock::Get().Now()).ok());
  ASSERT_TRUE(drivers_[0]->RemovePods({"vision/borrower-0"}).ok());
  EXPECT_TRUE(api.Get("/api/v1/pods", "borrower-0").empty());

  // Every manifest parses, and each object is named.
  for (const auto& f : std::filesystem::directory_iterator("deploy")) {
    if (f.path().extension() != ".yaml") continue;
    for (const YAML::Node& doc : YAML::LoadAllFromFile(f.path().string())) {
      EXPECT_TRUE(doc["apiVersion"] && doc["kind"] && doc["metadata"]["name"]) << f.path();
    }
  }
  const std::vector<RbacRule> rules = DeployedRbac();
  ASSERT_FALSE(rules.empty()) << "deploy/server.yaml has no RBAC rules";
  std::set<std::string> seen;
  for (const FakeKubeApiServer::Request& r : api.requests()) {
    const auto [group, ns, resource, name, verb] = RbacAttributes(r);
    bool allowed = false;
    for (size_t i = 0; i < rules.size(); ++i) {
      const RbacRule& rule = rules[i];
      if ((rule.ns.empty() || rule.ns == ns) && rule.groups.contains(group) && rule.resources.contains(resource) &&
          rule.verbs.contains(verb) &&
          (rule.names.empty() || rule.names.contains(name))) {
        allowed = true;
      }
    }
    seen.insert(verb + " " + resource);
    EXPECT_TRUE(allowed) << r.method << " " << r.path << " (" << verb << " " << resource << " in \"" << ns
                         << "\") is not allowed by deploy/server.yaml";
  }
  for (size_t i = 0; i < rules.size(); ++i) {
    for (const std::string& verb : rules[i].verbs) {
      for (const std::string& resource : rules[i].resources) {
        EXPECT_TRUE(seen.contains(verb + " " + resource))
            << "deploy/server.yaml grants " << verb << " " << resource << ", which the driver never asks for";
      }
    }
  }
  EXPECT_TRUE(seen.contains("update configmaps") && seen.contains("patch nodes") && seen.contains("create namespaces"))
      << "the scenario must exercise every kind of write";
}


TEST(ResourceSlices, TheDevicesOfCompletePoolsEachGpuOnce) {
  const std::string g0 = "GPU-ddf64803-f421-0e5b-883e-cd752de16db7", g1 = "GPU-13719f71-412c-d11e-b236-a262f530a4fc";
  // gpu-0 is advertised whole beside its own MIG devices (#719): one GPU in MIG mode.
  const json devices = {SliceDevice("gpu-1", "gpu", g1), SliceDevice("gpu-0", "gpu", g0),
                        SliceDevice("gpu-0-mig-9-4-4", "mig", "MIG-a", g0, "3g.71gb", 4, 4),
                        SliceDevice("gpu-0-mig-14-0-2", "mig", "MIG-b", g0, "2g.35gb", 0, 2)};
  std::vector<cluster::kubernetes::ResourceSlice> slices;
  for (const std::string& text :
       {Slice("n1-a", "n1", 1, 1, devices),
        // A pool of two slices of which one is seen: incomplete, not read.
        Slice("n2-a", "n2", 3, 2, json::array({SliceDevice("gpu-0", "gpu", "GPU-x")})),
        // Another driver's devices, and an older generation of n1's pool: not read.
        Slice("nic", "n1", 1, 1, json::array({SliceDevice("nic-0", "gpu", "GPU-nic")}), "rdma.example.com"),
        Slice("n1-old", "n1", 0, 1, json::array({SliceDevice("gpu-5", "gpu", "GPU-old")}))}) {
    absl::StatusOr<cluster::kubernetes::ResourceSlice> s = cluster::kubernetes::ReadResourceSlice(text);
    ASSERT_TRUE(s.ok()) << s.status();
    slices.push_back(*s);
  }
  EXPECT_EQ(slices[0].devices[2].start, 4);
  EXPECT_EQ(slices[0].devices[2].size, 4);
  EXPECT_EQ(slices[0].devices[1].memory_bytes, int64_t{143771} << 20);
  const auto gpus = cluster::kubernetes::GpusFromSlices(slices);
  ASSERT_EQ(gpus.size(), 1u) << "n2's pool is incomplete";
  const std::vector<cluster::ObservedGpu>& n1 = gpus.at("n1");
  ASSERT_EQ(n1.size(), 2u) << "a GPU beside its MIG devices is one GPU";
  EXPECT_EQ(n1[0].uuid, g0);
  EXPECT_EQ(n1[0].index, 0);
  EXPECT_TRUE(n1[0].mig_enabled);
  ASSERT_EQ(n1[0].mig_instances.size(), 2u);
  EXPECT_EQ(n1[0].mig_instances[0], (cluster::ObservedMigInstance{"2g.35gb", 0, 2, "MIG-b", false}));
  EXPECT_EQ(n1[0].mig_instances[1], (cluster::ObservedMigInstance{"3g.71gb", 4, 4, "MIG-a", false}));
  EXPECT_EQ(n1[1].uuid, g1);
  EXPECT_FALSE(n1[1].mig_enabled);
  EXPECT_EQ(n1[1].memory_mib, 143771);
  // Attributes qualified with the driver's name read the same.
  json qualified = SliceDevice("gpu-0", "gpu", g0);
  qualified["attributes"] = {{"gpu.nvidia.com/type", {{"string", "gpu"}}}, {"gpu.nvidia.com/uuid", {{"string", g0}}}};
  absl::StatusOr<cluster::kubernetes::ResourceSlice> q =
      cluster::kubernetes::ReadResourceSlice(Slice("q", "n3", 1, 1, json::array({qualified})));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(cluster::kubernetes::GpusFromSlices({*q}).at("n3")[0].uuid, g0);
  EXPECT_FALSE(cluster::kubernetes::ReadResourceSlice(R"({"spec": {"driver": "gpu.nvidia.com"}})").ok())
      << "no pool";
  EXPECT_FALSE(cluster::kubernetes::ReadResourceSlice("[]").ok());
}

// Where the API server serves ResourceSlices, the inventory's GPUs carry the DRA driver's UUIDs
// and MIG placements; where it does not (404), labels alone, as before.
TEST_F(KubernetesDriverTest, ResourceSlicesNameTheGpusWhereTheDraDriverRuns) {
  FakeKubeApiServer api("t0ken");
  api.ServeDra(true);
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 2));
  api.Put(kNodes, "Node", H200Node("h200-b", 2));
  const std::string g0 = "GPU-0a000000-0000-0000-0000-000000000000", g1 = "GPU-0a000000-0000-0000-0000-000000000001";
  api.Put(FakeKubeApiServer::kResourceSlicesPath.data(), "ResourceSlice",
          Slice("h200-a-gpu.nvidia.com-x", "h200-a", 1, 1,
                {SliceDevice("gpu-0", "gpu", g0), SliceDevice("gpu-0-mig-9-4-4", "mig", "MIG-3g", g0, "3g.71gb", 4, 4),
                 SliceDevice("gpu-0-mig-14-0-2", "mig", "MIG-2g", g0, "2g.35gb", 0, 2), SliceDevice("gpu-1", "gpu", g1)}));
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 4; })) << Gpus("lab");
  std::map<std::string, model::GpuCapacity> by_uuid;
  for (model::GpuCapacity& g : All<model::GpuCapacity>("lab")) by_uuid[g.spec.uuid] = g;
  ASSERT_TRUE(by_uuid.contains(g0) && by_uuid.contains(g1)) << "h200-a's GPUs are the slices' UUIDs";
  const model::GpuCapacity& mig = by_uuid.at(g0);
  EXPECT_EQ(mig.status.mig_mode, model::MigMode::kEnabled);
  ASSERT_EQ(mig.status.mig_instances.size(), 2u);
  EXPECT_EQ(mig.status.mig_instances[0].uuid, "MIG-2g");
  EXPECT_EQ(mig.status.mig_instances[1].start, 4);
  EXPECT_TRUE(by_uuid.contains(cluster::kubernetes::DerivedGpuUuid("lab", "h200-b", 0)))
      << "h200-b has no slices: its GPUs come from its labels";

  // The DRA driver republishes: a new generation in two slices; until both are seen the pool
  // is incomplete and the node's GPUs come from its labels, never from half a pool.
  api.Put(FakeKubeApiServer::kResourceSlicesPath.data(), "ResourceSlice",
          Slice("h200-a-gpu.nvidia.com-x", "h200-a", 2, 2, json::array({SliceDevice("gpu-0", "gpu", g0)})));
  ASSERT_TRUE(Eventually([&] { return !by_uuid.empty() && All<model::GpuCapacity>("lab").size() == 4 &&
                                      [&] {
                                        for (const auto& g : All<model::GpuCapacity>("lab")) {
                                          if (g.spec.uuid == g0) return false;
                                        }
                                        return true;
                                      }(); }));
  api.Put(FakeKubeApiServer::kResourceSlicesPath.data(), "ResourceSlice",
          Slice("h200-a-gpu.nvidia.com-y", "h200-a", 2, 2, json::array({SliceDevice("gpu-1", "gpu", g1)})));
  ASSERT_TRUE(Eventually([&] {
    std::set<std::string> uuids;
    for (const auto& g : All<model::GpuCapacity>("lab")) uuids.insert(g.spec.uuid);
    return uuids.contains(g0) && uuids.contains(g1) && uuids.size() == 4;
  })) << [&] {
    std::string out;
    for (const auto& g : All<model::GpuCapacity>("lab")) out += g.spec.uuid + " ";
    return out;
  }();
  EXPECT_TRUE(drivers_[0]->slice_stats().synced);
  EXPECT_EQ(drivers_[0]->slice_stats().lists, 1);

  // A node without GFD labels whose GPUs the DRA driver publishes is a GPU node all the same,
  // its model from the slices' productName; it goes when its slices go.
  api.Put(kNodes, "Node", CpuNode("dra-only"));
  const std::string g9 = "GPU-0a000000-0000-0000-0000-000000000009";
  api.Put(FakeKubeApiServer::kResourceSlicesPath.data(), "ResourceSlice",
          Slice("dra-only-gpu.nvidia.com-x", "dra-only", 1, 1, json::array({SliceDevice("gpu-0", "gpu", g9)})));
  auto dra_only = [&] {
    std::vector<model::GpuCapacity> out;
    for (model::GpuCapacity& g : All<model::GpuCapacity>("lab")) {
      if (g.spec.node == "lab.dra-only") out.push_back(std::move(g));
    }
    return out;
  };
  ASSERT_TRUE(Eventually([&] { return dra_only().size() == 1; }));
  EXPECT_EQ(dra_only()[0].spec.uuid, g9);
  EXPECT_EQ(dra_only()[0].spec.model, "H200-SXM-141GB");
  EXPECT_EQ(dra_only()[0].spec.memory_mib, 143771);
  api.Delete(FakeKubeApiServer::kResourceSlicesPath.data(), "dra-only-gpu.nvidia.com-x");
  ASSERT_TRUE(Eventually([&] { return dra_only().empty(); }));
}

// A project's GPU pod is a run of the pool holding its devices: a Profile in the project's
// namespace naming the pod and its devices, from when it was seen, ended when the pod finishes.
// Where the API server does not say which devices a pod holds, the project's own come first; a
// pod whose DRA claim was allocated a device holds exactly that one.
TEST_F(KubernetesDriverTest, GpuPodsAreRunsOfThePoolsHoldingTheirDevices) {
  constexpr char kPods[] = "/api/v1/pods";
  FakeKubeApiServer api("t0ken");
  api.ServeDra(true);
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  const std::string g0 = "GPU-0d000000-0000-0000-0000-000000000000", g1 = "GPU-0d000000-0000-0000-0000-000000000001";
  PutDraNode(api, "h200-d", {g0, g1});
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 10; })) << Gpus("lab");
  // Another project's pod first, on GPUs no pool holds: it makes no run.
  api.Put(kPods, "Pod",
          json{{"metadata", {{"name", "stray"}, {"namespace", "web"}}},
               {"spec", {{"nodeName", "h200-a"}, {"containers", {{{"name", "m"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
               {"status", {{"phase", "Running"}}}}
              .dump());
  auto pods_on = [&](const std::string& uuid) {
    for (const model::GpuCapacity& g : All<model::GpuCapacity>("lab")) {
      if (g.spec.uuid == uuid) return g.status.pods;
    }
    return std::vector<std::string>{};
  };
  ASSERT_TRUE(Eventually([&] { return pods_on(cluster::kubernetes::DerivedGpuUuid("lab", "h200-a", 0)) ==
                                      std::vector<std::string>{"web/stray"}; }));
  std::unique_ptr<service::PoolService> pools = VisionPool(3, 10);
  std::set<std::string> pooled;
  ASSERT_TRUE(Eventually([&] {
    pooled.clear();
    for (const model::GpuPool& p : All<model::GpuPool>()) {
      for (const model::AllocatedDevice& d : p.status.allocation) pooled.insert(d.gpu_uuid);
    }
    return pooled.size() == 3;
  }));
  api.Put(kPods, "Pod", PodJson("train-0", "h200-a", "Running", {{"nvidia.com/gpu", "2"}}));
  auto runs = [&] {
    std::vector<model::Profile> out;
    for (model::Profile& p : All<model::Profile>()) {
      if (p.metadata.labels.contains("gpuaas.io/cluster")) out.push_back(std::move(p));
    }
    return out;
  };
  ASSERT_TRUE(Eventually([&] { return runs().size() == 1; })) << runs().size();
  model::Profile run = runs()[0];
  EXPECT_EQ(run.metadata.ns, "vision");
  EXPECT_EQ(run.spec.pod, "vision/train-0");
  EXPECT_EQ(run.spec.pool, "train");
  EXPECT_EQ(run.metadata.labels.at("gpuaas.io/cluster"), "lab");
  EXPECT_FALSE(run.spec.end);
  ASSERT_EQ(run.spec.devices.size(), 2u);
  for (const model::WorkloadDevice& d : run.spec.devices) {
    EXPECT_TRUE(pooled.contains(d.gpu_uuid)) << d.gpu_uuid << " is not the pool's";
    EXPECT_TRUE(d.instance_uuid.empty());
  }
  // The GPUs name their pods.
  std::map<std::string, std::vector<std::string>> holders;
  for (const model::GpuCapacity& g : All<model::GpuCapacity>("lab")) {
    if (!g.status.pods.empty()) holders[g.spec.uuid] = g.status.pods;
  }
  EXPECT_EQ(holders.size(), 3u) << "train-0's two and stray's one";
  EXPECT_EQ(drivers_[0]->writes(), 2) << "the namespace and its quota, nothing for the runs";

  // A DRA claim allocated gpu-1 of h200-d: the pod holds exactly that GPU.
  api.Put(FakeKubeApiServer::kResourceClaimsPath.data(), "ResourceClaim",
          json{{"apiVersion", "resource.k8s.io/v1"},
               {"kind", "ResourceClaim"},
               {"metadata", {{"name", "claimer-gpu-x7k2p"}, {"namespace", "vision"}}},
               {"status",
                {{"allocation",
                  {{"devices",
                    {{"results", json::array({{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "h200-d"},
                                               {"device", "gpu-1"}}})}}}}}}}}
              .dump());
  api.Put(kPods, "Pod",
          json{{"metadata", {{"name", "claimer"}, {"namespace", "vision"}}},
               {"spec", {{"nodeName", "h200-d"}, {"containers", json::array({{{"name", "m"}}})}}},
               {"status",
                {{"phase", "Running"},
                 {"resourceClaimStatuses", json::array({{{"name", "gpu"}, {"resourceClaimName", "claimer-gpu-x7k2p"}}})}}}}
              .dump());
  ASSERT_TRUE(Eventually([&] { return pods_on(g1) == std::vector<std::string>{"vision/claimer"}; }));
  EXPECT_TRUE(pods_on(g0).empty()) << "the claim names gpu-1, not the first free GPU";

  // Finished: the run ends (and is kept); the pod's GPUs are free again.
  api.Put(kPods, "Pod", PodJson("train-0", "h200-a", "Succeeded", {{"nvidia.com/gpu", "2"}}));
  ASSERT_TRUE(Eventually([&] {
    const std::vector<model::Profile> r = runs();
    return r.size() == 1 && r[0].spec.end.has_value();
  }));
  EXPECT_GE(*runs()[0].spec.end, run.spec.start);
  EXPECT_EQ(cp_->pod_runs().stats().started, 1);
  EXPECT_EQ(cp_->pod_runs().stats().ended, 1);
  EXPECT_EQ(cp_->pod_runs().stats().unpooled, 2) << "stray, and claimer on a GPU no pool holds";

  // A pod of another project on a device of vision's pool is not vision's run.
  model::GpuCapacity g;
  g.spec = {"lab", "lab.h200-a", "GPU-p", 0, "H200-SXM-141GB", "NVIDIA-H200", 1, false};
  g.status.pods = {"web/intruder"};
  model::GpuPool p;
  p.metadata.ns = "vision";
  p.metadata.name = "train";
  p.status.allocation = {{"lab", "lab.h200-a", "GPU-p", "full", 0, ""}};
  std::vector<std::string> unpooled;
  EXPECT_TRUE(controller::PodRuns({&g}, {&p}, &unpooled).empty());
  EXPECT_EQ(unpooled, std::vector<std::string>{"web/intruder"});
  g.status.pods = {"vision/mine"};
  ASSERT_EQ(controller::PodRuns({&g}, {&p}, nullptr).size(), 1u);
}

// What the scheduler does with a claim, as KEP-5055 says for taints, enough for these tests: a
// request gets the first device of the pool that its CEL selectors allow (the tests' selectors
// name UUIDs) and no DeviceTaintRule keeps from it (a NoSchedule taint it does not tolerate),
// and that no other claim holds. The device's name, or "" when the claim stays unallocated.
std::string Allocate(const json& claim, const std::vector<std::pair<std::string, std::string>>& devices,
                     const json& rules, std::set<std::string>& taken) {
  const json& ask = claim["spec"]["devices"]["requests"][0]["exactly"];
  std::set<std::string> allowed;  // the UUIDs the selectors name; empty: any
  for (const json& sel : ask.value("selectors", json::array())) {
    const std::regex quoted(R"re("((?:GPU|MIG)-[^"]+)")re");
    const std::string expr = sel["cel"]["expression"];
    for (auto m = std::sregex_iterator(expr.begin(), expr.end(), quoted); m != std::sregex_iterator(); ++m) {
      allowed.insert((*m)[1].str());
    }
  }
  for (const auto& [name, uuid] : devices) {
    if (taken.contains(name) || (!allowed.empty() && !allowed.contains(uuid))) continue;
    bool kept_off = false;
    for (const json& rule : rules["items"]) {
      if (rule["spec"]["deviceSelector"]["device"] != name) continue;
      const json& taint = rule["spec"]["taint"];
      bool tolerated = false;
      for (const json& t : ask.value("tolerations", json::array())) {
        const std::string op = t.value("operator", "Equal");
        const bool key = t.value("key", "") == taint["key"] || (t.value("key", "").empty() && op == "Exists");
        const bool value = op == "Exists" || t.value("value", "") == taint["value"];
        const bool effect = t.value("effect", "").empty() || t.value("effect", "") == taint["effect"];
        tolerated = tolerated || (key && value && effect);
      }
      kept_off = kept_off || (taint["effect"] == "NoSchedule" && !tolerated);
    }
    if (kept_off) continue;
    taken.insert(name);
    return name;
  }
  return "";
}

json ClaimReview(const std::string& ns, const json& exactly) {
  const json claim = {{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaim"},
                      {"metadata", {{"name", "c"}, {"namespace", ns}}},
                      {"spec", {{"devices", {{"requests", json::array({{{"name", "gpu"}, {"exactly", exactly}}})}}}}}};
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request", {{"uid", "u"}, {"namespace", ns}, {"operation", "CREATE"}, {"object", claim}}}};
}

// A pool's DRA devices are tainted for its project, one DeviceTaintRule a device; the webhook
// gives the project's claims the toleration and a selector of its devices, and refuses claims
// that tolerate another project's taint. With the scheduler's taint rules played by the test,
// the project's claims get its devices only, and another namespace's claim naming one of them
// stays unallocated.
TEST_F(KubernetesDriverTest, APoolsDraDevicesAreTaintedForItsProjectOnly) {
  FakeKubeApiServer api("t0ken");
  api.ServeDra(true);
  api.Start();
  const std::string g0 = "GPU-0d000000-0000-0000-0000-000000000000", g1 = "GPU-0d000000-0000-0000-0000-000000000001";
  PutDraNode(api, "h200-d", {g0, g1});
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 2; }));
  std::unique_ptr<service::PoolService> pools = VisionPool(1, 2);
  const std::string rules_path(FakeKubeApiServer::kDeviceTaintRulesPath);
  auto rules = [&] {
    json out = {{"items", json::array()}};
    for (const std::string& name : {std::string("gpuaas.vision.h200-d.gpu-0"), std::string("gpuaas.vision.h200-d.gpu-1")}) {
      if (const std::string r = api.Get(rules_path, name); !r.empty()) out["items"].push_back(json::parse(r));
    }
    return out;
  };
  ASSERT_TRUE(Eventually([&] { return rules()["items"].size() == 1; })) << rules().dump();
  std::vector<model::GpuPool> stored = All<model::GpuPool>();
  ASSERT_EQ(stored.size(), 1u);
  ASSERT_EQ(stored[0].status.allocation.size(), 1u);
  const std::string held = stored[0].status.allocation[0].gpu_uuid;
  const std::string held_name = held == g0 ? "gpu-0" : "gpu-1", free_name = held == g0 ? "gpu-1" : "gpu-0";
  const json rule = rules()["items"][0];
  EXPECT_EQ(rule["spec"]["deviceSelector"], (json{{"driver", "gpu.nvidia.com"}, {"pool", "h200-d"}, {"device", held_name}}));
  EXPECT_EQ(rule["spec"]["taint"], (json{{"key", "gpuaas.io/project"}, {"value", "vision"}, {"effect", "NoSchedule"}}));
  const std::vector<std::pair<std::string, std::string>> devices = {{"gpu-0", g0}, {"gpu-1", g1}};

  // vision's claim, as the mutating webhook leaves it, gets the pool's GPU, and passes validation.
  absl::StatusOr<std::string> mutated =
      ReviewClaim(ClaimReview("vision", {{"deviceClassName", "gpu.nvidia.com"}}).dump(), "lab", PoolsFrom(stored), AdmissionMode::kMutate);
  ASSERT_TRUE(mutated.ok()) << mutated.status();
  const json answer = json::parse(*mutated);
  ASSERT_TRUE(answer["response"]["allowed"].get<bool>()) << *mutated;
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch));
  json review = ClaimReview("vision", {{"deviceClassName", "gpu.nvidia.com"}});
  review["request"]["object"] = review["request"]["object"].patch(json::parse(patch));
  const json& exactly = review["request"]["object"]["spec"]["devices"]["requests"][0]["exactly"];
  EXPECT_EQ(exactly["selectors"][0]["cel"]["expression"], UuidSelector({held}));
  EXPECT_EQ(exactly["tolerations"][0]["value"], "vision");
  const json validated = json::parse(*ReviewClaim(review.dump(), "lab", PoolsFrom(stored), AdmissionMode::kValidate));
  EXPECT_TRUE(validated["response"]["allowed"].get<bool>()) << validated.dump();
  std::set<std::string> taken;
  EXPECT_EQ(Allocate(review["request"]["object"], devices, rules(), taken), held_name);

  // Another namespace's claim naming the pool's GPU stays unallocated; one naming none gets the free GPU.
  const json named = {{"deviceClassName", "gpu.nvidia.com"},
                      {"selectors", json::array({{{"cel", {{"expression", "device.attributes[\"gpu.nvidia.com\"].uuid == \"" + held + "\""}}}}})}};
  json web = ClaimReview("web", named);
  const json untouched = json::parse(*ReviewClaim(web.dump(), "lab", PoolsFrom(stored), AdmissionMode::kMutate));
  EXPECT_TRUE(untouched["response"]["allowed"].get<bool>());
  EXPECT_FALSE(untouched["response"].contains("patch")) << "no pools, nothing to steer";
  taken.clear();
  EXPECT_EQ(Allocate(web["request"]["object"], devices, rules(), taken), "") << "the taint keeps it off";
  EXPECT_EQ(Allocate(ClaimReview("web", {{"deviceClassName", "gpu.nvidia.com"}})["request"]["object"], devices, rules(), taken),
            free_name);

  // Tolerating another project's taint is refused, in any namespace: by key, by Exists, or everything.
  for (const json& t : {json{{"key", "gpuaas.io/project"}, {"operator", "Equal"}, {"value", "vision"}},
                        json{{"key", "gpuaas.io/project"}, {"operator", "Exists"}}, json{{"operator", "Exists"}}}) {
    json sneaky = named;
    sneaky["tolerations"] = json::array({t});
    const json refused = json::parse(*ReviewClaim(ClaimReview("web", sneaky).dump(), "lab", PoolsFrom(stored), AdmissionMode::kValidate));
    EXPECT_FALSE(refused["response"]["allowed"].get<bool>()) << t.dump();
    EXPECT_NE(refused["response"]["status"]["message"].get<std::string>().find("gpuaas.io/project"), std::string::npos);
    // What the webhook refuses, the scheduler would have allocated: the refusal is what fences.
    taken.clear();
    EXPECT_EQ(Allocate(ClaimReview("web", sneaky)["request"]["object"], devices, rules(), taken), held_name) << t.dump();
  }
  json own = named;
  own["tolerations"] = json::array({{{"key", "gpuaas.io/project"}, {"operator", "Equal"}, {"value", "web"}}});
  EXPECT_TRUE(json::parse(*ReviewClaim(ClaimReview("web", own).dump(), "lab", PoolsFrom(stored), AdmissionMode::kValidate))["response"]["allowed"]
                  .get<bool>());
  // vision's claim whose selector was taken away after the webhook set it is refused.
  json widened = review;
  widened["request"]["object"]["spec"]["devices"]["requests"][0]["exactly"].erase("selectors");
  EXPECT_FALSE(json::parse(*ReviewClaim(widened.dump(), "lab", PoolsFrom(stored), AdmissionMode::kValidate))["response"]["allowed"]
                   .get<bool>());

  // Released: the rule goes, in one DELETE; enforcing again writes nothing.
  const size_t before = api.writes().size();
  ASSERT_TRUE(pools->Release("vision", "train", "alice").ok());
  ASSERT_TRUE(Eventually([&] { return rules()["items"].empty(); }));
  Settled();
  int deletes = 0;
  for (size_t i = before; i < api.writes().size(); ++i) deletes += api.writes()[i].method == "DELETE" ? 1 : 0;
  EXPECT_EQ(deletes, 1);
  const size_t after = api.writes().size();
  EXPECT_TRUE(drivers_[0]->EnforceProjectDevices("vision", {}).ok());
  EXPECT_EQ(api.writes().size(), after);
}

// A loan on a DRA cluster: while another project's preemptible workload borrows a GPU of a
// lending pool, the GPU's taint names the borrower, the borrower's namespace quota counts it, the
// lender's no longer does, and the webhook steers each project's claims to exactly its devices;
// on reclaim all of it goes back. In the fewest writes: a device moving is one DELETE of the old
// project's taint rule and one create of the new one; a quota that changes is one write. The
// borrower's pods on the device are told the reclaim's deadline (an annotation), deleted with a
// grace period of 0 at it, and one that stays on is named stuck on the loan until it goes.
TEST_F(KubernetesDriverTest, ALoanMovesItsDeviceTaintQuotaAndClaimsToTheBorrowerAndBackOnReclaim) {
  options_.stuck_after = std::chrono::seconds(2);  // a minute in production
  constexpr char kPods[] = "/api/v1/pods";
  FakeKubeApiServer api("t0ken");
  api.ServeDra(true);
  api.Start();
  const std::vector<std::string> uuids = {"GPU-0e000000-0000-0000-0000-000000000000", "GPU-0e000000-0000-0000-0000-000000000001",
                                          "GPU-0e000000-0000-0000-0000-000000000002"};
  PutDraNode(api, "h200-d", uuids);
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 3; }));
  service::PoolService pools(*store_, RealClock::Get(), [] { return std::map<std::string, int64_t>{{"H200-SXM-141GB", 3}}; });
  for (const char* name : {"vision", "nlp"}) {
    model::Project project;
    project.metadata.name = name;
    ASSERT_TRUE(pools.CreateProject(project, "ops").ok());
  }
  model::GpuPool pool;
  pool.metadata.name = "train";
  pool.metadata.ns = "vision";
  pool.spec.cluster = "lab";
  pool.spec.items = {{"H200-SXM-141GB", "full", 2}};
  pool.spec.lending = model::GpuPool::Spec::Lending{true, 0, 1};
  ASSERT_TRUE(pools.CreatePool(pool, "alice").ok());
  ASSERT_TRUE(pools.Approve("vision", "train", true, "ok", "ops").ok());
  const std::string rules_path(FakeKubeApiServer::kDeviceTaintRulesPath);
  auto taint_of = [&](const std::string& device) {  // the project a device's rule names; "" for none
    for (const char* project : {"vision", "nlp"}) {
      if (!api.Get(rules_path, DeviceTaintRuleName(project, "h200-d", device)).empty()) return std::string(project);
    }
    return std::string();
  };
  auto quota = [&](const std::string& ns) -> std::string {
    const std::string q = api.Get("/api/v1/namespaces/" + ns + "/resourcequotas", "gpuaas-pools");
    return q.empty() ? "" : json::parse(q)["spec"]["hard"]["requests.nvidia.com/gpu"].get<std::string>();
  };
  ASSERT_TRUE(Eventually([&] { return quota("vision") == "2"; }));
  std::vector<model::GpuPool> stored = All<model::GpuPool>();
  ASSERT_EQ(stored[0].status.allocation.size(), 2u);
  std::map<std::string, std::string> device_of;  // GPU UUID -> its device name in the slice
  for (size_t i = 0; i < uuids.size(); ++i) device_of[uuids[i]] = "gpu-" + std::to_string(i);
  for (const model::AllocatedDevice& d : stored[0].status.allocation) {
    ASSERT_TRUE(Eventually([&] { return taint_of(device_of[d.gpu_uuid]) == "vision"; })) << d.gpu_uuid;
  }
  Settled();
  const size_t before_loan = api.writes().size();

  // nlp borrows one GPU.
  model::Workload sweep;
  sweep.metadata.ns = "nlp";
  sweep.metadata.name = "sweep";
  sweep.spec = {"", "nvidia.com/gpu", 1, model::PriorityClass::kPreemptible};
  ASSERT_TRUE(pools.CreateWorkload(sweep, "bob").ok());
  auto workload = [&](const std::string& ns, const std::string& name) {
    for (model::Workload& w : All<model::Workload>()) {
      if (w.metadata.ns == ns && w.metadata.name == name) return w;
    }
    return model::Workload{};
  };
  ASSERT_TRUE(Eventually([&] { return workload("nlp", "sweep").status.phase == model::WorkloadPhase::kRunning; }));
  const std::string lent = workload("nlp", "sweep").status.devices.at(0).gpu_uuid;
  std::string kept;
  for (const model::AllocatedDevice& d : stored[0].status.allocation) {
    if (d.gpu_uuid != lent) kept = d.gpu_uuid;
  }
  ASSERT_TRUE(Eventually([&] { return taint_of(device_of[lent]) == "nlp" && quota("nlp") == "1" && quota("vision") == "1"; }))
      << taint_of(device_of[lent]) << " " << quota("nlp") << " " << quota("vision");
  EXPECT_EQ(taint_of(device_of[kept]), "vision");
  Settled();
  std::vector<FakeKubeApiServer::Write> w = api.writes();
  // The rule moves (DELETE vision's, create nlp's), nlp's namespace and quota are made, vision's
  // quota goes down: five writes, none twice.
  ASSERT_EQ(w.size() - before_loan, 5u);

  // The webhook, on the pools as the loans leave them: each project's claim gets exactly its devices.
  auto project_pools = [&](std::string_view project) {
    std::vector<model::GpuPool> own;
    for (const model::GpuPool& p : All<model::GpuPool>()) {
      if (p.metadata.ns == project) own.push_back(p);
    }
    const std::vector<model::GpuPool> everything = All<model::GpuPool>();
    std::vector<std::shared_ptr<const model::GpuPool>> out;
    for (model::GpuPool& p : model::PoolsWithLoans(
             project, own, All<model::Loan>(),
             [&](std::string_view ns, std::string_view name) {
               for (const model::GpuPool& e : everything) {
                 if (e.metadata.ns == ns && e.metadata.name == name) return &e;
               }
               return static_cast<const model::GpuPool*>(nullptr);
             },
             RealClock::Get().Now())) {
      out.push_back(std::make_shared<const model::GpuPool>(std::move(p)));
    }
    return out;
  };
  auto selector_of = [&](const std::string& ns) {
    absl::StatusOr<std::string> mutated = ReviewClaim(ClaimReview(ns, {{"deviceClassName", "gpu.nvidia.com"}}).dump(), "lab",
                                                      project_pools, AdmissionMode::kMutate);
    EXPECT_TRUE(mutated.ok()) << mutated.status();
    const json answer = json::parse(*mutated);
    std::string patch;
    if (!answer["response"].contains("patch") || !absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch)) {
      return std::string();
    }
    json review = ClaimReview(ns, {{"deviceClassName", "gpu.nvidia.com"}});
    review["request"]["object"] = review["request"]["object"].patch(json::parse(patch));
    return review["request"]["object"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
        .get<std::string>();
  };
  EXPECT_EQ(selector_of("nlp"), UuidSelector({lent}));
  EXPECT_EQ(selector_of("vision"), UuidSelector({kept}));

  // nlp's pods on the borrowed GPU, through a claim the scheduler allocated it: sweep-0, and
  // stubborn, whose finalizer keeps it on as terminating once deleted.
  api.Put(FakeKubeApiServer::kResourceClaimsPath.data(), "ResourceClaim",
          json{{"apiVersion", "resource.k8s.io/v1"},
               {"kind", "ResourceClaim"},
               {"metadata", {{"name", "sweep-gpu"}, {"namespace", "nlp"}}},
               {"status",
                {{"allocation",
                  {{"devices",
                    {{"results", json::array({{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "h200-d"},
                                               {"device", device_of[lent]}}})}}}}}}}}
              .dump());
  for (const char* name : {"sweep-0", "stubborn"}) {
    json pod = {{"metadata", {{"name", name}, {"namespace", "nlp"}}},
                {"spec", {{"nodeName", "h200-d"}, {"containers", json::array({{{"name", "m"}}})}}},
                {"status",
                 {{"phase", "Running"},
                  {"resourceClaimStatuses", json::array({{{"name", "gpu"}, {"resourceClaimName", "sweep-gpu"}}})}}}};
    if (std::string(name) == "stubborn") pod["metadata"]["finalizers"] = json::array({"example.com/keep"});
    api.Put(kPods, "Pod", pod.dump());
  }
  auto pods_on = [&](const std::string& uuid) {
    for (const model::GpuCapacity& g : All<model::GpuCapacity>("lab")) {
      if (g.spec.uuid == uuid) return g.status.pods;
    }
    return std::vector<std::string>{};
  };
  const std::vector<std::string> borrowers = {"nlp/stubborn", "nlp/sweep-0"};
  ASSERT_TRUE(Eventually([&] { return pods_on(lent) == borrowers; }));
  Settled();
  EXPECT_EQ(api.writes().size() - before_loan, 5u) << "pods that run are left alone";

  // vision needs both GPUs: the borrower is told, removed at its deadline (1 s), and everything
  // goes back: four writes (the rule back, both quotas), the namespace stays. The borrower's
  // pods are told the deadline (one patch each), then deleted at once (one DELETE each, grace
  // period 0); stubborn stays on, terminating, and is reported stuck on the loan's receipt.
  const size_t before_reclaim = api.writes().size();
  model::Workload big;
  big.metadata.ns = "vision";
  big.metadata.name = "big";
  big.spec = {"train", "nvidia.com/gpu", 2, model::PriorityClass::kBatch};
  ASSERT_TRUE(pools.CreateWorkload(big, "alice").ok());
  ASSERT_TRUE(Eventually([&] { return workload("vision", "big").status.phase == model::WorkloadPhase::kRunning; },
                         std::chrono::seconds(10)));
  EXPECT_EQ(workload("nlp", "sweep").status.reason, "Reclaimed");
  ASSERT_TRUE(Eventually([&] { return taint_of(device_of[lent]) == "vision" && quota("nlp") == "0" && quota("vision") == "2"; }))
      << taint_of(device_of[lent]) << " " << quota("nlp") << " " << quota("vision");
  std::vector<std::string> both = {kept, lent};
  std::sort(both.begin(), both.end());
  EXPECT_EQ(selector_of("vision"), UuidSelector(both));
  EXPECT_EQ(selector_of("nlp"), "");
  auto receipt = [&] {
    const std::vector<model::Loan> loans = All<model::Loan>();
    return loans.size() == 1 ? loans[0] : model::Loan{};
  };
  ASSERT_TRUE(Eventually([&] { return receipt().status.stuck_pods == std::vector<std::string>{"nlp/stubborn"}; }))
      << receipt().status.stuck_pods.size();
  const model::Loan loan = receipt();
  EXPECT_EQ(loan.spec.end_reason, "Reclaimed");
  EXPECT_EQ(loan.status.removed_pods, borrowers);
  EXPECT_TRUE(api.Get(kPods, "sweep-0").empty());
  const json stubborn = json::parse(api.Get(kPods, "stubborn"));
  EXPECT_TRUE(stubborn["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(stubborn["metadata"]["deletionGracePeriodSeconds"], 0);
  std::map<std::string, int> pod_writes;  // "METHOD name"
  size_t others = 0;
  std::string deadline;
  w = api.writes();
  for (size_t i = before_reclaim; i < w.size(); ++i) {
    const std::string prefix = "/api/v1/namespaces/nlp/pods/";
    if (!w[i].path.starts_with(prefix)) {
      ++others;
      continue;
    }
    ++pod_writes[w[i].method + " " + w[i].path.substr(prefix.size())];
    const json body = json::parse(w[i].body);
    if (w[i].method == "PATCH") {
      const std::string said = body["metadata"]["annotations"]["gpuaas.io/reclaim-deadline"];
      EXPECT_TRUE(deadline.empty() || deadline == said) << "one deadline for both";
      deadline = said;
    } else {
      EXPECT_EQ(body["gracePeriodSeconds"], 0) << body.dump();
    }
  }
  EXPECT_EQ(others, 4u);
  EXPECT_EQ(pod_writes, (std::map<std::string, int>{
                            {"DELETE stubborn", 1}, {"DELETE sweep-0", 1}, {"PATCH stubborn", 1}, {"PATCH sweep-0", 1}}));
  // The deadline the pods were told is the loan's end: the reclaim's grace, in whole seconds.
  const std::optional<Time> told = ParseTime(deadline);
  ASSERT_TRUE(told) << deadline;
  EXPECT_LE(*loan.spec.end - *told, std::chrono::seconds(1));
  EXPECT_GE(*loan.spec.end, *told);

  // stubborn goes at last: the receipt no longer names it, and nothing more was written to pods.
  api.Delete(kPods, "stubborn");
  ASSERT_TRUE(Eventually([&] { return receipt().status.stuck_pods.empty(); }));
  EXPECT_EQ(receipt().status.removed_pods, borrowers);
  size_t pod_total = 0;
  for (size_t i = before_reclaim; i < api.writes().size(); ++i) {
    pod_total += api.writes()[i].path.starts_with("/api/v1/namespaces/nlp/pods/") ? 1 : 0;
  }
  EXPECT_EQ(pod_total, 4u);
  EXPECT_EQ(cp_->loan_pods().stats().stuck, 1);
  EXPECT_EQ(cp_->loan_pods().stats().removed, 2);
}

TEST_F(KubernetesDriverTest, ATooOldVersionListsAgainAndErrorsBackOffUntilTheServerAnswers) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 8; }));

  // The server forgets its history and the watch drops before it saw the latest change:
  // watching from the old version gets 410.
  api.HoldWatches();
  api.Put(kNodes, "Node", H200Node("h200-b", 2));
  api.Compact();
  api.DropWatches();
  ASSERT_TRUE(Eventually([&] { return drivers_[0]->node_stats().lists == 2; })) << drivers_[0]->node_stats().lists;
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 10; })) << Gpus("lab");

  // 429s and 500s: retried with backoff until the server answers again.
  api.FailNext(429, 2, /*retry_after_s=*/1, kNodes);
  api.FailNext(500, 3, 0, kNodes);
  api.DropWatches();
  api.Put(kNodes, "Node", H200Node("h200-c", 1));
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 11; })) << Gpus("lab");
  EXPECT_GE(drivers_[0]->node_stats().errors, 5);
  EXPECT_TRUE(drivers_[0]->node_stats().last_error.empty());
  EXPECT_EQ(drivers_[0]->node_stats().lists, 2) << "faults on a watch resume it from its version, with no new list";
}

TEST_F(KubernetesDriverTest, DroppedWatchesResumeFromTheirVersionAndLoseNothing) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  api.Put(kNodes, "Node", H200Node("n0", 1));
  drivers_.push_back(Driver("lab", api));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 1; }));
  // Nodes join while watches keep being cut: each one is seen, through watches alone.
  for (int i = 1; i <= 6; ++i) {
    api.Put(kNodes, "Node", H200Node("n" + std::to_string(i), 1));
    api.DropWatches();
  }
  ASSERT_TRUE(Eventually([&] { return Gpus("lab") == 7; })) << Gpus("lab");
  EXPECT_EQ(drivers_[0]->node_stats().lists, 1);
  EXPECT_EQ(drivers_[0]->node_stats().events, 6) << "n1..n6, each once";
}

TEST_F(KubernetesDriverTest, TwoClustersAtOnceAndAnApiServerThatGoesAwayAndComesBack) {
  FakeKubeApiServer east("t0ken"), west("t0ken");
  east.Start();
  west.Start();
  east.Put(kNodes, "Node", H200Node("e1", 8));
  west.Put(kNodes, "Node", MigNode("w1"));
  west.Put(kNodes, "Node", H200Node("w2", 4));
  drivers_.push_back(Driver("east", east));
  drivers_.push_back(Driver("west", west));
  StartControlPlane();
  ASSERT_TRUE(Eventually([&] { return Gpus("east") == 8 && Gpus("west") == 5; }));
  // The GPUs once the controllers are done with them (health writes its verdicts after the
  // inventory's first write).
  std::vector<model::GpuCapacity> before;
  ASSERT_TRUE(Eventually([&] {
    std::vector<model::GpuCapacity> now = All<model::GpuCapacity>("east");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    before = All<model::GpuCapacity>("east");
    return now == before;
  }));

  // east is down (connections refused) for a while; west goes on being watched meanwhile.
  const auto outage = std::chrono::seconds(3);
  east.Stop();
  ASSERT_TRUE(Eventually([&] { return !Reachable("east"); }));
  west.Put(kNodes, "Node", H200Node("w3", 2));
  ASSERT_TRUE(Eventually([&] { return Gpus("west") == 7; }));
  std::this_thread::sleep_for(outage);  // the outage itself, not a wait for a result
  EXPECT_EQ(Gpus("east"), 8) << "an unreachable cluster keeps its last inventory";
  east.Start();
  ASSERT_TRUE(Eventually([&] { return Reachable("east"); }));
  // Converged with the GPU objects untouched: the same versions as before the outage.
  const std::vector<model::GpuCapacity> after = All<model::GpuCapacity>("east");
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].metadata.resource_version, before[i].metadata.resource_version) << after[i].metadata.name;
  }
  EXPECT_GE(drivers_[0]->node_stats().errors, 1);
  EXPECT_TRUE(Reachable("west"));
}

TEST_F(KubernetesDriverTest, AWrongTokenIsReportedAsTheClustersCondition) {
  FakeKubeApiServer api("t0ken");
  api.Start();
  api.Put(kNodes, "Node", H200Node("h200-a", 8));
  drivers_.push_back(Driver("lab", api, "not-the-token"));
  drivers_[0]->Start();
  ASSERT_TRUE(Eventually([&] { return !drivers_[0]->node_stats().last_error.empty(); }));
  absl::StatusOr<cluster::ObservedCluster> o = drivers_[0]->Observe();
  ASSERT_TRUE(absl::IsUnavailable(o.status()));
  EXPECT_NE(o.status().message().find("401"), std::string_view::npos) << o.status();
}

}  // namespace
}  // namespace gpuaas
