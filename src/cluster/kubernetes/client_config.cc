#include "cluster/kubernetes/client_config.h"

#include <filesystem>

#include "absl/strings/escaping.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

namespace gpuaas::cluster::kubernetes {
namespace {

// The entry named `name` of a kubeconfig list (contexts, clusters, users): its inner map.
absl::StatusOr<YAML::Node> Named(const YAML::Node& root, const std::string& list, const std::string& inner,
                                 const std::string& name) {
  const YAML::Node entries = root[list];
  if (entries && !entries.IsSequence()) return absl::InvalidArgumentError(fmt::format("kubeconfig: {} is not a list", list));
  if (entries) {
    for (const YAML::Node& e : entries) {
      if (e.IsMap() && e["name"] && e["name"].as<std::string>() == name) {
        const YAML::Node body = e[inner];
        if (!body || !body.IsMap()) {
          return absl::InvalidArgumentError(fmt::format("kubeconfig: {} \"{}\" has no {}", list, name, inner));
        }
        return body;
      }
    }
  }
  return absl::InvalidArgumentError(fmt::format("kubeconfig: no {} named \"{}\"", inner, name));
}

// The token in `path`, read afresh at each call (trimmed; an empty file is an error).
std::function<absl::StatusOr<std::string>()> TokenFrom(const ReadFile& read, const std::string& path) {
  return [read, path]() -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> t = read(path);
    if (!t.ok()) return t.status();
    std::string token(Trim(*t));
    if (token.empty()) return absl::InvalidArgumentError(fmt::format("{} is empty", path));
    return token;
  };
}

std::string Str(const YAML::Node& m, const char* key) { return m[key] && m[key].IsScalar() ? m[key].as<std::string>() : ""; }

// `<field>-data` (base64) or `<field>` (a file), or "" when neither is given.
absl::StatusOr<std::string> DataOrFile(const YAML::Node& m, const std::string& field, const std::string& where,
                                       const ReadFile& read) {
  const std::string data = Str(m, (field + "-data").c_str());
  if (!data.empty()) {
    std::string out;
    if (!absl::Base64Unescape(data, &out)) {
      return absl::InvalidArgumentError(fmt::format("kubeconfig: {}: {}-data is not base64", where, field));
    }
    return out;
  }
  const std::string path = Str(m, field.c_str());
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> text = read(path);
  if (!text.ok()) return absl::InvalidArgumentError(fmt::format("kubeconfig: {}: {}: {}", where, field, text.status().message()));
  return *text;
}

absl::Status CheckServer(const std::string& server, const std::string& where) {
  if (!server.starts_with("https://") && !server.starts_with("http://")) {
    return absl::InvalidArgumentError(fmt::format("kubeconfig: {}: server \"{}\" is not an http(s) URL", where, server));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, std::string_view context, const ReadFile& read) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("kubeconfig: not YAML: {}", e.what()));
  }
  if (!root.IsMap() || (root["kind"] && Str(root, "kind") != "Config")) {
    return absl::InvalidArgumentError("kubeconfig: not a kubeconfig (kind: Config)");
  }
  try {
    ClientConfig c;
    c.context = context.empty() ? Str(root, "current-context") : std::string(context);
    if (c.context.empty()) return absl::InvalidArgumentError("kubeconfig: no context named and no current-context");
    ASSIGN_OR_RETURN(YAML::Node ctx, Named(root, "contexts", "context", c.context));
    const std::string cluster_name = Str(ctx, "cluster"), user_name = Str(ctx, "user");
    if (!Str(ctx, "namespace").empty()) c.ns = Str(ctx, "namespace");
    ASSIGN_OR_RETURN(YAML::Node cluster, Named(root, "clusters", "cluster", cluster_name));
    const std::string where = fmt::format("cluster \"{}\"", cluster_name);
    c.server = Str(cluster, "server");
    RETURN_IF_ERROR(CheckServer(c.server, where));
    c.insecure_skip_tls_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
    c.tls_server_name = Str(cluster, "tls-server-name");
    ASSIGN_OR_RETURN(c.ca_pem, DataOrFile(cluster, "certificate-authority", where, read));
    if (user_name.empty()) return c;  // anonymous
    ASSIGN_OR_RETURN(YAML::Node user, Named(root, "users", "user", user_name));
    const std::string who = fmt::format("user \"{}\"", user_name);
    if (user["exec"] || user["auth-provider"]) {
      return absl::UnimplementedError(fmt::format(
          "kubeconfig: {} uses {} credentials, which gpuaas does not run; give it a token or a client certificate",
          who, user["exec"] ? "exec" : "auth-provider"));
    }
    c.token = Str(user, "token");
    if (c.token.empty() && !Str(user, "tokenFile").empty()) {
      const std::string path = Str(user, "tokenFile");
      c.token_source = TokenFrom(read, path);
      absl::StatusOr<std::string> t = c.token_source();
      if (!t.ok()) return absl::InvalidArgumentError(fmt::format("kubeconfig: {}: tokenFile: {}", who, t.status().message()));
      c.token = *t;
    }
    ASSIGN_OR_RETURN(c.client_cert_pem, DataOrFile(user, "client-certificate", who, read));
    ASSIGN_OR_RETURN(c.client_key_pem, DataOrFile(user, "client-key", who, read));
    if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
      return absl::InvalidArgumentError(fmt::format("kubeconfig: {}: a client certificate needs its key, and a key its certificate", who));
    }
    return c;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("kubeconfig: {}", e.what()));
  }
}

