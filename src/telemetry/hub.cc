#include "telemetry/hub.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "telemetry/prom_text.h"

namespace gpuaas::telemetry {
namespace {

bool IsHealthField(Field f) {
  switch (f) {
    case Field::kXid:
    case Field::kEnergyMj:
    case Field::kEccDbeVolatile:
    case Field::kEccDbeAggregate:
    case Field::kRemapFailure:
    case Field::kRemapPending:
    case Field::kRecoveryAction:
    case Field::kTempC:
      return true;
    default:
      return false;
  }
}

constexpr size_t kMaxSeenSpellings = 1 << 16;

std::string DeviceName(std::string_view gpu_uuid, int gi) {
  return gi < 0 ? std::string(gpu_uuid) : fmt::format("{}/{}", gpu_uuid, gi);
}

constexpr size_t kMaxTextCache = 1'000'000;
constexpr size_t kMaxSeenXids = 100'000;

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// The finaliser of MurmurHash3 (public domain): spreads every input bit over the word.
uint64_t Mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

Hub::Digest Hub::DigestOf(std::string_view text) {
  uint64_t a = 0x9e3779b97f4a7c15ULL ^ text.size();
  uint64_t b = 0x6a09e667f3bcc909ULL + text.size();
  const char* p = text.data();
  size_t n = text.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    a = Rotl(a ^ (w * 0x87c37b91114253d5ULL), 31) * 0x4cf5ad432745937fULL;
    b = Rotl(b + (w * 0x4cf5ad432745937fULL), 27) * 0x87c37b91114253d5ULL + a;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  a ^= w * 0x87c37b91114253d5ULL;
  b += Rotl(w, 17) * 0x4cf5ad432745937fULL;
  return {Mix(a), Mix(b ^ Rotl(a, 32))};
}

Hub::Hub(SeriesLimits limits) : series_(limits) {}

void Hub::SetKnownGpus(std::set<std::string> uuids) {
  absl::MutexLock l(&mu_);
  known_.clear();
  known_.reserve(uuids.size());
  for (const std::string& u : uuids) known_.emplace(ToLower(u), u);
  seen_spellings_.clear();
  text_cache_.clear();  // what was resolved as unknown may be known now, and the other way
}

std::optional<std::string> Hub::Spelling(std::string_view uuid) {
  const std::string folded = ToLower(uuid);
  if (!known_.empty()) {
    auto it = known_.find(folded);
    if (it == known_.end()) return std::nullopt;
    return it->second;
  }
  // No inventory yet: nothing to match against; the first spelling stands for the GPU.
  if (seen_spellings_.size() >= kMaxSeenSpellings) {
    auto it = seen_spellings_.find(folded);
    return it == seen_spellings_.end() ? std::string(uuid) : it->second;
  }
  return seen_spellings_.try_emplace(folded, uuid).first->second;
}

void Hub::NoteUnmatched(Batch& batch, IngestResult& res) {
  // The first of them, enough to tell what is wrong; `unmatched` counts them all.
  for (const std::string& uuid : batch.unknown) {
    if (res.unmatched_gpus.size() == kMaxUnmatchedListed) break;
    res.unmatched_gpus.push_back(uuid);
  }
}

void Hub::Apply(const Resolved& r, double value, int64_t t_ms, Batch& batch, IngestResult& res) {
  ++res.samples;
  if (!r.keep) {
    ++res.ignored;
    return;
  }
  if (IsDcgmBlank(value) || !std::isfinite(value)) {
    ++res.blank;
    return;
  }
  if (batch.gpus.empty() || batch.gpus.back() != r.gpu) batch.gpus.push_back(r.gpu);
  if (r.has_id) batch.samples.push_back({r.id, t_ms, value});
  if (r.health) batch.health.push_back({r.gpu, r.gi, r.field, value, t_ms});
}

bool Hub::HasRealSource(std::string_view gpu_uuid) const {
  absl::MutexLock l(&mu_);
  return real_sources_.count(gpu_uuid) > 0;
}

int64_t Hub::second_reporter_readings() const {
  absl::MutexLock l(&mu_);
  return health_.second_reporter_readings();
}

absl::StatusOr<IngestResult> Hub::IngestReport(const NodeReport& report, int64_t now_ms, bool simulated,
                                               const GpuAdmission& admit, std::string_view reporter) {
  const HealthTracker::Reporter from{
      reporter.empty() && report.agent.empty() ? ""
      : fmt::format("{}{}{}", reporter, reporter.empty() ? "" : "/", report.agent.empty() ? report.node : report.agent),
      report.boot_id};
  if (admit) {
    for (const GpuReport& g : report.gpus) RETURN_IF_ERROR(admit(g.uuid));
  }
  IngestResult res;
  Batch batch;
  bool health_changed = false;
  auto ahead = [&](int64_t t_ms) { return t_ms > now_ms + kMaxAheadMs; };
  bool future = ahead(report.time_ms);
  for (const GpuReport& g : report.gpus) {
    for (const XidEvent& x : g.xid_events) future = future || ahead(x.time_ms);
  }
  if (future) {
    return absl::InvalidArgumentError(
        fmt::format("timeMs: more than {} s ahead of the server's clock", kMaxAheadMs / 1000));
  }
  const int64_t t = report.time_ms > 0 ? report.time_ms : now_ms;
  {
    absl::MutexLock l(&mu_);
    const int64_t xids_before = health_.xid_events();
    for (const GpuReport& reported : report.gpus) {
      const GpuReport& g = reported;
      const std::optional<std::string> spelling = Spelling(reported.uuid);
      if (!spelling) {
        batch.unknown.insert(reported.uuid);
        int64_t n = static_cast<int64_t>(g.readings.size());
        for (const InstanceReport& i : g.instances) n += static_cast<int64_t>(i.readings.size());
        res.samples += n;
        res.unmatched += n;
        continue;
      }
      const std::string& uuid = *spelling;
      if (simulated && real_sources_.count(uuid)) continue;
      if (!simulated) real_sources_.insert(uuid);
      HealthTracker::GpuState* gpu = health_.Track(uuid);
      batch.gpus.push_back(gpu);
      auto add = [&](int gi, const Readings& readings) {
        for (const auto& [f, v] : readings) {
          Resolved r;
          r.gi = gi;
          r.field = f;
          r.keep = true;
          r.gpu = gpu;
          r.health = IsHealthField(f) && f != Field::kXid;  // XIDs come as events here
          const std::optional<SeriesId> id = series_.Intern(DeviceName(uuid, Info(f).per_instance ? gi : -1), f);
          r.has_id = id.has_value();
          r.id = id.value_or(0);
          Apply(r, v, t, batch, res);
        }
      };
      add(-1, g.readings);
      auto& known = instances_[uuid];
      if (g.mig_enabled) known.clear();  // the report lists the GPU's instances as they are now
      for (const InstanceReport& i : g.instances) {
        known[i.gi] = {i.gi, i.profile, i.start, i.uuid};
        add(i.gi, i.readings);
      }
      for (const HealthReading& h : batch.health) {
        health_.Observe(h.gpu, h.gi, h.field, h.value, h.t_ms, from.id.empty() ? nullptr : &from);
      }
      batch.health.clear();
      for (const XidEvent& x : g.xid_events) {
        // Pushes are retried after failures: an event counts once.
        if (!seen_xids_.insert({uuid, x.gi, x.xid, x.time_ms}).second) continue;
        if (seen_xids_.size() > kMaxSeenXids) seen_xids_.clear();
        health_.Xid(uuid, x.gi, x.xid, x.time_ms > 0 ? x.time_ms : t);
      }
    }
    res.xid_events = health_.xid_events() - xids_before;
    samples_total_ += res.samples;
    NoteUnmatched(batch, res);
    health_changed = health_.HasChanged();
  }
  res.stored = static_cast<int64_t>(Store(batch.samples));
  if (health_changed) HealthChanged();
  return res;
}

absl::StatusOr<IngestResult> Hub::IngestText(std::string_view text, int64_t now_ms, const GpuAdmission& admit,
                                             std::string_view reporter) {
  const HealthTracker::Reporter from{std::string(reporter), ""};
  class Sink final : public PromSink {
   public:
    Sink(Hub& hub, int64_t now_ms, IngestResult& res, Batch& batch)
        : hub_(hub), now_ms_(now_ms), res_(res), batch_(batch) {}
    absl::Status OnSample(const PromSample& s) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
      const Digest key = DigestOf(s.series);
      auto it = hub_.text_cache_.find(key);
      Resolved uncached;
      const Resolved* r = nullptr;
      if (it != hub_.text_cache_.end()) {
        r = &it->second;
      } else {
        uncached = Resolve(s);
        if (uncached.unknown) {
          r = &uncached;  // made-up GPUs take no room, not even here
        } else {
          if (hub_.text_cache_.size() >= kMaxTextCache) hub_.text_cache_.clear();
          r = &hub_.text_cache_.emplace(key, uncached).first->second;
        }
      }
      if (r->unknown) {
        ++res_.samples;
        ++res_.unmatched;
        for (const PromLabel& l : s.labels) {
          if (l.name == "UUID" || l.name == "uuid") batch_.unknown.insert(std::string(l.value));
        }
        return absl::OkStatus();
      }
      hub_.Apply(*r, s.value, s.timestamp_ms.value_or(now_ms_), batch_, res_);
      return absl::OkStatus();
    }

   private:
    Resolved Resolve(const PromSample& s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      Resolved r;
      std::optional<Field> f = FieldFromDcgm(s.name);
      std::string_view uuid, gi_text, profile;
      for (const PromLabel& l : s.labels) {
        if (l.name == "UUID" || l.name == "uuid") uuid = l.value;
        else if (l.name == "GPU_I_ID") gi_text = l.value;
        else if (l.name == "GPU_I_PROFILE") profile = l.value;
      }
      if (!f || uuid.empty()) return r;  // not a reading gpuaas keeps
      int gi = -1;
      if (!gi_text.empty()) {
        auto [p, ec] = std::from_chars(gi_text.data(), gi_text.data() + gi_text.size(), gi);
        if (ec != std::errc() || p != gi_text.data() + gi_text.size() || gi < 0) gi = -1;
      }
      const std::optional<std::string> spelling = hub_.Spelling(uuid);
      if (!spelling) {
        r.unknown = true;  // no state, no series for it
        return r;
      }
      const std::string& gpu = *spelling;
      r.gi = gi;
      r.field = *f;
      r.keep = true;
      r.gpu = hub_.health_.Track(gpu);
      r.health = IsHealthField(*f);
      hub_.real_sources_.insert(gpu);
      // A GPU-level field on a MIG row belongs to the GPU: every row repeats it.
      const std::optional<SeriesId> id = hub_.series_.Intern(DeviceName(gpu, Info(*f).per_instance ? gi : -1), *f);
      r.has_id = id.has_value();
      r.id = id.value_or(0);
      if (gi >= 0) {
        InstanceInfo& ii = hub_.instances_[gpu][gi];
        ii.gi = gi;
        if (!profile.empty()) ii.profile.assign(profile);
      }
      return r;
    }
    Hub& hub_;
    int64_t now_ms_;
    IngestResult& res_;
    Batch& batch_;
  };

