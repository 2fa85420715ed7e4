#include "cluster/kubernetes/webhook_server.h"

#include "cluster/kubernetes/admission.h"
#include "common/log.h"
#include "common/problem.h"
#include "fmt/format.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cluster::kubernetes {

struct WebhookServer::Impl {
  std::unique_ptr<httplib::SSLServer> server;
  ProjectPools pools;
  KnownCluster known;
  std::thread thread;
};

WebhookServer::WebhookServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebhookServer::~WebhookServer() { Stop(); }

absl::StatusOr<std::unique_ptr<WebhookServer>> WebhookServer::Make(const std::string& cert_file,
                                                                   const std::string& key_file, ProjectPools pools,
                                                                   KnownCluster known) {
  auto impl = std::make_unique<Impl>();
  impl->server = std::make_unique<httplib::SSLServer>(cert_file.c_str(), key_file.c_str());
  if (!impl->server->is_valid()) {
    return absl::InvalidArgumentError(
        fmt::format("the webhook's certificate {} and key {} do not load (PEM files, the key the certificate's)",
                    cert_file, key_file));
  }
  impl->pools = std::move(pools);
  impl->known = std::move(known);
  Impl* m = impl.get();
  auto problem = [](httplib::Response& res, const absl::Status& refused) {
    const Problem p = ProblemFor(refused);
    res.status = p.status;
    res.set_content(ProblemJson(p), std::string(kProblemContentType));
  };
  m->server->Post(R"(/admission/([a-z0-9][a-z0-9-]*)/(mutate|validate)-(pods|claims))",
                  [m, problem](const httplib::Request& req, httplib::Response& res) {
                    const std::string cluster = req.matches[1].str();
                    if (!m->known(cluster)) return problem(res, absl::NotFoundError(fmt::format("no cluster named {}", cluster)));
                    const AdmissionMode mode = req.matches[2].str() == "mutate" ? AdmissionMode::kMutate
                                                                                : AdmissionMode::kValidate;
                    const bool pods = req.matches[3].str() == "pods";
                    absl::StatusOr<std::string> answer =
                        pods ? ReviewPod(req.body, cluster, m->pools, mode) : ReviewClaim(req.body, cluster, m->pools, mode);
                    if (!answer.ok()) return problem(res, answer.status());
                    const nlohmann::json a = nlohmann::json::parse(*answer);
                    if (!a["response"]["allowed"].get<bool>()) {
                      log::Info("admission {}: {} refused: {}", cluster, pods ? "pod" : "resource claim",
                                a["response"]["status"]["message"].get<std::string>());
                    }
                    res.set_content(*answer, "application/json");
                  });
  return std::unique_ptr<WebhookServer>(new WebhookServer(std::move(impl)));
}

absl::StatusOr<int> WebhookServer::Start(const std::string& host, int port) {
  httplib::SSLServer& s = *impl_->server;
  s.set_payload_max_length(4 << 20);
  const int bound = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return absl::UnavailableError(fmt::format("the webhook cannot listen on {}:{}", host, port));
  impl_->thread = std::thread([&s] { s.listen_after_bind(); });
  for (int i = 0; i < 1000 && !s.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return bound;
}

void WebhookServer::Stop() {
  if (!impl_ || !impl_->server) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace gpuaas::cluster::kubernetes