absl::StatusOr<ClientConfig> ParseKubeconfigFile(const std::string& path, std::string_view context, const ReadFile& read) {
  absl::StatusOr<std::string> yaml = read(path);
  if (!yaml.ok()) return yaml.status();
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  absl::StatusOr<ClientConfig> c = ParseKubeconfig(*yaml, context, [dir, read](const std::string& name) {
    const std::filesystem::path p(name);
    return read(p.is_absolute() ? name : (dir / p).string());
  });
  if (!c.ok()) return absl::Status(c.status().code(), fmt::format("{}: {}", path, c.status().message()));
  return c;
}

std::string SelfContainedKubeconfig(const ClientConfig& config) {
  const std::string name = config.context.empty() ? "gpuaas" : config.context;
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "apiVersion" << YAML::Value << "v1" << YAML::Key << "kind" << YAML::Value
      << "Config" << YAML::Key << "current-context" << YAML::Value << name;
  out << YAML::Key << "clusters" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key << "name"
      << YAML::Value << name << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "server" << YAML::Value << config.server;
  if (!config.ca_pem.empty()) {
    out << YAML::Key << "certificate-authority-data" << YAML::Value << absl::Base64Escape(config.ca_pem);
  }
  if (!config.tls_server_name.empty()) out << YAML::Key << "tls-server-name" << YAML::Value << config.tls_server_name;
  if (config.insecure_skip_tls_verify) out << YAML::Key << "insecure-skip-tls-verify" << YAML::Value << true;
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "users" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key << "name"
      << YAML::Value << name << YAML::Key << "user" << YAML::Value << YAML::BeginMap;
  if (!config.token.empty()) out << YAML::Key << "token" << YAML::Value << config.token;
  if (!config.client_cert_pem.empty()) {
    out << YAML::Key << "client-certificate-data" << YAML::Value << absl::Base64Escape(config.client_cert_pem);
    out << YAML::Key << "client-key-data" << YAML::Value << absl::Base64Escape(config.client_key_pem);
  }
  out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::Key << "contexts" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key << "name"
      << YAML::Value << name << YAML::Key << "context" << YAML::Value << YAML::BeginMap << YAML::Key << "cluster"
      << YAML::Value << name << YAML::Key << "user" << YAML::Value << name << YAML::Key << "namespace" << YAML::Value
      << config.ns << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

absl::StatusOr<ClientConfig> ParseSelfContainedKubeconfig(std::string_view yaml, std::string_view context) {
  return ParseKubeconfig(yaml, context, [](const std::string& path) -> absl::StatusOr<std::string> {
    return absl::InvalidArgumentError(fmt::format(
        "names the file \"{}\", which the server does not read: give it inline (the *-data fields, token), as "
        "`gpuaas cluster add` and `kubectl config view --flatten --minify` do",
        path));
  });
}

absl::StatusOr<ClientConfig> InClusterConfig(const std::function<std::string(const std::string& name)>& env,
                                             const ReadFile& read) {
  const std::string host = env("KUBERNETES_SERVICE_HOST"), port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return absl::NotFoundError("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
  }
  ClientConfig c;
  c.context = "in-cluster";
  // An IPv6 service address goes in brackets.
  c.server = fmt::format("https://{}:{}", host.find(':') != std::string::npos ? "[" + host + "]" : host, port);
  const std::string dir(kServiceAccountDir);
  c.token_source = TokenFrom(read, dir + "/token");
  absl::StatusOr<std::string> token = c.token_source();
  if (!token.ok()) return absl::NotFoundError(fmt::format("in a pod without a service account token: {}", token.status().message()));
  c.token = *token;
  if (absl::StatusOr<std::string> ca = read(dir + "/ca.crt"); ca.ok()) c.ca_pem = *ca;
  if (absl::StatusOr<std::string> ns = read(dir + "/namespace"); ns.ok() && !Trim(*ns).empty()) c.ns = std::string(Trim(*ns));
  return c;
}

}  // namespace gpuaas::cluster::kubernetes
