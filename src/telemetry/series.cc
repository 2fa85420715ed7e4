#include "telemetry/series.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fmt/format.h"
#include "telemetry/chunk.h"

namespace gpuaas::telemetry {
namespace {

// Samples a chunk holds before the next one starts: an hour at 15 s. A query decodes only the
// chunks its range touches; a chunk's own 64 bytes and its first sample's 16 are spread over 240
// points (Prometheus cuts at 120, and compresses further on disk).
constexpr uint32_t kChunkSamples = 240;

// The raw samples of a series, full precision (energy counters in mJ run past what a float
// holds), in Gorilla-compressed chunks; the oldest chunk goes once the newer ones hold
// `raw_points` without it. A reader skips what lies beyond the newest `raw_points`.
class HotSamples {
 public:
  void Push(int64_t t_ms, double v, size_t cap) {
    if (chunks_.empty() || chunks_.back().size() >= kChunkSamples) {
      if (!chunks_.empty()) chunks_.back().Seal();
      chunks_.reserve(chunks_.size() + 1);  // exactly: a series holds a few dozen chunks at most
      chunks_.emplace_back();
    }
    chunks_.back().Append(t_ms, v);
    ++count_;
    while (count_ - chunks_.front().size() >= cap) {
      count_ -= chunks_.front().size();
      chunks_.erase(chunks_.begin());
      chunks_.shrink_to_fit();
    }
  }
  size_t size(size_t cap) const { return std::min(count_, cap); }
  // The time of the oldest sample a reader sees (ms); `fallback` when there is none.
  int64_t OldestMs(size_t cap, int64_t fallback) const {
    int64_t t = fallback;
    ForEach(cap, std::numeric_limits<int64_t>::min(), [&](int64_t ms, double) {
      t = ms;
      return false;
    });
    return t;
  }
  // Calls f(t_ms, v) for the newest `cap` samples from `from_ms` on, oldest first, until f
  // returns false; chunks that end before `from_ms` are not decoded.
  template <typename F>
  void ForEach(size_t cap, int64_t from_ms, F&& f) const {
    size_t skip = count_ > cap ? count_ - cap : 0;
    for (const XorChunk& c : chunks_) {
      if (skip >= c.size()) {
        skip -= c.size();
        continue;
      }
      if (c.last_t() < from_ms) {
        skip = 0;
        continue;
      }
      XorChunk::Reader r = c.Read();
      int64_t t = 0;
      double v = 0;
      while (r.Next(t, v)) {
        if (skip > 0) {
          --skip;
          continue;
        }
        if (t >= from_ms && !f(t, v)) return;
      }
    }
  }
  size_t bytes() const {
    size_t b = chunks_.capacity() * sizeof(XorChunk);
    for (const XorChunk& c : chunks_) b += c.bytes() - sizeof(XorChunk);
    return b;
  }

