// How the Kubernetes driver reaches an API server: from a kubeconfig file (the context named, or
// the current one; token, client certificate, certificate authority, inline or by file) or, inside
// a pod, from the service account Kubernetes mounts. Pure: files and the environment come in
// through the callers' functions, so tests need neither.
#ifndef GPUAAS_CLUSTER_KUBERNETES_CLIENT_CONFIG_H_
#define GPUAAS_CLUSTER_KUBERNETES_CLIENT_CONFIG_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpuaas::cluster::kubernetes {

struct ClientConfig {
  std::string context;  // the kubeconfig context it came from ("in-cluster" inside a pod)
  std::string server;   // "https://host:port"
  std::string ca_pem;   // the certificate authority to trust; empty: the system's
  std::string tls_server_name;
  bool insecure_skip_tls_verify = false;
  std::string token;            // bearer token
  // Where the token came from a file (a kubeconfig's tokenFile, the service account's token):
  // reads it again, for tokens that rotate (bound service account tokens live an hour). Holds a
  // copy of the ReadFile given to the parser.
  std::function<absl::StatusOr<std::string>()> token_source;
  std::string client_cert_pem;  // client certificate and key (both or neither)
  std::string client_key_pem;
  std::string ns = "default";  // the context's namespace
};

// Reads a file named in a kubeconfig (a relative path is the kubeconfig's folder's business:
// the caller resolves it). Kept in ClientConfig::token_source, so it must own what it captures.
using ReadFile = std::function<absl::StatusOr<std::string>(const std::string& path)>;

// `context` empty: the kubeconfig's current-context. InvalidArgument naming the field for YAML
// that is not a kubeconfig, a context, cluster or user that is missing, a server that is not an
// http(s) URL, base64 that does not decode, or a certificate without its key; Unimplemented for
// exec and auth-provider credentials (not supported: use a token or a client certificate).
absl::StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, std::string_view context, const ReadFile& read);

// The kubeconfig at `path`, read with `read`, the files it names relative to its own folder as
// kubectl reads them. Errors name the file.
absl::StatusOr<ClientConfig> ParseKubeconfigFile(const std::string& path, std::string_view context, const ReadFile& read);

// `config` as a kubeconfig that needs no file: one context (named as config.context, current),
// its cluster and user, the certificates, key and token inline. What `gpuaas cluster add`
// sends, so that the server can reach the cluster without the files of the machine it ran on. A
// token read from a file is copied as it is now: a rotating token stops working when it
// expires (give such clusters a long-lived token).
std::string SelfContainedKubeconfig(const ClientConfig& config);
// A kubeconfig that must be self-contained: a file it names is refused, saying to inline it.
absl::StatusOr<ClientConfig> ParseSelfContainedKubeconfig(std::string_view yaml, std::string_view context);

// Inside a pod: KUBERNETES_SERVICE_HOST and _PORT, and the service account's token, ca.crt and
// namespace under /var/run/secrets/kubernetes.io/serviceaccount. NotFound outside a pod.
inline constexpr std::string_view kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
absl::StatusOr<ClientConfig> InClusterConfig(const std::function<std::string(const std::string& name)>& env,
                                             const ReadFile& read);

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_CLIENT_CONFIG_H_
