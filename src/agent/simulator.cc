#include "agent/simulator.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/ids.h"
#include "fmt/format.h"

namespace gpuaas::agent {
namespace {

using telemetry::Field;

absl::StatusOr<int64_t> ParseDelay(std::string_view s) {
  if (s.empty()) return absl::InvalidArgumentError("empty delay");
  int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  const std::string_view unit(end, static_cast<size_t>(s.data() + s.size() - end));
  if (ec != std::errc() || n < 0) return absl::InvalidArgumentError(fmt::format("delay \"{}\": not a number", s));
  if (unit == "ms") return n;
  if (unit == "s" || unit.empty()) return n * 1000;
  if (unit == "m") return n * 60'000;
  return absl::InvalidArgumentError(fmt::format("delay \"{}\": use ms, s or m", s));
}

}  // namespace

absl::StatusOr<Fault> ParseFault(std::string_view spec) {
  const std::string usage = "faults look like xid=79@GPU-… , dbe@0, hot@1, remap-fail@0 or reset@0, with +30s for a delay";
  Fault f;
  const size_t at = spec.find('@');
  if (at == std::string_view::npos) return absl::InvalidArgumentError(fmt::format("fault \"{}\": no @target; {}", spec, usage));
  const std::string_view what = spec.substr(0, at);
  std::string_view target = spec.substr(at + 1);
  if (const size_t plus = target.find('+'); plus != std::string_view::npos) {
    absl::StatusOr<int64_t> d = ParseDelay(target.substr(plus + 1));
    if (!d.ok()) return absl::InvalidArgumentError(fmt::format("fault \"{}\": {}", spec, std::string(d.status().message())));
    f.after_ms = *d;
    target = target.substr(0, plus);
  }
  if (target.empty()) return absl::InvalidArgumentError(fmt::format("fault \"{}\": empty target; {}", spec, usage));
  f.target = std::string(target);
  if (what.starts_with("xid=")) {
    f.kind = Fault::Kind::kXid;
    const std::string_view n = what.substr(4);
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), f.xid);
    if (ec != std::errc() || end != n.data() + n.size() || f.xid <= 0) {
      return absl::InvalidArgumentError(fmt::format("fault \"{}\": the XID must be a positive number", spec));
    }
  } else if (what == "dbe") {
    f.kind = Fault::Kind::kDoubleBitEcc;
  } else if (what == "hot") {
    f.kind = Fault::Kind::kHot;
  } else if (what == "remap-fail") {
    f.kind = Fault::Kind::kRemapFailure;
  } else if (what == "reset") {
    f.kind = Fault::Kind::kReset;
  } else {
    return absl::InvalidArgumentError(fmt::format("fault \"{}\": unknown kind \"{}\"; {}", spec, what, usage));
  }
  return f;
}

std::vector<SimGpu> SyntheticGpus(const std::string& node, int count) {
  std::vector<SimGpu> out;
  for (int i = 0; i < count; ++i) {
    SimGpu g;
    g.uuid = "GPU-" + StableUuid(fmt::format("agent/{}/{}", node, i));
    g.index = i;
    out.push_back(std::move(g));
  }
  return out;
}

Simulator::Simulator(std::string node, std::vector<SimGpu> gpus, std::vector<Fault> faults, uint64_t seed)
    : node_(std::move(node)), gpus_(std::move(gpus)), faults_(std::move(faults)), fired_(faults_.size(), false),
      state_(gpus_.size()), rng_(seed) {
  for (size_t i = 0; i < gpus_.size(); ++i) {
    state_[i].energy_mj = 1e9 * (1 + static_cast<double>(i));  // counters start wherever the driver left them
    state_[i].instance_load.assign(gpus_[i].instances.size(), 0.2);
  }
}

void Simulator::SetGpus(std::vector<SimGpu> gpus) {
  std::vector<State> state(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) {
    state[i].energy_mj = 1e9 * (1 + static_cast<double>(i));
    for (size_t k = 0; k < gpus_.size(); ++k) {
      if (gpus_[k].uuid == gpus[i].uuid) state[i] = std::move(state_[k]);
    }
    state[i].instance_load.resize(gpus[i].instances.size(), 0.2);
  }
  gpus_ = std::move(gpus);
  state_ = std::move(state);
}

void Simulator::Apply(const Fault& f, size_t i, int64_t now_ms) {
  State& s = state_[i];
  switch (f.kind) {
    case Fault::Kind::kXid:
      s.last_xid = f.xid;
      s.pending_xids.push_back({f.xid, -1, now_ms});
      if (f.xid == 79) s.off_bus = true;
      break;
    case Fault::Kind::kDoubleBitEcc:
      s.dbe_volatile += 1;
      s.dbe_aggregate += 1;
      s.last_xid = 48;
      s.pending_xids.push_back({48, -1, now_ms});
      break;
    case Fault::Kind::kHot:
      s.hot = true;
      break;
    case Fault::Kind::kRemapFailure:
      s.remap_failure = true;
      break;
    case Fault::Kind::kReset:
      s.energy_mj = 0;
      s.dbe_volatile = 0;
      s.sbe = 0;
      s.hot = false;
      s.off_bus = false;
      s.last_xid = 0;
      break;
  }
}