  // The whole text first: a body refused anywhere changes nothing.
  class Check final : public PromSink {
   public:
    Check(int64_t now_ms, const GpuAdmission& admit) : now_ms_(now_ms), admit_(admit) {}
    absl::Status OnSample(const PromSample& s) override {
      if (s.timestamp_ms && *s.timestamp_ms > now_ms_ + kMaxAheadMs) {
        return absl::InvalidArgumentError(fmt::format(
            "timestamp {} ms is more than {} s ahead of the server's clock", *s.timestamp_ms, kMaxAheadMs / 1000));
      }
      if (!admit_) return absl::OkStatus();
      for (const PromLabel& l : s.labels) {
        if ((l.name == "UUID" || l.name == "uuid") && admitted_.insert(std::string(l.value)).second) {
          RETURN_IF_ERROR(admit_(l.value));
        }
      }
      return absl::OkStatus();
    }

   private:
    int64_t now_ms_;
    const GpuAdmission& admit_;
    std::set<std::string, std::less<>> admitted_;
  };
  Check check(now_ms, admit);
  RETURN_IF_ERROR(ParsePromText(text, check));

  IngestResult res;
  Batch batch;
  bool health_changed = false;
  batch.samples.reserve(text.size() / 120);
  batch.health.reserve(text.size() / 600);
  batch.gpus.reserve(64);
  {
    absl::MutexLock l(&mu_);
    const int64_t xids_before = health_.xid_events();
    Sink sink(*this, now_ms, res, batch);
    if (absl::Status s = ParsePromText(text, sink); !s.ok()) return s;
    for (const HealthReading& h : batch.health) {
      health_.Observe(h.gpu, h.gi, h.field, h.value, h.t_ms, from.id.empty() ? nullptr : &from);
    }
    NoteUnmatched(batch, res);
    res.xid_events = health_.xid_events() - xids_before;
    samples_total_ += res.samples;
    health_changed = health_.HasChanged();
  }
  res.stored = static_cast<int64_t>(Store(batch.samples));
  if (health_changed) HealthChanged();
  return res;
}

size_t Hub::Store(const std::vector<Sample>& samples) {
  if (!sink_) return series_.Append(samples);
  std::vector<Sample> stored;
  stored.reserve(samples.size());
  std::lock_guard<std::mutex> l(append_mu_);
  const size_t n = series_.Append(samples, &stored);
  sink_(stored);
  return n;
}

std::optional<int> Hub::FindInstance(std::string_view gpu_uuid, int start, std::string_view mig_uuid) const {
  absl::MutexLock l(&mu_);
  auto it = instances_.find(gpu_uuid);
  if (it == instances_.end()) return std::nullopt;
  for (const auto& [gi, info] : it->second) {
    if (!mig_uuid.empty() && info.uuid == mig_uuid) return gi;
  }
  for (const auto& [gi, info] : it->second) {
    if (info.start == start && start >= 0) return gi;
  }
  return std::nullopt;
}

std::vector<InstanceInfo> Hub::Instances(std::string_view gpu_uuid) const {
  absl::MutexLock l(&mu_);
  std::vector<InstanceInfo> out;
  if (auto it = instances_.find(gpu_uuid); it != instances_.end()) {
    for (const auto& [gi, info] : it->second) out.push_back(info);
  }
  return out;
}

absl::StatusOr<std::vector<Bucket>> Hub::Query(std::string_view device, Field field, int64_t from, int64_t to,
                                               int64_t step, int64_t now) const {
  const int64_t hot_from = now - series_.limits().hot_window_s;
  if (history_ == nullptr || step <= 0 || to <= from || from >= hot_from) {
    return series_.Query(device, field, from, to, step, now);
  }
  // The steps that start before the hot window come from the history, the others from memory.
  const int64_t cut = std::min(to, from + (hot_from - from + step - 1) / step * step);
  ASSIGN_OR_RETURN(std::vector<Bucket> out, history_->Buckets(device, field, from, cut, step));
  if (cut < to) {
    std::vector<Bucket> hot = series_.Query(device, field, cut, to, step, now);
    if (hot.empty()) {  // no such series in memory: empty steps, as the history shapes them
      for (int64_t t = cut; t < to; t += step) out.push_back({t, 0, 0, 0});
    }
    out.insert(out.end(), hot.begin(), hot.end());
  }
  return out;
}

absl::StatusOr<std::optional<double>> Hub::DeviceUtil(const DeviceRef& d, int64_t from, int64_t to, int64_t step,
                                                      int64_t now, std::vector<Bucket>& out) const {
  if (d.gi < -1) return std::nullopt;  // a MIG instance no reading has named
  const std::string dev = DeviceName(d.gpu_uuid, d.gi);
  for (Field f : {Field::kSmActive, Field::kGrEngineActive, Field::kGpuUtil}) {
    if (f == Field::kGpuUtil && d.gi >= 0) break;  // GPU utilization does not exist per MIG instance
    if (!series_.Find(dev, f)) continue;
    ASSIGN_OR_RETURN(out, Query(dev, f, from, to, step, now));
    return f == Field::kGpuUtil ? 0.01 : 1.0;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<UtilizationPoint>> Hub::Utilization(const std::vector<DeviceRef>& devices, int64_t from,
                                                               int64_t to, int64_t step, int64_t now) const {
  std::vector<UtilizationPoint> out;
  if (step <= 0 || to <= from) return out;
  const size_t n = static_cast<size_t>((to - from + step - 1) / step);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i].t = from + static_cast<int64_t>(i) * step;
  std::vector<Bucket> b;
  for (const DeviceRef& d : devices) {
    // A step counts for a device when it overlaps the device's window.
    auto in_window = [&](int64_t t) { return t + step > d.from_s && t < d.to_s; };
    for (UtilizationPoint& p : out) {
      if (in_window(p.t)) p.allocated_gpus += d.weight;
    }
    ASSIGN_OR_RETURN(std::optional<double> scale, DeviceUtil(d, from, to, step, now, b));
    if (!scale) continue;
    for (size_t i = 0; i < n && i < b.size(); ++i) {
      if (b[i].count == 0 || !in_window(out[i].t)) continue;
      out[i].covered_gpus += d.weight;
      out[i].used_gpus += d.weight * std::clamp(b[i].mean * *scale, 0.0, 1.0);
    }
  }
  return out;
}

GpuVerdict Hub::Verdict(std::string_view gpu_uuid) const {
  absl::MutexLock l(&mu_);
  return health_.Verdict(gpu_uuid);
}

void Hub::RestoreHealth(std::string_view gpu_uuid, std::optional<ConditionVerdict> memory_errors,
                        std::optional<ConditionVerdict> reset_required, int64_t t_ms) {
  absl::MutexLock l(&mu_);
  health_.Restore(gpu_uuid, std::move(memory_errors), std::move(reset_required), t_ms);
}

std::set<std::string> Hub::TakeChangedHealth() {
  absl::MutexLock l(&mu_);
  return health_.TakeChanged();
}

std::vector<Alert> Hub::Alerts(bool active_only) const {
  absl::MutexLock l(&mu_);
  return health_.Alerts(active_only);
}

int64_t Hub::samples_total() const {
  absl::MutexLock l(&mu_);
  return samples_total_;
}

}  // namespace gpuaas::telemetry
