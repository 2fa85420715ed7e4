// `gpuaas sim`: replays a cluster trace (Alibaba `openb_*` node and pod lists) through the
// pool allocator and the FGD paper's policies and prints allocation and fragmentation. Reads the
// two files, runs sim/replay.h, prints a table or CSV. Returns the process exit code (0, or 1
// with the error on `err`).
#ifndef GPUAAS_CLI_SIM_H_
#define GPUAAS_CLI_SIM_H_

#include <ostream>
#include <string>
#include <vector>

namespace gpuaas::cli {

struct SimOptions {
  std::string nodes;              // node list CSV
  std::vector<std::string> pods;  // pod list CSVs (several: one block of results each)
  std::string policy = "gpuaas";  // a name, a comma-separated list, or "all"
  std::string seeds = "42-51";    // "42-51", "42,43" or "42"
  double tune = 1.3;
  std::string format = "table";  // table or csv
  std::string mode = "arrival";  // arrival, churn, mig, mig-churn or lending
  std::string mig_model = "H100-SXM5-80GB";
  double speedup = 1;  // churn: arrivals this many times faster
  int jobs = 0;        // threads (0: one per core)
  // lending mode (sim/lending.h)
  int projects = 8;
  double borrow_share = 0.3;
  int64_t idle_after = 600;
  int64_t grace = 30;
};

int Sim(const SimOptions& o, std::ostream& out, std::ostream& err);

}  // namespace gpuaas::cli

#endif  // GPUAAS_CLI_SIM_H_
