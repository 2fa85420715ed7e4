#include "cluster/kubernetes/client_config.h"

#include <map>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace gpuaas::cluster::kubernetes {
namespace {

// Files as a map: what a kubeconfig names, without a disk.
ReadFile Files(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> absl::StatusOr<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError(path + ": no such file");
    return it->second;
  };
}

const std::string kCa = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string Kubeconfig() {
  return R"(apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab-cluster
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: )" + absl::Base64Escape(kCa) + R"(
- name: edge-cluster
  cluster:
    server: https://edge.example:443
    certificate-authority: /etc/edge/ca.crt
    tls-server-name: api.edge
contexts:
- name: lab
  context: {cluster: lab-cluster, user: ops}
- name: edge
  context: {cluster: edge-cluster, user: robot, namespace: gpus}
- name: broken
  context: {cluster: nowhere, user: ops}
- name: sso
  context: {cluster: lab-cluster, user: sso}
users:
- name: ops
  user:
    token: abc.def
- name: robot
  user:
    client-certificate: /etc/edge/robot.crt
    client-key-data: )" + absl::Base64Escape("KEY") + R"(
- name: sso
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: kubelogin
)";
}

TEST(Kubeconfig, TheCurrentContextWithATokenAndInlineCa) {
  absl::StatusOr<ClientConfig> c = ParseKubeconfig(Kubeconfig(), "", Files({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->context, "lab");
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->token, "abc.def");
  EXPECT_EQ(c->ns, "default");
  EXPECT_TRUE(c->client_cert_pem.empty());
}

TEST(Kubeconfig, ANamedContextWithACertificateFromFilesAndANamespace) {
  absl::StatusOr<ClientConfig> c =
      ParseKubeconfig(Kubeconfig(), "edge", Files({{"/etc/edge/ca.crt", kCa}, {"/etc/edge/robot.crt", "CERT"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://edge.example:443");
  EXPECT_EQ(c->tls_server_name, "api.edge");
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_EQ(c->ns, "gpus");
  EXPECT_TRUE(c->token.empty());
}

TEST(Kubeconfig, WhatCannotBeUsedIsRefusedWithItsReason) {
  auto refused = [](std::string_view yaml, std::string_view ctx, absl::StatusCode code, std::string_view says) {
    absl::StatusOr<ClientConfig> c = ParseKubeconfig(yaml, ctx, Files({}));
    ASSERT_FALSE(c.ok()) << says;
    EXPECT_EQ(c.status().code(), code) << c.status();
    EXPECT_NE(std::string(c.status().message()).find(says), std::string::npos) << c.status();
  };
  const std::string k = Kubeconfig();
  refused(k, "nope", absl::StatusCode::kInvalidArgument, "no context named \"nope\"");
  refused(k, "broken", absl::StatusCode::kInvalidArgument, "no cluster named \"nowhere\"");
  refused(k, "sso", absl::StatusCode::kUnimplemented, "exec");
  refused(k, "edge", absl::StatusCode::kInvalidArgument, "/etc/edge/ca.crt");  // the file is missing
  refused("{{{", "", absl::StatusCode::kInvalidArgument, "not YAML");
  refused("kind: Pod\n", "", absl::StatusCode::kInvalidArgument, "kind: Config");
  refused("kind: Config\n", "", absl::StatusCode::kInvalidArgument, "current-context");
  refused("kind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: ftp://x}\n",
          "", absl::StatusCode::kInvalidArgument, "not an http(s) URL");
  refused("kind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n"
          "  cluster: {server: https://x}\nusers:\n- name: u\n  user: {client-certificate-data: Q0VSVA==}\n",
          "", absl::StatusCode::kInvalidArgument, "needs its key");
  refused("kind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n"
          "  cluster: {server: https://x, certificate-authority-data: '!!!'}\n",
          "", absl::StatusCode::kInvalidArgument, "not base64");
}

// What `gpuaas cluster add` sends: the files a kubeconfig names, relative to its folder, read
// into one self-contained kubeconfig that parses back to the same client, and that the server
// accepts without reading any file.
TEST(Kubeconfig, ASelfContainedCopyCarriesTheFilesItNamed) {
  const std::string kubeconfig =
      "apiVersion: v1\nkind: Config\ncurrent-context: other\n"
      "clusters:\n- name: prod\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority: pki/ca.crt\n"
      "    tls-server-name: api.prod\n"
      "users:\n- name: ops\n  user:\n    client-certificate: pki/ops.crt\n    client-key: /abs/ops.key\n"
      "    tokenFile: token\n"
      "contexts:\n- name: prod-ops\n  context:\n    cluster: prod\n    user: ops\n    namespace: gpu\n"
      "- name: other\n  context:\n    cluster: prod\n";
  ReadFile read = Files({{"/home/ops/.kube/config", kubeconfig},
                         {"/home/ops/.kube/pki/ca.crt", kCa},
                         {"/home/ops/.kube/pki/ops.crt", "CERT"},
                         {"/abs/ops.key", "KEY"},
                         {"/home/ops/.kube/token", "tok\n"}});
  absl::StatusOr<ClientConfig> c = ParseKubeconfigFile("/home/ops/.kube/config", "prod-ops", read);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_EQ(c->token, "tok");
  const std::string flat = SelfContainedKubeconfig(*c);
  EXPECT_EQ(flat.find("pki/"), std::string::npos) << flat;
  absl::StatusOr<ClientConfig> back = ParseSelfContainedKubeconfig(flat, "");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << flat;
  EXPECT_EQ(back->context, "prod-ops");
  EXPECT_EQ(back->server, c->server);
  EXPECT_EQ(back->ca_pem, c->ca_pem);
  EXPECT_EQ(back->tls_server_name, "api.prod");
  EXPECT_EQ(back->token, "tok");
  EXPECT_FALSE(back->token_source) << "a copied token is not read from a file again";
  EXPECT_EQ(back->client_cert_pem, "CERT");
  EXPECT_EQ(back->client_key_pem, "KEY");
  EXPECT_EQ(back->ns, "gpu");
  EXPECT_FALSE(back->insecure_skip_tls_verify);

  // The server reads no file a kubeconfig names, and says what to do instead.
  absl::StatusOr<ClientConfig> refused = ParseSelfContainedKubeconfig(kubeconfig, "prod-ops");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("pki/ca.crt"), std::string_view::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("inline"), std::string_view::npos) << refused.status();
  // A missing kubeconfig is named.
  absl::StatusOr<ClientConfig> missing = ParseKubeconfigFile("/nowhere/config", "", read);
  EXPECT_NE(missing.status().message().find("/nowhere/config"), std::string_view::npos) << missing.status();
}

TEST(InCluster, TheServiceAccountOfThePod) {
  std::map<std::string, std::string> vars = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  auto env = [&vars](const std::string& n) { return vars.count(n) ? vars.at(n) : std::string(); };
  const std::string dir(kServiceAccountDir);
  absl::StatusOr<ClientConfig> c =
      InClusterConfig(env, Files({{dir + "/token", "tok\n"}, {dir + "/ca.crt", kCa}, {dir + "/namespace", "gpuaas\n"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token, "tok");
  EXPECT_EQ(c->ca_pem, kCa);
  EXPECT_EQ(c->ns, "gpuaas");
  vars["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  EXPECT_EQ(InClusterConfig(env, Files({{dir + "/token", "t"}}))->server, "https://[fd00::1]:443");
  EXPECT_EQ(InClusterConfig(env, Files({})).status().code(), absl::StatusCode::kNotFound);
  vars.clear();
  EXPECT_EQ(InClusterConfig(env, Files({{dir + "/token", "t"}})).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuaas::cluster::kubernetes
