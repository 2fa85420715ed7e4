// Prometheus remote write 1.0 out of gpuaas: every reading the series store keeps is also sent,
// labelled with what only gpuaas knows, to one or more receivers (Prometheus with
// --web.enable-remote-write-receiver, VictoriaMetrics), so that the operator's own TSDB holds
// the history and a Grafana panel can chart a project's or a pool's GPUs.
//
//   Hub ──stored samples──► RemoteWrite (labels per series) ──► one RemoteWriteQueue per receiver
//                                                                 └─ sender thread: batch, encode, POST
//
// The wire format (telemetry/prompb/remote.proto): a WriteRequest, protobuf, compressed as one
// snappy block, with the four headers of the specification. Series labels are sorted by name and
// empty values are dropped. A series' samples leave in the order they were stored.
//
// Each receiver has a bounded queue: samples that arrive while it is full are dropped and
// counted. A batch goes out when it holds max_samples_per_send samples (at most half the capacity) or its oldest sample has
// waited batch_deadline. A batch that gets no answer, a 5xx or a 429 is sent again after a
// backoff that doubles from min_backoff to max_backoff (a 429's Retry-After, when longer), until
// it is accepted or the queue is stopped; any other 4xx (400: a sample the receiver refuses, such
// as Prometheus' "out of order sample" for a batch a timed-out try had in fact stored) drops the
// batch, counted as failed. Nothing here does I/O: the HTTP POST is handed in (exe/ wires it).
#ifndef GPUAAS_TELEMETRY_REMOTE_WRITE_H_
#define GPUAAS_TELEMETRY_REMOTE_WRITE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "telemetry/series.h"

namespace gpuaas::telemetry {

class Hub;
struct InstanceInfo;

// Labels as written: sorted by name, no empty value.
using LabelSet = std::vector<std::pair<std::string, std::string>>;

// Who holds a device, for its series' `project`, `pool` and `workload` labels (empty: nobody).
struct DeviceOwner {
  std::string project;
  std::string pool;
  std::string workload;
  friend bool operator==(const DeviceOwner&, const DeviceOwner&) = default;
};

// What the inventory and the pools say of one GPU (controller/telemetry_labels.h keeps these).
struct GpuLabels {
  std::string cluster;
  std::string node;
  std::string model;
  DeviceOwner whole;  // a pool holding the whole GPU, and the workload running on it
  struct Instance {
    int64_t start = -1;  // placement start, in memory slices
    std::string uuid;    // "MIG-…", once it exists
    std::string profile;
    DeviceOwner owner;
    friend bool operator==(const Instance&, const Instance&) = default;
  };
  std::vector<Instance> instances;  // its MIG instances
  friend bool operator==(const GpuLabels&, const GpuLabels&) = default;
};

// GPU UUID -> its labels, with a version per GPU, so that a pool change relabels the series of
// that pool's GPUs only. Thread-safe; reading a version takes no lock.
class DeviceDirectory {
 public:
  // Replaces what is known of one GPU (UUIDs compare in any letter case); a change bumps its version.
  void Set(std::string_view gpu_uuid, GpuLabels labels);
  void Remove(std::string_view gpu_uuid);
  // The slot of a GPU, made on first use; stable for the directory's life.
  uint32_t Slot(std::string_view gpu_uuid);
  uint64_t Version(uint32_t slot) const { return versions_[slot].load(std::memory_order_acquire); }
  std::shared_ptr<const GpuLabels> Get(uint32_t slot) const;