absl::StatusOr<telemetry::NodeReport> Simulator::Read(int64_t now_ms) {
  if (start_ms_ < 0) start_ms_ = now_ms;
  const double dt = last_ms_ < 0 ? 0 : static_cast<double>(now_ms - last_ms_) / 1000;
  last_ms_ = now_ms;
  for (size_t k = 0; k < faults_.size(); ++k) {
    if (fired_[k] || now_ms - start_ms_ < faults_[k].after_ms) continue;
    for (size_t i = 0; i < gpus_.size(); ++i) {
      if (gpus_[i].uuid == faults_[k].target || std::to_string(gpus_[i].index) == faults_[k].target) {
        Apply(faults_[k], i, now_ms);
        fired_[k] = true;
      }
    }
  }
  std::normal_distribution<double> step(0, 0.08);
  auto drift = [&](double x) { return std::clamp(x + step(rng_) + 0.02 * (0.55 - x), 0.0, 1.0); };

  telemetry::NodeReport r;
  r.node = node_;
  r.driver_version = "simulated";
  r.time_ms = now_ms;
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const SimGpu& g = gpus_[i];
    State& s = state_[i];
    telemetry::GpuReport gr;
    gr.uuid = g.uuid;
    gr.index = g.index;
    gr.name = g.name;
    gr.memory_mib = g.memory_mib;
    gr.mig_enabled = !g.instances.empty();
    gr.xid_events = std::move(s.pending_xids);
    s.pending_xids.clear();
    if (s.off_bus) {
      // Fallen off the bus: NVML answers GPU_IS_LOST for readings; only the XID got out.
      r.gpus.push_back(std::move(gr));
      continue;
    }
    double load = 0;
    if (g.instances.empty()) {
      s.load = drift(s.load);
      load = s.load;
    } else {
      double weighted = 0, slices = 0;
      for (size_t k = 0; k < g.instances.size(); ++k) {
        s.instance_load[k] = drift(s.instance_load[k]);
        weighted += s.instance_load[k] * g.instances[k].compute_slices;
        slices += g.instances[k].compute_slices;
      }
      load = slices > 0 ? weighted / 7 : 0;
    }
    const double power = g.idle_power_w + (g.max_power_w - g.idle_power_w) * load * 0.9;
    s.energy_mj += power * dt * 1000;
    const double target_temp = s.hot ? 93 : 32 + 45 * power / g.max_power_w;
    s.temp_c += (target_temp - s.temp_c) * (s.hot ? 1.0 : 0.3);
    gr.readings[Field::kPowerW] = std::round(power * 1000) / 1000;
    gr.readings[Field::kEnergyMj] = std::floor(s.energy_mj);
    gr.readings[Field::kTempC] = std::round(s.temp_c);
    gr.readings[Field::kMemTempC] = std::round(s.temp_c + 4);
    gr.readings[Field::kEccSbeVolatile] = s.sbe;
    gr.readings[Field::kEccDbeVolatile] = s.dbe_volatile;
    gr.readings[Field::kEccSbeAggregate] = s.sbe;
    gr.readings[Field::kEccDbeAggregate] = s.dbe_aggregate;
    gr.readings[Field::kRemapCorrectable] = 0;
    gr.readings[Field::kRemapUncorrectable] = s.remap_failure ? 1 : 0;
    gr.readings[Field::kRemapFailure] = s.remap_failure ? 1 : 0;
    gr.readings[Field::kRemapPending] = 0;
    gr.readings[Field::kXid] = s.last_xid;
    gr.readings[Field::kRecoveryAction] = s.dbe_volatile > 0 ? 1 : 0;
    if (g.instances.empty()) {
      gr.readings[Field::kGpuUtil] = std::round(std::min(100.0, load * 100 * 1.1));
      gr.readings[Field::kSmActive] = std::round(load * 1e4) / 1e4;
      gr.readings[Field::kGrEngineActive] = std::round(std::min(1.0, load * 1.05) * 1e4) / 1e4;
      gr.readings[Field::kFbTotalMib] = static_cast<double>(g.memory_mib);
      gr.readings[Field::kFbUsedMib] = std::round(static_cast<double>(g.memory_mib) * (0.05 + 0.85 * load));
      gr.readings[Field::kFbFreeMib] = static_cast<double>(g.memory_mib) - gr.readings[Field::kFbUsedMib];
    }
    for (size_t k = 0; k < g.instances.size(); ++k) {
      const SimInstance& in = g.instances[k];
      telemetry::InstanceReport ir{in.gi, in.profile, in.start, in.size, in.uuid, {}};
      const double l = s.instance_load[k];
      ir.readings[Field::kSmActive] = std::round(l * 1e4) / 1e4;
      ir.readings[Field::kGrEngineActive] = std::round(std::min(1.0, l * 1.05) * 1e4) / 1e4;
      ir.readings[Field::kFbTotalMib] = static_cast<double>(in.memory_mib);
      ir.readings[Field::kFbUsedMib] = std::round(static_cast<double>(in.memory_mib) * (0.05 + 0.85 * l));
      ir.readings[Field::kFbFreeMib] = static_cast<double>(in.memory_mib) - ir.readings[Field::kFbUsedMib];
      gr.instances.push_back(std::move(ir));
    }
    r.gpus.push_back(std::move(gr));
  }
  return r;
}

}  // namespace gpuaas::agent
