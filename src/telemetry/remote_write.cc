#include "telemetry/remote_write.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "absl/hash/hash.h"
#include "common/log.h"
#include "common/metrics_text.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "snappy.h"
#include "telemetry/hub.h"
#include "telemetry/prompb/remote.pb.h"

namespace gpuaas::telemetry {

// ---- DeviceDirectory ----

uint32_t DeviceDirectory::SlotLocked(const std::string& lower) {
  if (auto it = slots_.find(lower); it != slots_.end()) return it->second;
  const auto slot = static_cast<uint32_t>(labels_.size());
  slots_.emplace(lower, slot);
  labels_.push_back(nullptr);
  versions_.emplace_back(0);
  return slot;
}

uint32_t DeviceDirectory::Slot(std::string_view gpu_uuid) {
  const std::string lower = ToLower(gpu_uuid);
  std::lock_guard<std::mutex> l(mu_);
  return SlotLocked(lower);
}

void DeviceDirectory::Set(std::string_view gpu_uuid, GpuLabels labels) {
  const std::string lower = ToLower(gpu_uuid);
  std::lock_guard<std::mutex> l(mu_);
  const uint32_t slot = SlotLocked(lower);
  if (labels_[slot] && *labels_[slot] == labels) return;
  labels_[slot] = std::make_shared<const GpuLabels>(std::move(labels));
  versions_[slot].fetch_add(1, std::memory_order_acq_rel);
}

void DeviceDirectory::Remove(std::string_view gpu_uuid) {
  const std::string lower = ToLower(gpu_uuid);
  std::lock_guard<std::mutex> l(mu_);
  auto it = slots_.find(lower);
  if (it == slots_.end() || !labels_[it->second]) return;
  labels_[it->second] = nullptr;
  versions_[it->second].fetch_add(1, std::memory_order_acq_rel);
}

std::shared_ptr<const GpuLabels> DeviceDirectory::Get(uint32_t slot) const {
  std::lock_guard<std::mutex> l(mu_);
  return slot < labels_.size() ? labels_[slot] : nullptr;
}

// ---- labels ----

std::string MetricName(Field field) { return "gpuaas_" + std::string(Info(field).series); }

LabelSet DeviceLabels(std::string_view device, const GpuLabels* gpu, const InstanceInfo* instance) {
  LabelSet out;
  out.reserve(9);
  const size_t slash = device.find('/');
  const std::string_view uuid = device.substr(0, slash);
  const bool mig = slash != std::string_view::npos;
  out.emplace_back("gpu", std::string(uuid));
  const DeviceOwner* owner = nullptr;
  std::string profile = instance ? instance->profile : "";
  if (gpu != nullptr) {
    out.emplace_back("cluster", gpu->cluster);
    out.emplace_back("node", gpu->node);
    out.emplace_back("model", gpu->model);
    if (!mig) {
      owner = &gpu->whole;
    } else if (instance != nullptr) {
      // The inventory's instance: by MIG UUID where both know it, else by placement start.
      const GpuLabels::Instance* match = nullptr;
      for (const GpuLabels::Instance& i : gpu->instances) {
        if (!instance->uuid.empty() && i.uuid == instance->uuid) match = &i;
      }
      for (const GpuLabels::Instance& i : gpu->instances) {
        if (match == nullptr && instance->start >= 0 && i.start == instance->start) match = &i;
      }
      if (match != nullptr) {
        owner = &match->owner;
        if (profile.empty()) profile = match->profile;
      }
    }
  }
  if (mig) {
    out.emplace_back("mig_instance", std::string(device.substr(slash + 1)));
    out.emplace_back("mig_profile", profile);
  }
  if (owner != nullptr) {
    out.emplace_back("project", owner->project);
    out.emplace_back("pool", owner->pool);
    out.emplace_back("workload", owner->workload);
  }
  std::erase_if(out, [](const auto& l) { return l.second.empty(); });
  std::sort(out.begin(), out.end());
  out.shrink_to_fit();
  return out;
}

// ---- encoding ----

std::string EncodeWriteRequest(std::span<const QueuedSample> samples) {
  prompb::WriteRequest req;
  std::array<std::string, kFieldCount> names;
  for (int f = 0; f < kFieldCount; ++f) names[static_cast<size_t>(f)] = MetricName(static_cast<Field>(f));
  // A series: the device's labels and the field.
  absl::flat_hash_map<std::pair<const LabelSet*, Field>, prompb::TimeSeries*> by_series;
  by_series.reserve(samples.size());
  for (const QueuedSample& s : samples) {
    auto [it, fresh] = by_series.try_emplace(std::make_pair(s.labels.get(), s.field), nullptr);
    if (fresh) {
      it->second = req.add_timeseries();
      // "__name__" sorts before every label name gpuaas writes (they start with a letter).
      prompb::Label* name = it->second->add_labels();
      name->set_name("__name__");
      name->set_value(names[static_cast<size_t>(s.field)]);
      for (const auto& [n, v] : *s.labels) {
        prompb::Label* l = it->second->add_labels();
        l->set_name(n);
        l->set_value(v);
      }
    }
    prompb::Sample* out = it->second->add_samples();
    out->set_value(s.value);
    out->set_timestamp(s.t_ms);
  }
  std::string raw;
  req.SerializeToString(&raw);
  std::string body;
  snappy::Compress(raw.data(), raw.size(), &body);
  return body;
}

absl::StatusOr<std::vector<DecodedSeries>> DecodeWriteRequest(std::string_view body) {
  std::string raw;
  if (!snappy::Uncompress(body.data(), body.size(), &raw)) {
    return absl::InvalidArgumentError("not a snappy block");
  }
  prompb::WriteRequest req;
  if (!req.ParseFromString(raw)) return absl::InvalidArgumentError("not a remote-write WriteRequest");
  std::vector<DecodedSeries> out;
  for (const prompb::TimeSeries& ts : req.timeseries()) {
    DecodedSeries& d = out.emplace_back();
    for (const prompb::Label& l : ts.labels()) d.labels.emplace_back(l.name(), l.value());
    for (const prompb::Sample& s : ts.samples()) d.samples.emplace_back(s.timestamp(), s.value());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> RemoteWriteHeaders(std::string_view user_agent) {
  return {{"Content-Encoding", "snappy"},
          {"Content-Type", "application/x-protobuf"},
          {"User-Agent", std::string(user_agent)},
          {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
}

// ---- RemoteWriteQueue ----

RemoteWriteQueue::RemoteWriteQueue(RemoteWriteOptions options, PostFn post)
    : options_(std::move(options)),
      post_(std::move(post)),
      batch_(std::clamp<size_t>(options_.capacity / 2, 1, std::max<size_t>(1, options_.max_samples_per_send))) {}

RemoteWriteQueue::~RemoteWriteQueue() { Stop(); }

void RemoteWriteQueue::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void RemoteWriteQueue::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

template <typename Take>
void RemoteWriteQueue::Append(size_t n, const Take& take) {
  if (n == 0) return;
  bool wake = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    // The sender sleeps until a first sample starts a batch's clock, or a batch is full.
    wake = queue_.empty();
    const size_t held = queue_.size() + in_flight_;  // a batch being retried still counts
    const size_t room = options_.capacity > held ? options_.capacity - held : 0;
    const size_t kept = std::min(room, n);
    if (queue_.empty() && kept > 0) oldest_since_ = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kept; ++i) {
      queue_.push_back(take(i));
      stats_.highest_enqueued_ms = std::max(stats_.highest_enqueued_ms, queue_.back().t_ms);
    }
    stats_.samples_dropped += static_cast<int64_t>(n - kept);
    stats_.samples_pending = static_cast<int64_t>(queue_.size() + in_flight_);
    wake = (wake && !queue_.empty()) || queue_.size() >= batch_;
  }
  if (wake) wake_.notify_one();
}

void RemoteWriteQueue::Enqueue(std::span<const QueuedSample> samples) {
  Append(samples.size(), [&](size_t i) { return samples[i]; });
}

void RemoteWriteQueue::Enqueue(std::vector<QueuedSample>&& samples) {
  Append(samples.size(), [&](size_t i) { return std::move(samples[i]); });
  samples.clear();
}

RemoteWriteStats RemoteWriteQueue::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

bool RemoteWriteQueue::WaitSent(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  return idle_.wait_for(l, timeout, [this] { return queue_.empty() && in_flight_ == 0; });
}

void RemoteWriteQueue::Run() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    // A batch is due when full, when its oldest sample has waited long enough, or at stop.
    wake_.wait_until(l, oldest_since_ + options_.batch_deadline, [this] {
      return stopping_ || queue_.size() >= batch_ ||
             (!queue_.empty() && std::chrono::steady_clock::now() >= oldest_since_ + options_.batch_deadline);
    });
    if (queue_.empty()) {
      if (stopping_) return;
      // Nothing queued: wait for the first sample (its arrival sets oldest_since_).
      wake_.wait(l, [this] { return stopping_ || !queue_.empty(); });
      continue;
    }
    const bool due = stopping_ || queue_.size() >= batch_ ||
                     std::chrono::steady_clock::now() >= oldest_since_ + options_.batch_deadline;
    if (!due) continue;
    const size_t n = std::min(queue_.size(), batch_);
    std::vector<QueuedSample> batch(std::make_move_iterator(queue_.begin()),
                                    std::make_move_iterator(queue_.begin() + static_cast<std::ptrdiff_t>(n)));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
    in_flight_ = n;
    // What is left waits a full deadline from now at most (its own age is not tracked per sample).
    oldest_since_ = std::chrono::steady_clock::now();
    l.unlock();
    const bool answered = Send(std::move(batch));
    l.lock();
    in_flight_ = 0;
    if (!answered) {
      // Stopping with the receiver unreachable: what is left would only wait for timeouts.
      stats_.samples_failed += static_cast<int64_t>(queue_.size());
      queue_.clear();
    }
    stats_.samples_pending = static_cast<int64_t>(queue_.size());
    if (queue_.empty()) idle_.notify_all();
  }
}

bool RemoteWriteQueue::Send(std::vector<QueuedSample> batch) {
  const std::string body = EncodeWriteRequest(batch);
  int64_t newest = 0;
  for (const QueuedSample& s : batch) newest = std::max(newest, s.t_ms);
  const auto n = static_cast<int64_t>(batch.size());
  std::chrono::milliseconds backoff = options_.min_backoff;
  bool stopped = false;
  while (true) {
    PostResult r = post_(body);
    std::unique_lock<std::mutex> l(mu_);
    if (r.status >= 200 && r.status < 300) {
      stats_.samples_total += n;
      stats_.highest_sent_ms = std::max(stats_.highest_sent_ms, newest);
      return true;
    }
    const bool retry = r.status == 0 || r.status == 429 || r.status >= 500;
    stats_.last_error = r.status == 0 ? r.error : fmt::format("HTTP {}: {}", r.status, r.error);
    if (!retry) {
      stats_.samples_failed += n;
      // Logged at the first refusal and every 1000th after: a receiver refusing every batch
      // must not flood the log.
      if (refusals_++ % 1000 == 0) {
        log::Warn("remote write to {}: {} samples refused and dropped ({}; {} refusals so far)", options_.url, n,
                  stats_.last_error, refusals_);
      }
      return true;
    }
    if (stopped) {  // the one more try a stop allows has failed too
      stats_.samples_failed += n;
      return false;
    }
    stats_.samples_retried += n;
    std::chrono::milliseconds wait = backoff;
    if (r.retry_after) wait = std::max(wait, std::chrono::duration_cast<std::chrono::milliseconds>(*r.retry_after));
    backoff = std::min(backoff * 2, options_.max_backoff);
    stopped = wake_.wait_for(l, wait, [this] { return stopping_; });
  }
}

// ---- RemoteWrite ----

RemoteWriteReceiver::RemoteWriteReceiver(const RemoteWriteOptions& options, const std::function<PostFn()>& post)
    : options_(options) {
  options_.shards = std::max(1, options_.shards);
  RemoteWriteOptions each = options_;
  each.capacity = std::max<size_t>(1, options_.capacity / static_cast<size_t>(options_.shards));
  for (int i = 0; i < options_.shards; ++i) shards_.push_back(std::make_unique<RemoteWriteQueue>(each, post()));
}

void RemoteWriteReceiver::Start() {
  for (auto& q : shards_) q->Start();
}

void RemoteWriteReceiver::Stop() {
  for (auto& q : shards_) q->Stop();
}

RemoteWriteStats RemoteWriteReceiver::stats() const {
  RemoteWriteStats out;
  for (const auto& q : shards_) {
    const RemoteWriteStats s = q->stats();
    out.samples_total += s.samples_total;
    out.samples_failed += s.samples_failed;
    out.samples_retried += s.samples_retried;
    out.samples_dropped += s.samples_dropped;
    out.samples_pending += s.samples_pending;
    out.highest_enqueued_ms = std::max(out.highest_enqueued_ms, s.highest_enqueued_ms);
    out.highest_sent_ms = std::max(out.highest_sent_ms, s.highest_sent_ms);
    if (!s.last_error.empty()) out.last_error = s.last_error;
  }
  return out;
}

bool RemoteWriteReceiver::WaitSent(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& q : shards_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!q->WaitSent(std::max(left, std::chrono::milliseconds(0)))) return false;
  }
  return true;
}

