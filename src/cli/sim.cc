#include "cli/sim.h"

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allocator/packing.h"
#include "common/files.h"
#include "sim/lending.h"
#include "sim/mig.h"
#include "sim/replay.h"
#include "sim/trace.h"

namespace gpuaas::cli {

namespace {


absl::StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> out;
  auto num = [&](std::string_view s, uint64_t& v) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size() && !s.empty();
  };
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t dash = part.find('-');
    uint64_t a = 0, b = 0;
    if (dash == std::string_view::npos) {
      if (!num(part, a)) {
        return absl::InvalidArgumentError(
            fmt::format("--seeds \"{}\": bad seed \"{}\"", text, part));
      }
      out.push_back(a);
      continue;
    }
    if (!num(part.substr(0, dash), a) || !num(part.substr(dash + 1), b) || b < a || b - a > 10000) {
      return absl::InvalidArgumentError(
          fmt::format("--seeds \"{}\": bad range \"{}\"", text, part));
    }
    for (uint64_t s = a; s <= b; ++s) out.push_back(s);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("--seeds \"{}\": expected N, A-B or a comma-separated list", text));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ParsePolicies(const std::string& text, bool mig) {
  std::vector<std::string> out;
  if (text == "all") {
    if (mig) return std::vector<std::string>{"gpuaas"};
    return sim::PolicyNames();
  }
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    std::string name(rest.substr(0, comma));
    const std::vector<std::string> all = sim::PolicyNames();
    const bool known = mig ? name == "gpuaas" : std::find(all.begin(), all.end(), name) != all.end();
    if (!known) {
      std::string names;
      if (mig) {
        names = "gpuaas, the pool allocator, which the MIG modes replay through";
      } else {
        for (const std::string& n : all) {
          names += names.empty() ? "" : ", ";
          names += n;
        }
      }
      return absl::InvalidArgumentError(
          fmt::format("--policy \"{}\": unknown policy (known: {}, or all)", name, names));
    }
    out.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

// Runs fn(i) for i in [0, n) on `jobs` threads.
template <typename Fn>
void ParallelFor(size_t n, int jobs, Fn fn) {
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
}

std::string Pct(double v) { return std::isnan(v) ? "-" : fmt::format("{:.2f}", v); }

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 3, ' ');
    }
    out << line << "\n";
  }
}

int Fail(std::ostream& err, const absl::Status& s) {
  err << "error: " << s.message() << "\n";
  return 1;
}

}  // namespace

