// Fuzz target for the Prometheus text parser (telemetry/prom_text.h) and the telemetry ingest
// behind it. Properties: no crash, leak or sanitizer report on any input; feeding the input in
// two chunks at any cut gives the same outcome and samples as feeding it whole; every error
// names a line within the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/hub.h"
#include "telemetry/prom_text.h"
#include "telemetry/report.h"

namespace {

class Record final : public gpuaas::telemetry::PromSink {
 public:
  absl::Status OnSample(const gpuaas::telemetry::PromSample& s) override {
    std::string line(s.series);
    for (const auto& l : s.labels) line += "|" + std::string(l.name) + "=" + std::string(l.value);
    line += "|" + std::to_string(s.value) + "|" + std::to_string(s.timestamp_ms.value_or(-1));
    got.push_back(std::move(line));
    return absl::OkStatus();
  }
  std::vector<std::string> got;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  Record whole;
  absl::Status a = gpuaas::telemetry::ParsePromText(input, whole);
  if (!a.ok() && std::string(a.message()).rfind("line ", 0) != 0) std::abort();

  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  Record split;
  gpuaas::telemetry::PromTextParser p(split);
  absl::Status b = p.Feed(input.substr(0, cut));
  if (b.ok()) b = p.Feed(input.substr(cut));
  if (b.ok()) b = p.Finish();
  if (a.ok() != b.ok() || (!a.ok() && a.message() != b.message())) std::abort();
  if (a.ok() && whole.got != split.got) std::abort();

  gpuaas::telemetry::Hub hub;
  (void)hub.IngestText(input, 1'800'000'000'000);
  if (absl::StatusOr<gpuaas::telemetry::NodeReport> r = gpuaas::telemetry::DecodeReport(input); r.ok()) {
    (void)hub.IngestReport(*r, 1'800'000'000'000);
    absl::StatusOr<gpuaas::telemetry::NodeReport> again =
        gpuaas::telemetry::DecodeReport(gpuaas::telemetry::EncodeReport(*r));
    if (!again.ok()) std::abort();
    (void)hub.IngestText(gpuaas::telemetry::RenderDcgmText(*r), 1'800'000'000'000);
  }
  return 0;
}
