#include "agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "agent/nvidia_smi_source.h"
#include "agent/nvml.h"
#include "agent/pod_resources.h"
#include "catalog/catalog.h"
#include "common/log.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "httplib.h"
#include "model/codec.h"
#include "model/fleet.h"
#include "nlohmann/json.hpp"
#include "telemetry/report.h"

namespace gpuaas::agent {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

absl::StatusOr<std::string> FetchInventory(const AgentOptions& o) {
  httplib::Client c(o.server);
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  if (!o.token.empty()) c.set_bearer_token_auth(o.token);
  auto res = c.Get("/apis/gpuaas.io/v1/gpucapacities");
  if (!res) return absl::UnavailableError(fmt::format("cannot reach {}: {}", o.server, httplib::to_string(res.error())));
  if (res->status != 200) {
    return absl::FailedPreconditionError(fmt::format("{} answered {} for the GPU list: {}", o.server, res->status, res->body));
  }
  return res->body;
}

// This machine's boot (Linux: a random id made at every boot); empty where it cannot be read.
std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return std::string(Trim(id));
}

// Sends one report; the XID events of a report that did not arrive go out with the next. Each
// report names this agent process (its host and an id made at its start) and the node's boot,
// so that the server reads a GPU's counters against one agent's history.
class Pusher {
 public:
  explicit Pusher(const AgentOptions& o) : client_(o.server), boot_id_(BootId()) {
    client_.set_connection_timeout(5);
    client_.set_read_timeout(30);
    if (!o.token.empty()) client_.set_bearer_token_auth(o.token);
    std::random_device rd;
    agent_id_ = fmt::format("{}-{:08x}", HostName(), rd());
  }
  absl::Status Push(telemetry::NodeReport r) {
    r.agent = agent_id_;
    r.boot_id = boot_id_;
    for (telemetry::GpuReport& g : r.gpus) {
      auto it = unsent_.find(g.uuid);
      if (it == unsent_.end()) continue;
      g.xid_events.insert(g.xid_events.begin(), it->second.begin(), it->second.end());
      unsent_.erase(it);
    }
    auto res = client_.Post("/api/v1/telemetry", telemetry::EncodeReport(r), "application/json");
    if (res && res->status == 200) return absl::OkStatus();
    for (const telemetry::GpuReport& g : r.gpus) {
      if (!g.xid_events.empty()) unsent_[g.uuid] = g.xid_events;
    }
    if (!res) return absl::UnavailableError(fmt::format("push failed: {}", httplib::to_string(res.error())));
    return absl::UnavailableError(fmt::format("push answered {}: {}", res->status, res->body));
  }

 private:
  httplib::Client client_;
  std::string agent_id_;
  std::string boot_id_;
  std::map<std::string, std::vector<telemetry::XidEvent>> unsent_;
};

}  // namespace

std::vector<std::pair<std::string, std::vector<SimGpu>>> SimGpusOf(std::span<const model::GpuCapacity* const> gpus,
                                                                   const std::string& node) {
  std::map<std::string, std::vector<SimGpu>> by_node;
  for (const model::GpuCapacity* g : gpus) {
    // The node as gpuaas names it ("CLUSTER.NODE", spec.node) or as its cluster does.
    const std::string prefix = g->spec.cluster + ".";
    const std::string short_node = g->spec.node.starts_with(prefix) ? g->spec.node.substr(prefix.size()) : g->spec.node;
    if (!node.empty() && node != g->spec.node && node != short_node) continue;
    SimGpu s;
    s.uuid = g->spec.uuid;
    s.index = static_cast<int>(g->spec.index);
    // The product label spells the marketing name with dashes: "NVIDIA-H100-80GB-HBM3".
    s.name = g->spec.product;
    std::replace(s.name.begin(), s.name.end(), '-', ' ');
    s.memory_mib = g->spec.memory_mib;
    const catalog::GpuModel* m = catalog::FindModel(g->spec.model);
    if (m != nullptr && m->family == "ampere") s.max_power_w = 400;
    if (g->status.mig_mode == model::MigMode::kEnabled) {
      int gi = 1;
      for (const model::MigInstance& mi : g->status.mig_instances) {  // sorted by start
        SimInstance in{gi++, mi.profile, static_cast<int>(mi.start), static_cast<int>(mi.size), mi.uuid, 1, 0};
        if (const catalog::MigProfile* p = m ? catalog::FindProfile(*m, mi.profile) : nullptr) {
          in.compute_slices = p->compute_slices;
          in.memory_mib = p->memory_mib > 0 ? p->memory_mib : static_cast<int64_t>(p->memory_gb * 1e9 / (1 << 20));
        }
        s.instances.push_back(std::move(in));
      }
    }
    by_node[g->spec.node].push_back(std::move(s));
  }
  return {by_node.begin(), by_node.end()};
}