int Sim(const SimOptions& o, std::ostream& out, std::ostream& err) {
  if (o.format != "table" && o.format != "csv") {
    return Fail(err, absl::InvalidArgumentError(
                         fmt::format("--format \"{}\": expected table or csv", o.format)));
  }
  const bool mig = o.mode == "mig" || o.mode == "mig-churn";
  if (o.mode != "arrival" && o.mode != "churn" && o.mode != "lending" && !mig) {
    return Fail(err, absl::InvalidArgumentError(
                         fmt::format("--mode \"{}\": expected arrival, churn, mig, mig-churn or lending", o.mode)));
  }
  if (!(o.tune >= 0 && o.tune <= 10)) {
    return Fail(err, absl::InvalidArgumentError("--tune must be between 0 and 10"));
  }
  absl::StatusOr<std::vector<uint64_t>> seeds = ParseSeeds(o.seeds);
  if (!seeds.ok()) return Fail(err, seeds.status());
  absl::StatusOr<std::vector<std::string>> policies = ParsePolicies(o.policy, mig);
  if (!policies.ok()) return Fail(err, policies.status());
  if (o.format == "csv" && (policies->size() != 1 || o.pods.size() != 1 || o.mode != "arrival")) {
    return Fail(err, absl::InvalidArgumentError(
                         "--format csv prints one mean curve: give one policy, one pod list and "
                         "the arrival mode"));
  }
  const sim::MigModel* mig_model = nullptr;
  if (mig) {
    absl::StatusOr<const sim::MigModel*> m = sim::FindMigModel(o.mig_model);
    if (!m.ok()) return Fail(err, m.status());
    mig_model = *m;
  }
  absl::StatusOr<std::string> node_text = ReadWholeFile(o.nodes);
  if (!node_text.ok()) return Fail(err, node_text.status());
  absl::StatusOr<std::vector<allocator::NodeSpec>> nodes = sim::ParseNodes(*node_text);
  if (!nodes.ok())
    return Fail(err, absl::InvalidArgumentError(
                         fmt::format("{}: {}", o.nodes, std::string(nodes.status().message()))));
  int64_t gpus = 0;
  for (const allocator::NodeSpec& n : *nodes) gpus += n.gpus;
  const int jobs = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());

  for (const std::string& pod_file : o.pods) {
    absl::StatusOr<std::string> pod_text = ReadWholeFile(pod_file);
    if (!pod_text.ok()) return Fail(err, pod_text.status());
    absl::StatusOr<std::vector<sim::TracePod>> pods = sim::ParsePods(*pod_text);
    if (!pods.ok())
      return Fail(err, absl::InvalidArgumentError(
                           fmt::format("{}: {}", pod_file, std::string(pods.status().message()))));
    if (o.format == "table") {
      out << fmt::format("{}: {} nodes, {} GPUs, {} pods; {} mode; seeds {} ({})\n",
                         BaseName(pod_file), nodes->size(), gpus, pods->size(), o.mode, o.seeds,
                         seeds->size());
    }

    if (o.mode == "arrival") {
      std::vector<std::vector<std::string>> rows;
      rows.push_back({"POLICY", "ALLOC@70", "ALLOC@80", "ALLOC@90", "ALLOC@100", "ALLOC@110",
                      "ALLOC@120", "ALLOC@130", "FRAG%IDLE@130", "FAILED", "DECISIONS/S"});
      for (const std::string& name : *policies) {
        std::vector<sim::ArrivalResult> runs(seeds->size());
        ParallelFor(seeds->size(), jobs, [&](size_t i) {
          runs[i] = sim::RunArrival(*nodes, *pods, name, (*seeds)[i], {o.tune});
        });
        const sim::Curve mean = sim::MeanCurve(runs);
        if (o.format == "csv") {
          out << "arrived,alloc_ratio,frag_ratio\n";
          for (size_t b = 0; b < mean.alloc.size(); ++b) {
            if (std::isnan(mean.alloc[b])) continue;
            out << fmt::format("{},{:.2f},{:.2f}\n", b, mean.alloc[b], mean.frag_ratio[b]);
          }
          return 0;
        }
        double failed = 0, decisions = 0, seconds = 0;
        for (const sim::ArrivalResult& r : runs) {
          failed += static_cast<double>(r.failed);
          decisions += static_cast<double>(r.pods);
          seconds += r.seconds;
        }
        std::vector<std::string> row{name};
        for (int x = 70; x <= 130; x += 10) row.push_back(Pct(mean.alloc[static_cast<size_t>(x)]));
        row.push_back(Pct(mean.frag_ratio[130]));
        row.push_back(fmt::format("{:.0f}", failed / static_cast<double>(runs.size())));
        row.push_back(fmt::format("{:.0f}", seconds > 0 ? decisions / seconds : 0.0));
        rows.push_back(std::move(row));
      }
      PrintTable(out, rows);
    } else if (o.mode == "churn") {
      std::vector<std::vector<std::string>> rows;
      rows.push_back({"POLICY", "TIME-AVG-ALLOC", "PLACED", "PLACED-LATE", "GAVE-UP", "PENDING-END",
                      "MAX-PENDING", "AVG-PENDING"});
      for (const std::string& name : *policies) {
        std::vector<absl::StatusOr<sim::ChurnResult>> runs(seeds->size());
        ParallelFor(seeds->size(), jobs, [&](size_t i) {
          runs[i] = sim::RunChurn(*nodes, *pods, name, (*seeds)[i], o.speedup);
        });
        double alloc = 0, placed = 0, late = 0, gave_up = 0, pend = 0, max_pend = 0, avg = 0;
        for (const auto& r : runs) {
          if (!r.ok()) return Fail(err, r.status());
          alloc += r->time_avg_alloc;
          placed += static_cast<double>(r->placed_at_once);
          late += static_cast<double>(r->placed_late);
          gave_up += static_cast<double>(r->gave_up);
          pend += static_cast<double>(r->pending_end);
          max_pend += static_cast<double>(r->max_pending);
          avg += r->avg_pending;
        }
        const double n = static_cast<double>(runs.size());
        rows.push_back({name, fmt::format("{:.2f}", alloc / n), fmt::format("{:.1f}", placed / n),
                        fmt::format("{:.1f}", late / n), fmt::format("{:.1f}", gave_up / n),
                        fmt::format("{:.1f}", pend / n), fmt::format("{:.1f}", max_pend / n),
                        fmt::format("{:.2f}", avg / n)});
      }
      PrintTable(out, rows);
    } else if (o.mode == "lending") {
      // Side by side: the same trace and projects without and with lending.
      std::vector<std::vector<std::string>> rows;
      rows.push_back({"LENDING", "POOL-GPUS", "IDLE-GPU-H", "LENT-GPU-H", "LENT%IDLE", "BORROWERS-DONE", "GAVE-UP",
                      "RECLAIMS", "OWNERS-DELAYED", "DELAY-P50-S", "DELAY-P99-S"});
      for (const bool lend : {false, true}) {
        const sim::LendingConfig config{o.projects, o.borrow_share, o.idle_after, o.grace, o.speedup, lend};
        std::vector<absl::StatusOr<sim::LendingResult>> runs(seeds->size());
        ParallelFor(seeds->size(), jobs, [&](size_t i) { runs[i] = sim::RunLending(*pods, (*seeds)[i], config); });
        double pool = 0, idle = 0, lent = 0, done = 0, gave_up = 0, reclaims = 0, delayed = 0, p50 = 0, p99 = 0;
        for (const auto& r : runs) {
          if (!r.ok()) return Fail(err, r.status());
          pool += static_cast<double>(r->pool_gpus);
          idle += r->idle_gpu_hours;
          lent += r->lent_gpu_hours;
          done += static_cast<double>(r->borrowers_completed);
          gave_up += static_cast<double>(r->borrowers_gave_up);
          reclaims += static_cast<double>(r->reclaims);
          delayed += static_cast<double>(r->owners_delayed);
          p50 += r->delay_p50_s;
          p99 += r->delay_p99_s;
        }
        const double n = static_cast<double>(runs.size());
        auto f1 = [n](double v) { return fmt::format("{:.1f}", v / n); };
        rows.push_back({lend ? "on" : "off", f1(pool), f1(idle), f1(lent), Pct(idle > 0 ? 100 * lent / idle : 0), f1(done),
                        f1(gave_up), f1(reclaims), f1(delayed), f1(p50), f1(p99)});
      }
      PrintTable(out, rows);
    } else if (o.mode == "mig-churn") {
      // Side by side: the same replay without and with defragmentation.
      std::vector<std::vector<std::string>> rows;
      rows.push_back({"DEFRAG", "MODEL", "GPU-PODS", "ACCEPTED", "FAILED", "FAILED-FRAGMENTED",
                      "OF-THEM-MIG", "DEFRAGS", "INSTANCES-REMOVED", "RECOVERED", "TIME-AVG-ALLOC"});
      for (const bool defrag : {false, true}) {
        std::vector<absl::StatusOr<sim::MigChurnResult>> runs(seeds->size());
        ParallelFor(seeds->size(), jobs, [&](size_t i) {
          runs[i] = sim::RunMigChurn(*nodes, *pods, *mig_model, (*seeds)[i], o.speedup, defrag);
        });
        double req = 0, acc = 0, failed = 0, frag = 0, frag_mig = 0, defrags = 0, removed = 0, recovered = 0, alloc = 0;
        for (const auto& r : runs) {
          if (!r.ok()) return Fail(err, r.status());
          req += static_cast<double>(r->requests);
          acc += static_cast<double>(r->accepted);
          failed += static_cast<double>(r->failed);
          frag += static_cast<double>(r->failed_fragmented);
          frag_mig += static_cast<double>(r->failed_fragmented_mig);
          defrags += static_cast<double>(r->defrags);
          removed += static_cast<double>(r->instances_removed);
          recovered += static_cast<double>(r->recovered);
          alloc += r->time_avg_alloc;
        }
        const double n = static_cast<double>(runs.size());
        auto f1 = [n](double v) { return fmt::format("{:.1f}", v / n); };
        rows.push_back({defrag ? "on" : "off", std::string(mig_model->name), f1(req), f1(acc), f1(failed), f1(frag),
                        f1(frag_mig), f1(defrags), f1(removed), f1(recovered), fmt::format("{:.2f}", alloc / n)});
      }
      PrintTable(out, rows);
    } else {
      std::vector<std::vector<std::string>> rows;
      rows.push_back({"POLICY", "MODEL", "PODS", "ACCEPTED", "ACCEPTED-GPU", "GPUS-USED",
                      "GPU-UTIL-OF-USED", "FAILED"});
      for (const std::string& name : *policies) {
        std::vector<sim::MigResult> runs(seeds->size());
        ParallelFor(seeds->size(), jobs, [&](size_t i) {
          runs[i] = sim::RunMig(*nodes, *pods, *mig_model, (*seeds)[i], o.tune);
        });
        double pods_n = 0, acc = 0, acc_gpu = 0, used = 0, util = 0, failed = 0;
        for (const sim::MigResult& r : runs) {
          pods_n += static_cast<double>(r.pods);
          acc += static_cast<double>(r.accepted);
          acc_gpu += r.accepted_gpus;
          used += static_cast<double>(r.gpus_used);
          util += r.used_gpu_util;
          failed += static_cast<double>(r.pods - r.accepted);
        }
        const double n = static_cast<double>(runs.size());
        rows.push_back({name, std::string(mig_model->name), fmt::format("{:.1f}", pods_n / n),
                        fmt::format("{:.1f}", acc / n), fmt::format("{:.1f}", acc_gpu / n),
                        fmt::format("{:.1f}", used / n), fmt::format("{:.2f}", util / n),
                        fmt::format("{:.1f}", failed / n)});
      }
      PrintTable(out, rows);
    }
    out << "\n";
  }
  return 0;
}

}  // namespace gpuaas::cli
