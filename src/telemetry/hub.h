// The telemetry hub: where readings arrive (agent JSON reports, dcgm-exporter text pushed or
// scraped), are matched to GPUs and MIG instances by UUID, stored in the series store and fed to
// the health rules. The API and the telemetry controller hold one Hub. Thread-safe.
//
// Matching. dcgm-exporter's UUID label is always the parent GPU's; a MIG row adds GPU_I_ID and
// GPU_I_PROFILE. A reading of a per-instance field on a MIG row goes to the instance
// ("GPU-…/<gi>"); a GPU-level field (power, energy, temperature, ECC…) repeats on every MIG row
// and is stored once for the GPU, never summed. DCGM's blank sentinels are dropped. Once the
// inventory is known (SetKnownGpus), readings of other GPUs are counted as unmatched and dropped:
// made-up UUIDs create no series and no health state. A GPU is one GPU whatever the letter case
// of its UUID: readings take the inventory's spelling (with no inventory yet, the first spelling
// seen), so one GPU never keeps two health states or two series. A text body is checked whole before any of
// it is applied (syntax, label bounds, timestamps at most kMaxAheadMs ahead of the server).
#ifndef GPUAAS_TELEMETRY_HUB_H_
#define GPUAAS_TELEMETRY_HUB_H_

#include <cstdint>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "telemetry/health.h"
#include "telemetry/history.h"
#include "telemetry/prom_text.h"
#include "telemetry/report.h"
#include "telemetry/series.h"

namespace gpuaas::telemetry {

// Asked for each GPU a body names (once per GPU) before any of the body applies: a non-OK
// answer refuses the whole body with that status (who may push for which GPU).
using GpuAdmission = std::function<absl::Status(std::string_view gpu_uuid)>;

// Told of the samples each ingest stored, in the order stored (telemetry/remote_write.h).
using SampleSink = std::function<void(std::span<const Sample> stored)>;

// How far ahead of the server's clock a reading's timestamp may be.
inline constexpr int64_t kMaxAheadMs = 5 * 60 * 1000;
inline constexpr size_t kMaxUnmatchedListed = 100;

struct IngestResult {
  int64_t samples = 0;         // readings seen
  int64_t stored = 0;          // appended to series
  int64_t blank = 0;           // DCGM blank sentinels dropped
  int64_t ignored = 0;         // metrics gpuaas does not keep
  int64_t xid_events = 0;
  int64_t unmatched = 0;       // readings of GPUs the inventory does not know: dropped
  std::vector<std::string> unmatched_gpus;  // those GPUs' UUIDs, the first kMaxUnmatchedListed
};

// What the hub knows of a MIG instance, learned from reports and dcgm-exporter labels.
struct InstanceInfo {
  int gi = 0;
  std::string profile;
  int start = -1;  // -1 when only dcgm-exporter labels were seen
  std::string uuid;
};

// A device whose utilization counts, weighted by the share of a GPU it is (1 for a whole GPU,
// compute slices / 7 for a MIG instance).
struct DeviceRef {
  std::string gpu_uuid;
  int gi = -1;  // MIG GPU instance id; -1 for a whole GPU; -2 for an instance without readings
  double weight = 1;
  // When the device counted (a workload's run on it), unix seconds; steps outside are skipped.
  int64_t from_s = std::numeric_limits<int64_t>::min();
  int64_t to_s = std::numeric_limits<int64_t>::max();
};

struct UtilizationPoint {
  int64_t t = 0;
  double allocated_gpus = 0;  // Σ weight of the devices
  double used_gpus = 0;       // Σ weight × SM activity (devices with data)
  double covered_gpus = 0;    // Σ weight of the devices with data in this step
  double utilization() const { return covered_gpus > 0 ? used_gpus / covered_gpus : 0; }
};

class Hub {
 public:
  explicit Hub(SeriesLimits limits = {});

  // `simulated`: from the server's own simulation (demo), which yields to real sources: GPUs any
  // other report or scrape has named are left out of simulated reports.
  // `reporter`: who sent it (the pushing token's user, a scrape's URL; with the report's own
  // agent id): the health rules read a GPU's counters against one reporter's history
  // (HealthTracker::Observe). Empty: one reporter.
  absl::StatusOr<IngestResult> IngestReport(const NodeReport& report, int64_t now_ms, bool simulated = false,
                                            const GpuAdmission& admit = nullptr, std::string_view reporter = "");
  // dcgm-exporter text. Malformed text is refused whole (InvalidArgument with the line) and
  // changes nothing.
  absl::StatusOr<IngestResult> IngestText(std::string_view text, int64_t now_ms, const GpuAdmission& admit = nullptr,
                                          std::string_view reporter = "");
  // Counter readings set aside because another reporter's were followed for their GPU.
  int64_t second_reporter_readings() const;

  // The GPUs the inventory knows (for matching); replaced as a whole.
  void SetKnownGpus(std::set<std::string> uuids);

  // The GPU instance id of a MIG device, from its GPU and placement start or its MIG UUID.
  std::optional<int> FindInstance(std::string_view gpu_uuid, int start, std::string_view mig_uuid) const;
  std::vector<InstanceInfo> Instances(std::string_view gpu_uuid) const;

