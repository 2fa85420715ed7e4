// The node agent (`gpuaas agent`): every interval it reads its GPUs (NVML, or a simulation), pushes
// the report to the server (POST /api/v1/telemetry) and serves the latest readings as Prometheus
// text in dcgm-exporter's names and labels on --listen, so existing dashboards and scrapers work.
// Layer 11 of docs/architecture.md; cpp-httplib inside agent.cc.
#ifndef GPUAAS_AGENT_AGENT_H_
#define GPUAAS_AGENT_AGENT_H_

#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/simulator.h"
#include "model/fleet.h"

namespace gpuaas::agent {

struct AgentOptions {
  bool simulate = false;
  int simulated_gpus = 8;            // without --server: synthetic H200s
  std::vector<std::string> faults;   // --inject, see simulator.h
  std::string node;                  // default: the host name
  std::string server;                // push here (and, simulating, take the GPUs from here)
  std::string token;
  double interval_s = 10;
  std::string listen;                // HOST:PORT for /metrics; empty: no exporter
  bool once = false;                 // one report to stdout, then exit
  std::string output = "json";       // with --once: json or text (dcgm-exporter format)
  std::string nvml_library;          // default libnvidia-ml.so.1
  bool nvidia_smi = false;           // read `nvidia-smi -q -x` instead of NVML
  std::string nvidia_smi_xml;        // ... or a saved capture of it
  // The kubelet's PodResources socket: each GPU and MIG instance is reported with the pods that
  // hold it (pod_resources.h). Empty: not asked.
  std::string pod_resources;
  uint64_t seed = 1;
};

// Runs until SIGINT/SIGTERM (or once). Returns the process exit code; errors go to `err`.
int RunAgent(const AgentOptions& options, std::ostream& out, std::ostream& err);

// The GPUs a simulating agent plays, from the server's GpuCapacities (JSON list body), grouped
// by node ("cluster.node" names); only `node` when it is set. MIG instances get GPU instance ids
// in placement order. InvalidArgument on a body that is not a GpuCapacity list.
absl::StatusOr<std::vector<std::pair<std::string, std::vector<SimGpu>>>> SimGpusFromInventory(
    std::string_view gpucapacities_json, const std::string& node);
// The same from the objects themselves (every node when `node` is empty; none found is empty).
std::vector<std::pair<std::string, std::vector<SimGpu>>> SimGpusOf(std::span<const model::GpuCapacity* const> gpus,
                                                                   const std::string& node);

}  // namespace gpuaas::agent

#endif  // GPUAAS_AGENT_AGENT_H_