RemoteWriteReceiver& RemoteWrite::Add(RemoteWriteOptions options, const std::function<PostFn()>& post) {
  if (!receivers_.empty()) options.shards = static_cast<int>(receivers_.front()->shards());
  receivers_.push_back(std::make_unique<RemoteWriteReceiver>(options, post));
  return *receivers_.back();
}

void RemoteWrite::Start() {
  for (auto& r : receivers_) r->Start();
}

void RemoteWrite::Stop() {
  for (auto& r : receivers_) r->Stop();
}

const RemoteWrite::Labelled& RemoteWrite::LabelsOf(SeriesId id) {
  if (id >= labelled_.size()) labelled_.resize(static_cast<size_t>(id) + 1);
  Labelled& e = labelled_[id];
  if (e.labels && directory_.Version(e.slot) == e.version) return e;
  std::optional<std::pair<std::string, Field>> what = hub_.series().Describe(id);
  if (!what) return e;  // labels stay null: not sent
  const std::string& device = what->first;
  const size_t slash = device.find('/');
  const std::string_view uuid = std::string_view(device).substr(0, slash);
  if (!e.labels) e.slot = directory_.Slot(uuid);
  e.field = what->second;
  e.version = directory_.Version(e.slot);
  // The device's other series may have made its labels at this version already.
  DeviceEntry& d = devices_[device];
  if (!d.labels || d.version != e.version) {
    const std::shared_ptr<const GpuLabels> gpu = directory_.Get(e.slot);
    std::optional<InstanceInfo> instance;
    if (slash != std::string::npos) {
      int gi = -1;
      const std::string_view tail = std::string_view(device).substr(slash + 1);
      std::from_chars(tail.data(), tail.data() + tail.size(), gi);
      for (InstanceInfo& i : hub_.Instances(uuid)) {
        if (i.gi == gi) instance = std::move(i);
      }
    }
    d.labels = std::make_shared<const LabelSet>(DeviceLabels(device, gpu.get(), instance ? &*instance : nullptr));
    d.version = e.version;
  }
  e.labels = d.labels;
  return e;
}