  // Buckets of one series (SeriesStore::Query), with the steps that start before the hot window
  // read from the history when there is one (telemetry/history.h); Unavailable, with the
  // reason, when the history does not answer.
  absl::StatusOr<std::vector<Bucket>> Query(std::string_view device, Field field, int64_t from, int64_t to,
                                            int64_t step, int64_t now) const;
  // Utilization of a set of devices per step: SM activity (DCGM_FI_PROF_SM_ACTIVE), else the
  // graphics-engine activity, else GPU utilization / 100 for whole GPUs. Read through Query.
  absl::StatusOr<std::vector<UtilizationPoint>> Utilization(const std::vector<DeviceRef>& devices, int64_t from,
                                                            int64_t to, int64_t step, int64_t now) const;

  GpuVerdict Verdict(std::string_view gpu_uuid) const;
  // See HealthTracker::Restore.
  void RestoreHealth(std::string_view gpu_uuid, std::optional<ConditionVerdict> memory_errors,
                     std::optional<ConditionVerdict> reset_required, int64_t t_ms);
  std::set<std::string> TakeChangedHealth();
  // Called after an ingest that may have changed a verdict (outside the hub's lock; it should
  // be quick, such as adding a key to a work queue). Set once, before the first ingest.
  // Null unsets it; once that returns the old one is not called again.
  void OnHealthChange(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(callback_mu_);
    on_health_change_ = std::move(fn);
  }
  std::vector<Alert> Alerts(bool active_only) const;

  // Set once, before the first ingest (null: none). Each ingest's stored samples reach the sink
  // in the order ingests stored them, so that a series' samples leave in time order.
  void SetSink(SampleSink sink) { sink_ = std::move(sink); }
  // Set once, before serving (null: none): where ranges older than the hot window are read.
  void SetHistory(std::shared_ptr<const History> history) { history_ = std::move(history); }

  SeriesStore& series() { return series_; }
  const SeriesStore& series() const { return series_; }
  int64_t samples_total() const;
  // Whether a report or scrape other than the simulation has named this GPU.
  bool HasRealSource(std::string_view gpu_uuid) const;

 private:
  std::mutex callback_mu_;  // held while on_health_change_ runs (it only queues a key)
  std::function<void()> on_health_change_ ABSL_GUARDED_BY(callback_mu_);
  void HealthChanged() {
    std::lock_guard<std::mutex> lock(callback_mu_);
    if (on_health_change_) on_health_change_();
  }
  // Kept small: one is read per sample.
  struct Resolved {
    HealthTracker::GpuState* gpu = nullptr;  // its GPU (also for matching against the inventory)
    bool health = false;                     // a field the health rules read
    SeriesId id = 0;
    bool has_id = false;
    bool keep = false;
    bool unknown = false;  // a GPU the inventory does not know: dropped
    Field field = Field::kPowerW;
    int gi = -1;
  };
  // A 128-bit digest of a series' text: the cache key. Two independent 64-bit lanes make an
  // accidental collision (two series sharing a key) vanishingly unlikely (~n²/2^129), and looking
  // up 16 bytes is much cheaper than comparing the ~250-byte text of a dcgm-exporter series.
  struct Digest {
    uint64_t a = 0, b = 0;
    friend bool operator==(const Digest&, const Digest&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Digest& d) {
      return H::combine(std::move(h), d.a);
    }
  };
  static Digest DigestOf(std::string_view text);
  // A health reading held back until the whole input has parsed: a refused scrape changes nothing.
  struct HealthReading {
    HealthTracker::GpuState* gpu;
    int gi;
    Field field;
    double value;
    int64_t t_ms;
  };
  struct Batch {
    std::vector<Sample> samples;
    std::vector<HealthReading> health;
    std::vector<const HealthTracker::GpuState*> gpus;  // GPUs named, in order of first sight
    std::set<std::string> unknown;                     // GPUs dropped, unknown to the inventory
  };
  void NoteUnmatched(Batch& batch, IngestResult& res) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The spelling a reading's GPU is kept under: the inventory's (or, before the inventory is
  // known, the first seen) whatever the letter case given; nullopt for a GPU the inventory
  // does not know.
  std::optional<std::string> Spelling(std::string_view uuid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Apply(const Resolved& r, double value, int64_t t_ms, Batch& batch, IngestResult& res)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<double>> DeviceUtil(const DeviceRef& d, int64_t from, int64_t to, int64_t step,
                                                   int64_t now, std::vector<Bucket>& out) const;

  // Stores a batch and tells the sink, both under append_mu_ (only with a sink).
  size_t Store(const std::vector<Sample>& samples);

  SeriesStore series_;
  SampleSink sink_;
  std::shared_ptr<const History> history_;
  std::mutex append_mu_;
  mutable absl::Mutex mu_;
  HealthTracker health_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<int, InstanceInfo>, std::less<>> instances_ ABSL_GUARDED_BY(mu_);
  // Lower-case UUID -> the inventory's spelling; empty until the inventory is known.
  absl::flat_hash_map<std::string, std::string> known_ ABSL_GUARDED_BY(mu_);
  // Before that, lower-case UUID -> the first spelling seen (bounded by the series limits).
  absl::flat_hash_map<std::string, std::string> seen_spellings_ ABSL_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> real_sources_ ABSL_GUARDED_BY(mu_);
  std::set<std::tuple<std::string, int, int, int64_t>> seen_xids_ ABSL_GUARDED_BY(mu_);
  // dcgm-exporter series text -> what it resolved to.
  absl::flat_hash_map<Digest, Resolved> text_cache_ ABSL_GUARDED_BY(mu_);
  int64_t samples_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_HUB_H_