 private:
  uint32_t SlotLocked(const std::string& lower) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, uint32_t> slots_;              // lower-case UUID -> slot
  std::vector<std::shared_ptr<const GpuLabels>> labels_;          // by slot
  std::deque<std::atomic<uint64_t>> versions_;                    // by slot; a deque keeps addresses
};

// The labels of the series on `device` ("GPU-…" or "GPU-…/<GPU instance id>") but their name:
// `gpu`, and where known `cluster`, `node`, `model`, `mig_instance`, `mig_profile` (`instance`:
// the hub's view of that MIG instance), and `project`, `pool`, `workload` while the device
// belongs to one. A GPU-level series of a MIG GPU names no pool (its instances may belong to
// several). Every series of a device shares them; its name, `__name__` = "gpuaas_" + the series
// name (telemetry/fields.h), is put first when it is written (MetricName).
LabelSet DeviceLabels(std::string_view device, const GpuLabels* gpu, const InstanceInfo* instance);
std::string MetricName(Field field);

// One sample queued for a receiver: its series is the device's labels and the field's name.
struct QueuedSample {
  std::shared_ptr<const LabelSet> labels;  // DeviceLabels
  Field field = Field::kPowerW;
  int64_t t_ms = 0;
  double value = 0;
};

// The body of one POST: a WriteRequest of these samples (grouped by series, each series' samples
// in the order given), serialized and compressed as one snappy block.
std::string EncodeWriteRequest(std::span<const QueuedSample> samples);
// The inverse, for tests and tools: every series with its samples, in the order encoded.
struct DecodedSeries {
  LabelSet labels;
  std::vector<std::pair<int64_t, double>> samples;
};
absl::StatusOr<std::vector<DecodedSeries>> DecodeWriteRequest(std::string_view body);

// The headers every remote-write POST carries (the specification's four).
std::vector<std::pair<std::string, std::string>> RemoteWriteHeaders(std::string_view user_agent);

// What a POST came back with: an HTTP status, or 0 and the reason when no answer came.
struct PostResult {
  int status = 0;
  std::string error;  // transport error, or the start of the receiver's answer to a refusal
  std::optional<std::chrono::seconds> retry_after;  // a 429's or 503's Retry-After
};
// POSTs one body (the headers are the caller's: RemoteWriteHeaders plus authorization). Must
// return within its own timeout.
using PostFn = std::function<PostResult(const std::string& body)>;

struct RemoteWriteOptions {
  std::string url;                         // the receiver, as named in metrics and logs
  int shards = 4;                          // queues sending at once, a series always in the same one
  size_t capacity = 500'000;               // samples held at most, in flight included (40 bytes each); more are dropped
  size_t max_samples_per_send = 2'000;     // samples in one POST (at most half the capacity)
  std::chrono::milliseconds batch_deadline{5'000};
  std::chrono::milliseconds min_backoff{30};
  std::chrono::milliseconds max_backoff{5'000};
};

// The sender's state, as Prometheus' own remote storage exposes it.
struct RemoteWriteStats {
  int64_t samples_total = 0;    // accepted by the receiver
  int64_t samples_failed = 0;   // refused (4xx other than 429): dropped
  int64_t samples_retried = 0;  // sent again after no answer, a 5xx or a 429
  int64_t samples_dropped = 0;  // not queued: the queue was full
  int64_t samples_pending = 0;  // queued or in flight
  int64_t highest_enqueued_ms = 0;
  int64_t highest_sent_ms = 0;
  std::string last_error;
};

// One receiver: a bounded queue and the thread that sends it. Thread-safe.
class RemoteWriteQueue {
 public:
  RemoteWriteQueue(RemoteWriteOptions options, PostFn post);
  ~RemoteWriteQueue();  // Stop()
  RemoteWriteQueue(const RemoteWriteQueue&) = delete;
  RemoteWriteQueue& operator=(const RemoteWriteQueue&) = delete;

  void Start();
  // Sends what is queued (each batch tried once more at most), then ends the thread.
  void Stop();
  // Queues samples in order; those that do not fit are dropped and counted. The second form
  // moves them in (no reference counting per sample).
  void Enqueue(std::span<const QueuedSample> samples);
  void Enqueue(std::vector<QueuedSample>&& samples);
  RemoteWriteStats stats() const;
  const RemoteWriteOptions& options() const { return options_; }
  // Until nothing is pending or `timeout` passed; true when nothing is pending (for tests and
  // a clean shutdown).
  bool WaitSent(std::chrono::milliseconds timeout) const;

 private:
  template <typename Take>  // Take(i) hands out sample i, copied or moved
  void Append(size_t n, const Take& take);
  void Run();
  // Sends one batch until the receiver accepts or refuses it (true), or until a stop, after which
  // it is tried once more (false when that fails too).
  bool Send(std::vector<QueuedSample> batch);

  const RemoteWriteOptions options_;
  const PostFn post_;
  // Samples in a full batch: max_samples_per_send, or half the capacity when that is smaller,
  // so that a small queue sends before it fills rather than at the batch's deadline.
  const size_t batch_;
  mutable std::mutex mu_;
  mutable std::condition_variable wake_, idle_;
  std::deque<QueuedSample> queue_;
  std::chrono::steady_clock::time_point oldest_since_{};
  size_t in_flight_ = 0;
  bool stopping_ = false;
  RemoteWriteStats stats_;
  int64_t refusals_ = 0;
  std::thread thread_;
};

// One receiver: `shards` queues, each with its own thread and connection and 1/shards of the
// capacity, sending at once (Prometheus shards its queues alike); a series always goes to the
// same shard, so its samples stay in order. Figures are summed over the shards (the highest
// timestamps are the shards' highest).
class RemoteWriteReceiver {
 public:
  // `post` makes each shard's POST (each is called from one thread only).
  RemoteWriteReceiver(const RemoteWriteOptions& options, const std::function<PostFn()>& post);
  const RemoteWriteOptions& options() const { return options_; }
  size_t shards() const { return shards_.size(); }
  RemoteWriteQueue& shard(size_t i) { return *shards_[i]; }
  void Start();
  void Stop();
  RemoteWriteStats stats() const;
  bool WaitSent(std::chrono::milliseconds timeout) const;

 private:
  RemoteWriteOptions options_;
  std::vector<std::unique_ptr<RemoteWriteQueue>> shards_;
};

// The fan-out: labels each stored sample once and queues it for every receiver. The hub calls
// Take after each ingest (Hub::SetSink). Thread-safe.
class RemoteWrite {
 public:
  RemoteWrite(const Hub& hub, DeviceDirectory& directory) : hub_(hub), directory_(directory) {}
  // Before Start; every receiver has the first one's number of shards.
  RemoteWriteReceiver& Add(RemoteWriteOptions options, const std::function<PostFn()>& post);
  void Start();
  void Stop();
  void Take(std::span<const Sample> stored);
  const std::vector<std::unique_ptr<RemoteWriteReceiver>>& receivers() const { return receivers_; }
  // The sender's metrics, Prometheus text, one series per receiver (`url` label).
  void AppendMetrics(std::string& out) const;

 private:
  // A series' device labels, shared by the device's series and relabelled when the directory's
  // version of its GPU moves.
  struct Labelled {
    uint32_t slot = 0;
    uint64_t version = 0;
    Field field = Field::kPowerW;
    std::shared_ptr<const LabelSet> labels;
  };
  const Labelled& LabelsOf(SeriesId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Hub& hub_;
  DeviceDirectory& directory_;
  std::vector<std::unique_ptr<RemoteWriteReceiver>> receivers_;  // set before Start
  std::mutex mu_;
  std::vector<Labelled> labelled_ ABSL_GUARDED_BY(mu_);  // by series id
  struct DeviceEntry {
    uint64_t version = 0;
    std::shared_ptr<const LabelSet> labels;
  };
  absl::flat_hash_map<std::string, DeviceEntry> devices_ ABSL_GUARDED_BY(mu_);  // device -> its labels
  std::vector<std::vector<QueuedSample>> scratch_ ABSL_GUARDED_BY(mu_);  // by shard
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_REMOTE_WRITE_H_