 private:
  std::vector<XorChunk> chunks_;
  size_t count_ = 0;
};

struct AggPoint {
  int32_t bucket;  // unix seconds / step
  float mean;
  float max;
};

// A ring that grows to `cap` and then overwrites its oldest element.
template <typename T>
class Ring {
 public:
  void Push(const T& x, size_t cap) {
    if (items_.size() < cap) {
      // Grow by doubling but never past `cap`, so that a full ring holds no slack.
      if (items_.size() == items_.capacity()) items_.reserve(std::min(cap, std::max<size_t>(8, 2 * items_.size())));
      items_.push_back(x);
      return;
    }
    items_[head_] = x;
    head_ = (head_ + 1) % cap;
  }
  size_t size() const { return items_.size(); }
  // i-th oldest.
  const T& at(size_t i) const { return items_[(head_ + i) % items_.size()]; }
  const T& back() const { return items_[(head_ + items_.size() - 1) % items_.size()]; }
  bool empty() const { return items_.empty(); }
  size_t bytes() const { return items_.capacity() * sizeof(T); }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

struct Acc {
  int64_t bucket = -1;
  double sum = 0;
  float max = 0;
  uint32_t n = 0;
};

}  // namespace

struct SeriesStore::Series {
  std::string device;
  Field field;
  HotSamples raw;
  Ring<AggPoint> minute, hour;
  Acc minute_acc, hour_acc;
  int64_t last_ms = -1;
  double last_value = 0;
};

SeriesStore::SeriesStore(SeriesLimits limits) : limits_(limits) {}
SeriesStore::~SeriesStore() = default;

std::string SeriesStore::Key(std::string_view device, Field field) {
  std::string k(device);
  k.push_back('\x1f');
  k.push_back(static_cast<char>('a' + static_cast<int>(field)));
  return k;
}

SeriesStore::Series* SeriesStore::Get(SeriesId id) const {
  return id < series_.size() ? series_[id].get() : nullptr;
}

std::optional<SeriesId> SeriesStore::Intern(std::string_view device, Field field) {
  std::string key = Key(device, field);
  absl::MutexLock l(&mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (series_.size() >= limits_.max_series) return std::nullopt;
  const SeriesId id = static_cast<SeriesId>(series_.size());
  auto s = std::make_unique<Series>();
  s->device.assign(device);
  s->field = field;
  series_.push_back(std::move(s));
  index_.emplace(std::move(key), id);
  return id;
}

std::optional<SeriesId> SeriesStore::Find(std::string_view device, Field field) const {
  const std::string key = Key(device, field);
  absl::MutexLock l(&mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  return std::nullopt;
}

std::optional<std::pair<std::string, Field>> SeriesStore::Describe(SeriesId id) const {
  absl::MutexLock l(&mu_);
  const Series* s = Get(id);
  if (s == nullptr) return std::nullopt;
  return std::make_pair(s->device, s->field);
}

size_t SeriesStore::Append(const std::vector<Sample>& samples, std::vector<Sample>* kept) {
  absl::MutexLock l(&mu_);
  size_t stored = 0;
  for (const Sample& smp : samples) {
    Series* s = Get(smp.series);
    if (s == nullptr || !std::isfinite(smp.value)) continue;
    if (smp.t_ms <= s->last_ms) {
      if (smp.t_ms < s->last_ms) ++dropped_;
      continue;
    }
    s->last_ms = smp.t_ms;
    s->last_value = smp.value;
    const int64_t t = smp.t_ms / 1000;
    const float v = static_cast<float>(smp.value);
    s->raw.Push(smp.t_ms, smp.value, static_cast<size_t>(limits_.raw_points));
    auto roll = [&](Acc& acc, Ring<AggPoint>& ring, int64_t step, size_t cap) {
      const int64_t b = t / step;
      if (b != acc.bucket) {
        if (acc.n > 0) {
          const AggPoint p{static_cast<int32_t>(acc.bucket), static_cast<float>(acc.sum / acc.n), acc.max};
          ring.Push(p, cap);
          closed_.push_back({smp.series, static_cast<int32_t>(step), p.bucket, p.mean, p.max});
        }
        acc = Acc{b, 0, v, 0};
      }
      acc.sum += v;
      acc.max = std::max(acc.max, v);
      ++acc.n;
    };
    roll(s->minute_acc, s->minute, 60, static_cast<size_t>(limits_.minute_points));
    roll(s->hour_acc, s->hour, 3600, static_cast<size_t>(limits_.hour_points));
    ++stored;
    if (kept != nullptr) kept->push_back(smp);
  }
  // Persistence is optional: without a taker the closed list must not grow without bound.
  if (closed_.size() > 4 * limits_.max_series) closed_.clear();
  return stored;
}

std::vector<Bucket> SeriesStore::Query(std::string_view device, Field field, int64_t from, int64_t to,
                                       int64_t step, int64_t now) const {
  std::vector<Bucket> out;
  if (step <= 0 || to <= from) return out;
  const std::string key = Key(device, field);
  absl::MutexLock l(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return out;
  const Series& s = *series_[it->second];
  const size_t n = static_cast<size_t>((to - from + step - 1) / step);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i].t = from + static_cast<int64_t>(i) * step;
  std::vector<double> sums(n, 0);
  auto add = [&](int64_t t, double mean, double mx, int64_t weight) {
    if (t < from || t >= to) return;
    const size_t i = static_cast<size_t>((t - from) / step);
    Bucket& b = out[i];
    b.max = b.count == 0 ? mx : std::max(b.max, mx);
    sums[i] += mean * static_cast<double>(weight);
    b.count += weight;
  };
  // The finest resolution that holds `from`: the raw samples within the hot window when they
  // reach back to it, or when they are all the series has (a young series); else the rollups
  // (the raw samples were cut by their count, or lost in a restart that kept the rollups).
  const size_t cap = static_cast<size_t>(limits_.raw_points);
  const bool has_raw = s.raw.size(cap) > 0;
  const int64_t raw_oldest = s.raw.OldestMs(cap, now * 1000) / 1000;
  const bool rollups_older = (!s.minute.empty() && int64_t{s.minute.at(0).bucket} * 60 < raw_oldest) ||
                             (!s.hour.empty() && int64_t{s.hour.at(0).bucket} * 3600 < raw_oldest);
  if (from >= now - limits_.hot_window_s && has_raw && (raw_oldest <= from + step || !rollups_older)) {
    s.raw.ForEach(cap, from * 1000, [&](int64_t t_ms, double v) {
      if (t_ms >= to * 1000) return false;
      add(t_ms / 1000, v, v, 1);
      return true;
    });
  } else {
    const bool minute = from >= now - 86400 && step < 3600;
    const Ring<AggPoint>& ring = minute ? s.minute : s.hour;
    const Acc& acc = minute ? s.minute_acc : s.hour_acc;
    const int64_t tier = minute ? 60 : 3600;
    for (size_t i = 0; i < ring.size(); ++i) {
      add(int64_t{ring.at(i).bucket} * tier, ring.at(i).mean, ring.at(i).max, 1);
    }
    if (acc.n > 0) add(acc.bucket * tier, acc.sum / acc.n, acc.max, 1);
  }
  for (size_t i = 0; i < n; ++i) {
    if (out[i].count > 0) out[i].mean = sums[i] / static_cast<double>(out[i].count);
  }
  return out;
}

std::optional<std::pair<int64_t, double>> SeriesStore::Latest(std::string_view device, Field field) const {
  const std::string key = Key(device, field);
  absl::MutexLock l(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  const Series& s = *series_[it->second];
  if (s.last_ms < 0) return std::nullopt;
  return std::make_pair(s.last_ms, s.last_value);
}

std::vector<RollupRow> SeriesStore::TakeClosedRollups() {
  absl::MutexLock l(&mu_);
  std::vector<RollupRow> out;
  out.reserve(closed_.size());
  for (const Closed& c : closed_) {
    const Series& s = *series_[c.id];
    out.push_back({s.device, s.field, c.step_s, c.bucket, c.mean, c.max});
  }
  closed_.clear();
  return out;
}

void SeriesStore::LoadRollups(const std::vector<RollupRow>& rows) {
  // Rows come oldest first; each goes to its series' ring of its step.
  std::vector<std::pair<SeriesId, const RollupRow*>> resolved;
  resolved.reserve(rows.size());
  for (const RollupRow& r : rows) {
    if (std::optional<SeriesId> id = Intern(r.device, r.field)) resolved.emplace_back(*id, &r);
  }
  absl::MutexLock l(&mu_);
  for (const auto& [id, r] : resolved) {
    Series& s = *series_[id];
    const bool minute = r->step_s == 60;
    Ring<AggPoint>& ring = minute ? s.minute : s.hour;
    if (!ring.empty() && ring.back().bucket >= r->bucket) continue;
    ring.Push({static_cast<int32_t>(r->bucket), r->mean, r->max},
              static_cast<size_t>(minute ? limits_.minute_points : limits_.hour_points));
    // New samples must not reopen a bucket that is already closed.
    Acc& acc = minute ? s.minute_acc : s.hour_acc;
    if (acc.n == 0) acc.bucket = r->bucket;
    s.last_ms = std::max<int64_t>(s.last_ms, (r->bucket + 1) * r->step_s * 1000 - 1);
  }
}

size_t SeriesStore::series_count() const {
  absl::MutexLock l(&mu_);
  return series_.size();
}

size_t SeriesStore::MemoryBytes() const {
  absl::MutexLock l(&mu_);
  size_t bytes = series_.capacity() * sizeof(void*) + index_.capacity() * (sizeof(std::string) + sizeof(SeriesId) + 1);
  for (const auto& s : series_) {
    bytes += sizeof(Series) + s->device.capacity() + s->raw.bytes() + s->minute.bytes() + s->hour.bytes();
  }
  for (const auto& [k, v] : index_) bytes += k.capacity() > 15 ? k.capacity() : 0;
  return bytes;
}

int64_t SeriesStore::dropped_out_of_order() const {
  absl::MutexLock l(&mu_);
  return dropped_;
}

}  // namespace gpuaas::telemetry
