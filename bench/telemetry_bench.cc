// Telemetry ingest: dcgm-exporter text parsed, matched and stored, in samples per second on one
// thread, against the same text only parsed (the floor) in the same run; and the memory a series
// takes once its rings are full.
//
// The text is what dcgm-exporter serves for an 8-GPU node with its default counter set
// (etc/default-counters.csv: 19 device families plus the DCP ones), labels as its template writes
// them (gpu, UUID, pci_bus_id, device, modelName, Hostname, the driver-version label field, and
// the empty container/namespace/pod of an unallocated GPU). Each round ingests every node's scrape
// once, 15 s later than the last (the Helm chart's scrape interval).
//
// With remote write on, the ingest again, every stored sample labelled and queued for a sender
// that encodes each batch as a receiver gets it.
//
// Usage: build/release/bench/telemetry_bench [NODES [ROUNDS [ingest]]]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"
#include "telemetry/chunk.h"
#include "telemetry/hub.h"
#include "telemetry/prom_text.h"
#include "telemetry/remote_write.h"

namespace {

using gpuaas::telemetry::Field;

struct Family {
  const char* name;
  const char* type;
  double base;
};

// The default counters of dcgm-exporter (etc/default-counters.csv) with plausible values.
const std::vector<Family> kFamilies = {
    {"DCGM_FI_DEV_SM_CLOCK", "gauge", 1980},
    {"DCGM_FI_DEV_MEM_CLOCK", "gauge", 2619},
    {"DCGM_FI_DEV_MEMORY_TEMP", "gauge", 41},
    {"DCGM_FI_DEV_GPU_TEMP", "gauge", 38},
    {"DCGM_FI_DEV_POWER_USAGE", "gauge", 412.331},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 319159391},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", 0},
    {"DCGM_FI_DEV_GPU_UTIL", "gauge", 87},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 23},
    {"DCGM_FI_DEV_ENC_UTIL", "gauge", 0},
    {"DCGM_FI_DEV_DEC_UTIL", "gauge", 0},
    {"DCGM_FI_DEV_XID_ERRORS", "gauge", 0},
    {"DCGM_FI_DEV_FB_FREE", "gauge", 98304},
    {"DCGM_FI_DEV_FB_USED", "gauge", 45467},
    {"DCGM_FI_DEV_FB_RESERVED", "gauge", 523},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", 0},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", 0},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", 0},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", 0},
    {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", 0},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", 0.874113},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", 0.412088},
    {"DCGM_FI_PROF_DRAM_ACTIVE", "gauge", 0.530123},
    {"DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", 33011804},
    {"DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", 97863601},
};

std::string Scrape(int node, int round) {
  std::string out;
  for (const Family& f : kFamilies) {
    out += fmt::format("# HELP {} {}.\n# TYPE {} {}\n", f.name, f.name, f.name, f.type);
    for (int g = 0; g < 8; ++g) {
      // Gauges wander; counters stay (texts are reused, and a drop would read as a GPU reset).
      // Flags and error gauges (base 0) stay 0: a healthy fleet.
      const double v = std::string_view(f.type) == "counter" || f.base == 0
                           ? f.base + (f.base == 0 ? 0 : 6000.0 * g)
                           : f.base + ((round * 7 + g * 3) % 11) * (f.base > 1000 ? 1000 : 0.01);
      out += fmt::format(
          "{}{{gpu=\"{}\",UUID=\"GPU-{:08x}-d595-d1c7-d1d2-{:012x}\",pci_bus_id=\"00000000:{:02X}:00.0\","
          "device=\"nvidia{}\",modelName=\"NVIDIA H200\",Hostname=\"gpu-node-{:04d}\","
          "DCGM_FI_DRIVER_VERSION=\"570.124.06\",container=\"\",namespace=\"\",pod=\"\"}} {}\n",
          f.name, g, node, g, 0x18 + g * 0x10, g, node, v);
    }
  }
  return out;
}

