#include "sim/lending.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <queue>
#include <tuple>

#include "fmt/format.h"

namespace gpuaas::sim {
namespace {

// FNV-1a of a name and a seed: the same split on every machine.
uint64_t Hash(const std::string& s, uint64_t seed) {
  uint64_t h = 14695981039346656037ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

enum class Ev { kOwnerEnd, kBorrowerEnd, kDeadline, kOwnerArrive, kBorrowerArrive, kRetry, kGiveUp };

struct Event {
  double time;
  int64_t seq;
  Ev kind;
  int pod;
  int64_t run;  // the borrower run an end or deadline belongs to
  // At one moment, ends before arrivals (the pools are sized so), then in the order pushed.
  bool operator>(const Event& o) const { return std::tie(time, kind, seq) > std::tie(o.time, o.kind, o.seq); }
};

struct Gpu {
  int pool = 0;
  double idle_since = 0;  // the last moment a run of the pool's project used it
  int owner = -1;         // the project's pod on it
  int borrower = -1;      // the borrower on it
  int held_for = -1;      // the project's pod it comes back to
};

struct Pod {
  bool borrower = false;
  int project = 0;
  int need = 1;
  double arrival = 0;
  double duration = 0;
  double remaining = 0;  // a borrower's work left
  bool running = false;
  bool done = false;
  bool told = false;
  int64_t run = 0;
  double run_start = 0;
  std::vector<int> gpus;
  int waiting_for = 0;  // the project's pod: lent GPUs still to come back
};

class World {
 public:
  World(std::vector<Pod> pods, int projects, const LendingConfig& c) : pods_(std::move(pods)), c_(c) {
    // Each project's pool: as many GPUs as its own work ever runs at once.
    std::vector<std::vector<std::pair<double, int>>> steps(static_cast<size_t>(projects));
    for (const Pod& p : pods_) {
      if (p.borrower) continue;
      steps[static_cast<size_t>(p.project)].push_back({p.arrival, p.need});
      steps[static_cast<size_t>(p.project)].push_back({p.arrival + p.duration, -p.need});
    }
    pool_gpus_.assign(static_cast<size_t>(projects), {});
    for (int pr = 0; pr < projects; ++pr) {
      auto& s = steps[static_cast<size_t>(pr)];
      std::sort(s.begin(), s.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first < b.first : a.second < b.second;  // ends first
      });
      int now = 0, peak = 0;
      for (const auto& [t, d] : s) peak = std::max(peak, now += d);
      for (int g = 0; g < peak; ++g) {
        pool_gpus_[static_cast<size_t>(pr)].push_back(static_cast<int>(gpus_.size()));
        gpus_.push_back({pr, 0, -1, -1, -1});
      }
    }
  }

  LendingResult Run() {
    double first = INFINITY, last = 0;
    for (size_t i = 0; i < pods_.size(); ++i) {
      const Pod& p = pods_[i];
      Push(p.arrival, p.borrower ? Ev::kBorrowerArrive : Ev::kOwnerArrive, static_cast<int>(i));
      if (p.borrower) {
        ++out_.borrower_pods;
        Push(p.arrival + p.duration, Ev::kGiveUp, static_cast<int>(i));
      } else {
        ++out_.owner_pods;
        out_.owner_gpu_hours += p.need * p.duration / 3600.0;
        first = std::min(first, p.arrival);
        last = std::max(last, p.arrival + p.duration);
      }
    }
    for (Gpu& g : gpus_) g.idle_since = first;
    first_ = first;
    last_ = last;
    if (c_.lending && first < INFINITY) Push(first + static_cast<double>(c_.idle_after), Ev::kRetry, 0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      now_ = e.time;
      Pod& p = pods_[static_cast<size_t>(e.pod)];
      switch (e.kind) {
        case Ev::kOwnerArrive: OwnerArrives(e.pod); break;
        case Ev::kOwnerEnd: OwnerEnds(e.pod); break;
        case Ev::kBorrowerArrive: queue_.push_back(e.pod); break;
        case Ev::kBorrowerEnd:
          if (p.running && p.run == e.run) BorrowerLeaves(e.pod, true);
          break;
        case Ev::kDeadline:
          if (p.running && p.run == e.run) BorrowerLeaves(e.pod, false);
          break;
        case Ev::kGiveUp:
          if (!p.running && !p.done) {
            p.done = true;
            ++out_.borrowers_gave_up;
            std::erase(queue_, e.pod);
          }
          break;
        case Ev::kRetry: break;
      }
      Lend();
    }
    for (const auto& pool : pool_gpus_) out_.pool_gpus += static_cast<int64_t>(pool.size());
    out_.pool_gpu_hours = static_cast<double>(out_.pool_gpus) * std::max(0.0, last - first) / 3600.0;
    out_.idle_gpu_hours = out_.pool_gpu_hours - out_.owner_gpu_hours;
    std::sort(delays_.begin(), delays_.end());
    if (!delays_.empty()) {
      out_.owners_delayed = static_cast<int64_t>(delays_.size());
      out_.delay_p50_s = delays_[delays_.size() / 2];
      out_.delay_p99_s = delays_[std::min(delays_.size() - 1, static_cast<size_t>(static_cast<double>(delays_.size()) * 0.99))];
      out_.delay_max_s = delays_.back();
    }
    return out_;
  }

 private:
  void Push(double t, Ev kind, int pod, int64_t run = 0) { events_.push({t, seq_++, kind, pod, run}); }

  void StartOwner(int i, const std::vector<int>& gpus) {
    Pod& p = pods_[static_cast<size_t>(i)];
    for (int g : gpus) {
      gpus_[static_cast<size_t>(g)].owner = i;
      gpus_[static_cast<size_t>(g)].held_for = -1;
    }
    p.gpus = gpus;
    p.running = true;
    if (now_ > p.arrival) delays_.push_back(now_ - p.arrival);
    Push(now_ + p.duration, Ev::kOwnerEnd, i);
  }

  void OwnerArrives(int i) {
    Pod& p = pods_[static_cast<size_t>(i)];
    std::vector<int> free, lent_to;
    for (int g : pool_gpus_[static_cast<size_t>(p.project)]) {
      const Gpu& gpu = gpus_[static_cast<size_t>(g)];
      if (gpu.owner == -1 && gpu.borrower == -1 && gpu.held_for == -1) free.push_back(g);
    }
    if (static_cast<int>(free.size()) >= p.need) {
      free.resize(static_cast<size_t>(p.need));
      StartOwner(i, free);
      return;
    }
    // Take lent GPUs back: every borrower on as many as are missing is told at once.
    int missing = p.need - static_cast<int>(free.size());
    for (int g : free) gpus_[static_cast<size_t>(g)].held_for = i;
    p.gpus = free;
    for (int g : pool_gpus_[static_cast<size_t>(p.project)]) {
      if (missing <= 0) break;
      Gpu& gpu = gpus_[static_cast<size_t>(g)];
      if (gpu.borrower == -1 || gpu.held_for != -1) continue;
      gpu.held_for = i;
      ++p.waiting_for;
      --missing;
      Pod& b = pods_[static_cast<size_t>(gpu.borrower)];
      if (!b.told) {
        b.told = true;
        ++out_.reclaims;
        Push(now_ + static_cast<double>(c_.grace), Ev::kDeadline, gpu.borrower, b.run);
      }
    }
    // A pool sized at the peak lacks GPUs only when reclaims shifted runs; then the pod waits
    // for the next GPU its project frees.
    if (missing > 0) waiting_owners_[p.project].push_back(i);
    p.waiting_for += std::max(0, missing);
  }

  // A GPU of pool `project` is free: the first of its project's waiting pods that wants it gets it.
  bool GiveToWaiting(int g) {
    Gpu& gpu = gpus_[static_cast<size_t>(g)];
    int to = gpu.held_for;
    auto waiting = waiting_owners_.find(gpu.pool);
    if (to == -1 && waiting != waiting_owners_.end()) {
      to = waiting->second.front();
      gpu.held_for = to;
    }
    if (to == -1) return false;
    Pod& p = pods_[static_cast<size_t>(to)];
    p.gpus.push_back(g);
    if (--p.waiting_for == 0) {
      if (waiting != waiting_owners_.end()) {
        std::erase(waiting->second, to);
        if (waiting->second.empty()) waiting_owners_.erase(waiting);
      }
      StartOwner(to, p.gpus);
    }
    return true;
  }

  void OwnerEnds(int i) {
    Pod& p = pods_[static_cast<size_t>(i)];
    p.running = false;
    p.done = true;
    for (int g : p.gpus) {
      Gpu& gpu = gpus_[static_cast<size_t>(g)];
      gpu.owner = -1;
      gpu.idle_since = now_;
      if (!GiveToWaiting(g) && c_.lending) Push(now_ + static_cast<double>(c_.idle_after), Ev::kRetry, i);
    }
  }

  void BorrowerLeaves(int i, bool finished) {
    Pod& b = pods_[static_cast<size_t>(i)];
    // Lent time counts within the span the pools' idle time is measured over.
    const double from = std::max(b.run_start, first_), to = std::min(now_, last_);
    if (to > from) out_.lent_gpu_hours += static_cast<double>(b.gpus.size()) * (to - from) / 3600.0;
    b.remaining -= now_ - b.run_start;
    b.running = false;
    b.told = false;
    for (int g : b.gpus) {
      gpus_[static_cast<size_t>(g)].borrower = -1;
      GiveToWaiting(g);
    }
    b.gpus.clear();
    if (finished || b.remaining <= 1e-9) {
      b.done = true;
      ++out_.borrowers_completed;
    } else if (now_ >= b.arrival + b.duration) {
      b.done = true;  // reclaimed after its patience ran out: it does not wait again
      ++out_.borrowers_gave_up;
    } else {
      queue_.push_back(i);  // again, with the work it had left
    }
  }

  bool Lendable(const Gpu& g) const {
    return g.owner == -1 && g.borrower == -1 && g.held_for == -1 &&
           now_ - g.idle_since >= static_cast<double>(c_.idle_after) && waiting_owners_.count(g.pool) == 0;
  }

  void Lend() {
    if (!c_.lending || queue_.empty()) return;
    for (auto it = queue_.begin(); it != queue_.end();) {
      Pod& b = pods_[static_cast<size_t>(*it)];
      // The pool of another project with room for all of it and the fewest lendable GPUs.
      int best = -1;
      size_t best_n = 0;
      for (size_t pr = 0; pr < pool_gpus_.size(); ++pr) {
        if (static_cast<int>(pr) == b.project) continue;
        size_t n = 0;
        for (int g : pool_gpus_[pr]) n += Lendable(gpus_[static_cast<size_t>(g)]) ? 1 : 0;
        if (static_cast<int>(n) >= b.need && (best == -1 || n < best_n)) {
          best = static_cast<int>(pr);
          best_n = n;
        }
      }
      if (best == -1) {
        ++it;
        continue;
      }
      for (int g : pool_gpus_[static_cast<size_t>(best)]) {
        if (static_cast<int>(b.gpus.size()) == b.need) break;
        if (Lendable(gpus_[static_cast<size_t>(g)])) {
          gpus_[static_cast<size_t>(g)].borrower = *it;
          b.gpus.push_back(g);
        }
      }
      b.running = true;
      b.run_start = now_;
      ++b.run;
      ++out_.borrowers_started;
      Push(now_ + b.remaining, Ev::kBorrowerEnd, *it, b.run);
      it = queue_.erase(it);
    }
  }

  std::vector<Pod> pods_;
  const LendingConfig c_;
  std::vector<Gpu> gpus_;
  std::vector<std::vector<int>> pool_gpus_;  // by project
  std::map<int, std::vector<int>> waiting_owners_;  // by project; no empty entries
  std::deque<int> queue_;                    // waiting borrowers, oldest first
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  int64_t seq_ = 0;
  double now_ = 0;
  double first_ = 0, last_ = 0;  // the span of the projects' own work
  std::vector<double> delays_;
  LendingResult out_;
};

}  // namespace

absl::StatusOr<LendingResult> RunLending(const std::vector<TracePod>& trace, uint64_t seed, const LendingConfig& c) {
  if (c.projects < 2 || c.projects > 1000) return absl::InvalidArgumentError("projects: must be between 2 and 1000");
  if (!(c.borrower_share >= 0 && c.borrower_share <= 1)) {
    return absl::InvalidArgumentError("borrower share: must be between 0 and 1");
  }
  if (c.idle_after < 0 || c.idle_after > 86400 || c.grace < 0 || c.grace > 86400) {
    return absl::InvalidArgumentError("idle-after and grace: must be between 0 and 86400 seconds");
  }
  if (!(c.speedup >= 1 && c.speedup <= 1e6)) return absl::InvalidArgumentError("speedup: must be between 1 and 1000000");
  std::vector<Pod> pods;
  for (const TracePod& t : trace) {
    if (t.creation_time < 0 || t.deletion_time < 0) {
      return absl::InvalidArgumentError(
          fmt::format("pod {}: lending mode needs creation_time and deletion_time on every pod", t.name));
    }
    if (t.shape.num_gpu <= 0 || t.deletion_time <= t.creation_time) continue;  // no GPU, or no time
    Pod p;
    p.borrower = static_cast<double>(Hash(t.name, seed) % 1000000) / 1e6 < c.borrower_share;
    p.project = static_cast<int>(Hash(t.name, seed ^ 0x9e3779b97f4a7c15ull) % static_cast<uint64_t>(c.projects));
    p.need = std::max(1, t.shape.num_gpu);
    p.arrival = static_cast<double>(t.creation_time) / c.speedup;
    p.duration = static_cast<double>(t.deletion_time - t.creation_time);
    p.remaining = p.duration;
    pods.push_back(std::move(p));
  }
  World w(std::move(pods), c.projects, c);
  return w.Run();
}

}  // namespace gpuaas::sim