void RemoteWrite::Take(std::span<const Sample> stored) {
  if (receivers_.empty() || stored.empty()) return;
  std::lock_guard<std::mutex> l(mu_);
  const size_t shards = receivers_.front()->shards();
  scratch_.resize(shards);
  for (const Sample& s : stored) {
    const Labelled& e = LabelsOf(s.series);
    if (!e.labels) continue;
    // A series (the device's labels and the field) always goes to the same shard.
    const size_t shard = shards == 1 ? 0 : absl::Hash<std::pair<const LabelSet*, Field>>{}(std::make_pair(e.labels.get(), e.field)) % shards;
    scratch_[shard].push_back({e.labels, e.field, s.t_ms, s.value});
  }
  // The last receiver takes the samples themselves: no reference counting per sample there.
  for (size_t i = 0; i < shards; ++i) {
    for (size_t r = 0; r + 1 < receivers_.size(); ++r) {
      receivers_[r]->shard(i).Enqueue(std::span<const QueuedSample>(scratch_[i]));
    }
    receivers_.back()->shard(i).Enqueue(std::move(scratch_[i]));
    scratch_[i].clear();
  }
}

void RemoteWrite::AppendMetrics(std::string& out) const {
  if (receivers_.empty()) return;
  MetricsText w(out);
  struct Row {
    std::string_view name, type, help;
    double (*get)(const RemoteWriteStats&);
  };
  static constexpr Row kRows[] = {
      {"gpuaas_remote_storage_samples_total", "counter", "Samples the receiver accepted.",
       [](const RemoteWriteStats& s) { return static_cast<double>(s.samples_total); }},
      {"gpuaas_remote_storage_samples_failed_total", "counter",
       "Samples the receiver refused (a 4xx other than 429): dropped, not retried.",
       [](const RemoteWriteStats& s) { return static_cast<double>(s.samples_failed); }},
      {"gpuaas_remote_storage_samples_retried_total", "counter",
       "Samples sent again after no answer, a 5xx or a 429.",
       [](const RemoteWriteStats& s) { return static_cast<double>(s.samples_retried); }},
      {"gpuaas_remote_storage_samples_dropped_total", "counter", "Samples not queued because the queue was full.",
       [](const RemoteWriteStats& s) { return static_cast<double>(s.samples_dropped); }},
      {"gpuaas_remote_storage_samples_pending", "gauge", "Samples queued or in flight.",
       [](const RemoteWriteStats& s) { return static_cast<double>(s.samples_pending); }},
      {"gpuaas_remote_storage_highest_timestamp_in_seconds", "gauge", "Timestamp of the newest sample queued.",
       [](const RemoteWriteStats& s) { return static_cast<double>(s.highest_enqueued_ms) / 1000.0; }},
      {"gpuaas_remote_storage_queue_highest_sent_timestamp_seconds", "gauge",
       "Timestamp of the newest sample the receiver accepted.",
       [](const RemoteWriteStats& s) { return static_cast<double>(s.highest_sent_ms) / 1000.0; }},
  };
  std::vector<RemoteWriteStats> stats;
  for (const auto& r : receivers_) stats.push_back(r->stats());
  for (const Row& row : kRows) {
    w.Family(row.name, row.type, row.help);
    for (size_t i = 0; i < receivers_.size(); ++i) {
      w.Sample(row.name, {{"url", receivers_[i]->options().url}}, row.get(stats[i]));
    }
  }
  w.Family("gpuaas_remote_storage_queue_capacity", "gauge", "Samples a receiver's queue holds at most.");
  for (const auto& r : receivers_) {
    w.Sample("gpuaas_remote_storage_queue_capacity", {{"url", r->options().url}},
             static_cast<double>(r->options().capacity));
  }
}

}  // namespace gpuaas::telemetry