class Count final : public gpuaas::telemetry::PromSink {
 public:
  absl::Status OnSample(const gpuaas::telemetry::PromSample& s) override {
    sum += s.value;
    return absl::OkStatus();
  }
  double sum = 0;
};

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 125;  // 1,000 GPUs
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 40;
  // Values change between rounds, as real scrapes do; four texts per node, used in turn.
  constexpr int kVariants = 4;
  std::vector<std::vector<std::string>> texts(nodes);
  size_t bytes = 0;
  for (int n = 0; n < nodes; ++n) {
    for (int v = 0; v < kVariants; ++v) texts[n].push_back(Scrape(n, v));
    bytes += texts[n][0].size();
  }
  const int64_t per_round = static_cast<int64_t>(nodes) * 8 * static_cast<int64_t>(kFamilies.size());
  std::printf("%d nodes x 8 GPUs, %zu families: %lld samples, %.1f MB of text a round, %d rounds\n", nodes,
              kFamilies.size(), static_cast<long long>(per_round), bytes / 1e6, rounds);

  // Parse only.
  Count c;
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    for (int n = 0; n < nodes; ++n) {
      if (!gpuaas::telemetry::ParsePromText(texts[n][r % kVariants], c).ok()) return 1;
    }
  }
  const double parse_s = Seconds(t0);

  // Parse, match, store, health rules.
  gpuaas::telemetry::Hub hub;
  int64_t stored = 0, seen = 0;
  const int64_t start_ms = 1'800'000'000'000;
  t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    for (int n = 0; n < nodes; ++n) {
      auto res = hub.IngestText(texts[n][r % kVariants], start_ms + r * 15'000);
      if (!res.ok()) {
        std::fprintf(stderr, "%s\n", std::string(res.status().message()).c_str());
        return 1;
      }
      stored += res->stored;
      seen += res->samples;
    }
  }
  const double ingest_s = Seconds(t0);
  std::printf("%-28s %14s %10s\n", "", "samples/s", "MB/s");
  std::printf("%-28s %14.0f %10.0f\n", "parse only", seen / parse_s, bytes * rounds / parse_s / 1e6);
  std::printf("%-28s %14.0f %10.0f   (%.0f%% of parse-only speed)\n", "parse + match + store", seen / ingest_s,
              bytes * rounds / ingest_s / 1e6, 100 * parse_s / ingest_s);
  std::printf("kept %lld of %lld samples (%zu series); %.2f GB/day of text at 15 s\n",
              static_cast<long long>(stored), static_cast<long long>(seen), hub.series().series_count(),
              bytes * 5760 / 1e9);

  // The same with remote write on: every stored sample labelled and queued for a receiver whose
  // sender (its own thread, as in the server) encodes and compresses each batch; the POST itself
  // only counts bytes. The ingest thread's rate is the figure that must hold; the sender's, from
  // the first ingest until its queue is empty, says whether one sender keeps up.
  {
    gpuaas::telemetry::Hub rw_hub;
    gpuaas::telemetry::DeviceDirectory directory;
    gpuaas::telemetry::RemoteWrite rw(rw_hub, directory);
    std::atomic<int64_t> wire_bytes{0}, posts{0};
    gpuaas::telemetry::RemoteWriteOptions o;
    o.url = "bench";
    o.capacity = static_cast<size_t>(per_round) * static_cast<size_t>(rounds) + 1;
    rw.Add(o, [&]() -> gpuaas::telemetry::PostFn {
      return [&](const std::string& body) {
        wire_bytes += static_cast<int64_t>(body.size());
        ++posts;
        return gpuaas::telemetry::PostResult{204, "", std::nullopt};
      };
    });
    rw_hub.SetSink([&rw](std::span<const gpuaas::telemetry::Sample> s) { rw.Take(s); });
    rw.Start();
    int64_t rw_seen = 0;
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) {
      for (int n = 0; n < nodes; ++n) {
        auto res = rw_hub.IngestText(texts[n][r % kVariants], start_ms + r * 15'000);
        if (!res.ok()) return 1;
        rw_seen += res->samples;
      }
    }
    const double rw_ingest_s = Seconds(t0);
    rw.receivers()[0]->WaitSent(std::chrono::minutes(5));
    const double rw_sent_s = Seconds(t0);
    const gpuaas::telemetry::RemoteWriteStats st = rw.receivers()[0]->stats();
    rw.Stop();
    std::printf("%-28s %14.0f %10.0f   (%.0f%% of the same without remote write)\n", "  + remote write queued",
                rw_seen / rw_ingest_s, bytes * rounds / rw_ingest_s / 1e6, 100 * ingest_s / rw_ingest_s);
    std::printf("%-28s %14.0f              %lld samples sent in %lld POSTs, %.1f bytes a sample on the wire "
                "(protobuf + snappy), %lld dropped\n",
                "  remote write sender", static_cast<double>(st.samples_total) / rw_sent_s,
                static_cast<long long>(st.samples_total), static_cast<long long>(posts.load()),
                static_cast<double>(wire_bytes.load()) / static_cast<double>(std::max<int64_t>(1, st.samples_total)),
                static_cast<long long>(st.samples_dropped));
  }

  if (argc > 3 && std::string(argv[3]) == "ingest") return 0;  // for profiling the ingest alone

  // Raw samples in memory: six hours at 15 s of 25 series a GPU, as dcgm-exporter reports them
  // (power noisy to the milliwatt, temperatures slow, clocks steady, energy counting up,
  // utilization wandering; idle GPUs flat), as the store keeps them (Gorilla chunks of 240,
  // telemetry/chunk.h) and as plain (time, value) pairs: the raw ring this store had before, 16
  // bytes a point, beside it in the same run.
  {
    std::mt19937_64 rng(29);
    constexpr int kGpus = 400;
    constexpr int kPoints = 6 * 240;
    constexpr int kFields = 25;
    size_t chunk_bytes = 0;
    int64_t points = 0;
    double by_kind[4] = {0, 0, 0, 0};  // noisy, slow, counter, flat: bytes
    int64_t n_kind[4] = {0, 0, 0, 0};
    for (int g = 0; g < kGpus; ++g) {
      const bool busy = g % 2 == 0;
      for (int f = 0; f < kFields; ++f) {
        // What kind of series field f is: 0 noisy gauge, 1 slow gauge, 2 counter, 3 flat.
        const int kind = f < 4 ? 0 : f < 8 ? 1 : f < 11 ? 2 : 3;
        std::vector<gpuaas::telemetry::XorChunk> chunks(1);
        double v = kind == 2 ? 3.19e8 + g * 1e6 : 40 + f;
        for (int i = 0; i < kPoints; ++i) {
          if (kind == 0) {
            v = busy ? 412.331 + static_cast<double>(rng() % 40000) / 1000.0 - 20 : 71.0 + (rng() % 3) / 1000.0;
          } else if (kind == 1) {
            if (rng() % 20 == 0) v += (rng() % 2 == 0 ? 1 : -1);
          } else if (kind == 2) {
            v += busy ? std::floor(15.0 * (400000.0 + static_cast<double>(rng() % 20000))) : 15.0 * 71000.0;
          }
          if (chunks.back().size() >= 240) {  // as the store cuts them (telemetry/series.cc)
            chunks.back().Seal();
            chunks.reserve(chunks.size() + 1);
            chunks.emplace_back();
          }
          chunks.back().Append(start_ms + 15'000 * i, v);
        }
        size_t b = chunks.capacity() * sizeof(gpuaas::telemetry::XorChunk);
        for (const auto& ch : chunks) b += ch.bytes() - sizeof(gpuaas::telemetry::XorChunk);
        chunk_bytes += b;
        points += kPoints;
        by_kind[kind] += static_cast<double>(b);
        n_kind[kind] += kPoints;
      }
    }
    std::printf("raw samples, 6 h at 15 s, %d GPUs x %d series: %.2f bytes a point in chunks, against %zu as pairs "
                "(the raw ring before); by series: noisy %.2f, slow %.2f, counters %.2f, flat %.2f\n",
                kGpus, kFields, static_cast<double>(chunk_bytes) / static_cast<double>(points), sizeof(int64_t) * 2,
                by_kind[0] / n_kind[0], by_kind[1] / n_kind[1], by_kind[2] / n_kind[2], by_kind[3] / n_kind[3]);
  }

  // Memory per series with full rings: 30 days at one sample a minute fills every ring.
  gpuaas::telemetry::SeriesStore st;
  constexpr int kSeries = 1000;
  std::vector<gpuaas::telemetry::SeriesId> ids;
  for (int i = 0; i < kSeries; ++i) ids.push_back(*st.Intern(fmt::format("GPU-{:08x}-d595-d1c7-d1d2-{:012x}", i, i), Field::kPowerW));
  const size_t empty_bytes = st.MemoryBytes();
  std::vector<gpuaas::telemetry::Sample> batch;
  for (int64_t m = 0; m < 30 * 1440; m += 1) {
    batch.clear();
    for (auto id : ids) batch.push_back({id, start_ms + m * 60'000, 400.0 + (m % 13)});
    st.Append(batch);
    if (m % 1440 == 0) (void)st.TakeClosedRollups();
  }
  std::printf("memory per series: %.0f bytes empty (key and index), %.0f bytes with full rings\n",
              static_cast<double>(empty_bytes) / kSeries, static_cast<double>(st.MemoryBytes()) / kSeries);
  return c.sum > 0 ? 0 : 1;
}