absl::StatusOr<std::vector<std::pair<std::string, std::vector<SimGpu>>>> SimGpusFromInventory(
    std::string_view body, const std::string& node) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("items") || !j["items"].is_array()) {
    return absl::InvalidArgumentError("the server's GPU list is not a list of GpuCapacity objects");
  }
  std::vector<model::GpuCapacity> decoded;
  for (const nlohmann::json& item : j["items"]) {
    absl::StatusOr<model::GpuCapacity> g = model::Decode<model::GpuCapacity>(item.dump());
    if (!g.ok()) return absl::InvalidArgumentError(fmt::format("a GPU of the list: {}", std::string(g.status().message())));
    decoded.push_back(std::move(*g));
  }
  std::vector<const model::GpuCapacity*> gpus;
  for (const model::GpuCapacity& g : decoded) gpus.push_back(&g);
  std::vector<std::pair<std::string, std::vector<SimGpu>>> out = SimGpusOf(gpus, node);
  if (!node.empty() && out.empty()) {
    return absl::NotFoundError(fmt::format("the server knows no GPUs on node {}", node));
  }
  return out;
}

int RunAgent(const AgentOptions& o, std::ostream& out, std::ostream& err) {
  const std::string node = o.node.empty() ? HostName() : o.node;
  std::vector<Fault> faults;
  for (const std::string& f : o.faults) {
    absl::StatusOr<Fault> parsed = ParseFault(f);
    if (!parsed.ok()) {
      err << "--inject: " << parsed.status().message() << "\n";
      return 2;
    }
    faults.push_back(*parsed);
  }
  if (o.simulate && (o.nvidia_smi || !o.nvidia_smi_xml.empty())) {
    err << "--simulate and --nvidia-smi are two different sources: choose one\n";
    return 2;
  }
  if (!faults.empty() && !o.simulate) {
    err << "--inject needs --simulate: faults are injected into the simulation only\n";
    return 2;
  }
  if (o.output != "json" && o.output != "text") {
    err << "-o: use json or text\n";
    return 2;
  }
  if (o.interval_s <= 0) {
    err << "--interval: must be positive\n";
    return 2;
  }

  // The sources: one per node (a simulating agent may play many nodes).
  std::vector<std::unique_ptr<GpuSource>> sources;
  if (o.simulate) {
    if (!o.server.empty()) {
      absl::StatusOr<std::string> body = FetchInventory(o);
      if (!body.ok()) {
        err << body.status().message() << "\n";
        return 1;
      }
      auto nodes = SimGpusFromInventory(*body, o.node);
      if (!nodes.ok()) {
        err << nodes.status().message() << "\n";
        return 1;
      }
      uint64_t seed = o.seed;
      for (auto& [name, gpus] : *nodes) sources.push_back(std::make_unique<Simulator>(name, gpus, faults, seed++));
    } else {
      sources.push_back(std::make_unique<Simulator>(node, SyntheticGpus(node, o.simulated_gpus), faults, o.seed));
    }
  } else if (o.nvidia_smi || !o.nvidia_smi_xml.empty()) {
    sources.push_back(MakeNvidiaSmiSource(node, o.nvidia_smi_xml));
  } else {
    absl::StatusOr<std::unique_ptr<GpuSource>> nvml = OpenNvml(node, o.nvml_library);
    if (!nvml.ok()) {
      err << nvml.status().message() << "\n";
      return 1;
    }
    sources.push_back(std::move(*nvml));
  }

  // Who holds which device, asked of the kubelet before each report.
  std::optional<PodResourcesClient> kubelet;
  if (!o.pod_resources.empty()) kubelet.emplace(o.pod_resources);
  bool kubelet_ok = true;  // logs the first failure and the recovery, not every tick
  auto attach_pods = [&](std::vector<telemetry::NodeReport*> reports) {
    if (!kubelet) return absl::OkStatus();
    absl::StatusOr<std::vector<PodDevice>> devices = kubelet->List();
    if (!devices.ok()) {
      if (kubelet_ok) log::Warn("agent: devices reported without their pods: {}", std::string(devices.status().message()));
      kubelet_ok = false;
      return devices.status();
    }
    if (!kubelet_ok) log::Info("agent: the kubelet answers again at {}", o.pod_resources);
    kubelet_ok = true;
    for (telemetry::NodeReport* r : reports) AttachPods(*r, *devices);
    return absl::OkStatus();
  };

  if (o.once) {
    int rc = 0;
    std::optional<Pusher> pusher;
    if (!o.server.empty()) pusher.emplace(o);
    std::vector<telemetry::NodeReport> reports;
    for (auto& s : sources) {
      absl::StatusOr<telemetry::NodeReport> r = s->Read(NowMs());
      if (!r.ok()) {
        err << r.status().message() << "\n";
        return 1;
      }
      if (absl::Status p = attach_pods({&*r}); !p.ok()) {
        err << p.message() << "\n";
        rc = 1;
      }
      if (o.output == "json") out << telemetry::EncodeReport(*r, true) << "\n";
      if (pusher) {
        if (absl::Status s2 = pusher->Push(*r); !s2.ok()) {
          err << s2.message() << "\n";
          rc = 1;
        }
      }
      reports.push_back(std::move(*r));
    }
    if (o.output == "text") out << telemetry::RenderDcgmText(reports);
    return rc;
  }

  std::mutex mu;
  std::string exposition;  // the latest readings, dcgm-exporter text
  httplib::Server exporter;
  std::thread serving;
  if (!o.listen.empty()) {
    const size_t colon = o.listen.rfind(':');
    if (colon == std::string::npos) {
      err << "--listen: use HOST:PORT\n";
      return 2;
    }
    exporter.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      res.set_content(exposition, "text/plain; version=0.0.4; charset=utf-8");
    });
    exporter.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    const std::string host = o.listen.substr(0, colon);
    int port = std::atoi(o.listen.c_str() + colon + 1);
    if (port == 0) {
      port = exporter.bind_to_any_port(host);
    } else if (!exporter.bind_to_port(host, port)) {
      port = -1;
    }
    if (port <= 0) {
      err << "cannot listen on " << o.listen << "\n";
      return 1;
    }
    err << "agent: serving dcgm-exporter metrics on http://" << host << ":" << port << "/metrics" << std::endl;
    serving = std::thread([&] { exporter.listen_after_bind(); });
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::optional<Pusher> pusher;
  if (!o.server.empty()) pusher.emplace(o);
  log::Info("agent: {} source(s), {} every {} s{}", sources.size(), o.simulate ? "simulated" : "NVML", o.interval_s,
            o.server.empty() ? "" : ", pushing to " + o.server);
  while (!g_stop) {
    const auto tick = std::chrono::steady_clock::now();
    std::vector<telemetry::NodeReport> reports;
    for (auto& s : sources) {
      absl::StatusOr<telemetry::NodeReport> r = s->Read(NowMs());
      if (!r.ok()) {
        log::Warn("agent: read failed: {}", r.status().ToString());
        continue;
      }
      (void)attach_pods({&*r});
      reports.push_back(*r);
      if (pusher) {
        if (absl::Status st = pusher->Push(*r); !st.ok()) log::Warn("agent: {}", st.ToString());
      }
    }
    std::string text = telemetry::RenderDcgmText(reports);
    {
      std::lock_guard<std::mutex> l(mu);
      exposition = std::move(text);
    }
    while (!g_stop && std::chrono::steady_clock::now() - tick < std::chrono::duration<double>(o.interval_s)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (serving.joinable()) {
    exporter.stop();
    serving.join();
  }
  return 0;
}

}  // namespace gpuaas::agent
