// A streaming parser of the Prometheus text exposition format (version 0.0.4), the format
// dcgm-exporter serves and the agent pushes. Layer 8 of docs/architecture.md: pure, no I/O.
//
// Strict where Prometheus is strict, so that a bad scrape is refused with its line number rather
// than half-read: metric and label names, label-value escapes (\\ \" \n only), a value that is
// a float, NaN or ±Inf, an optional int64 millisecond timestamp, no duplicate label names, HELP
// and TYPE at most once per name, TYPE before the first sample of its family, a known TYPE, and
// a line feed after the last line. Empty lines and other comments are skipped. Like Prometheus,
// it does not refuse a family whose samples are split into several groups (NVIDIA's own MIG
// sample shows that). Quoted UTF-8 metric names are refused with a clear message.
//
// Speed matters (millions of samples a second): a sample's name, series text and label values
// are views into the input, or into the parser's scratch buffer when an escape had to be
// undone; they are valid only during the callback.
#ifndef GPUAAS_TELEMETRY_PROM_TEXT_H_
#define GPUAAS_TELEMETRY_PROM_TEXT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace gpuaas::telemetry {

// Transparent hashing for maps keyed by std::string and looked up by std::string_view (Debian's
// Abseil has its own string_view, so absl's default heterogeneous lookup does not take ours).
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct StringViewEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};
template <typename V>
using StringMap = absl::flat_hash_map<std::string, V, StringViewHash, StringViewEq>;

// Bounds on what one sample may carry (dcgm-exporter's rows have about ten short labels).
inline constexpr size_t kMaxLabels = 64;
inline constexpr size_t kMaxLabelValueBytes = 1024;

enum class MetricType { kUntyped, kCounter, kGauge, kHistogram, kSummary };
std::string_view ToString(MetricType t);

struct PromLabel {
  std::string_view name;
  std::string_view value;  // unescaped
};

struct PromSample {
  std::string_view name;
  // The series as written, from the name to the closing brace: equal text means the same
  // series, so callers can cache what they resolved from the labels by it.
  std::string_view series;
  std::vector<PromLabel> labels;  // in written order
  double value = 0;
  std::optional<int64_t> timestamp_ms;
  MetricType type = MetricType::kUntyped;  // of its family, from TYPE
  int64_t line = 0;
};

class PromSink {
 public:
  virtual ~PromSink() = default;
  // Called for every sample in input order. A non-OK status stops the parse and is returned
  // (with the line number added).
  virtual absl::Status OnSample(const PromSample& sample) = 0;
  // Called for each HELP line; the default ignores it.
  virtual void OnHelp(std::string_view /*name*/, std::string_view /*help*/) {}
};

// Feed the text in chunks of any size (lines may span chunks), then call Finish. After an error
// the parser stays failed. Not thread-safe; one parser per stream.
class PromTextParser {
 public:
  explicit PromTextParser(PromSink& sink) : sink_(sink) {}

  // InvalidArgument "line N: ..." on malformed input.
  absl::Status Feed(std::string_view chunk);
  // Checks the end of the input (the last line must end with a line feed).
  absl::Status Finish();

  int64_t lines() const { return line_; }
  int64_t samples() const { return samples_; }

 private:
  absl::Status Line(std::string_view line);
  absl::Status Comment(std::string_view line);
  absl::Status Sample(std::string_view line);
  absl::Status Fail(std::string_view what);
  MetricType FamilyType(std::string_view name) const;

  struct Family {
    MetricType type = MetricType::kUntyped;
    bool has_type = false;
    bool has_help = false;
    bool has_samples = false;
  };

  PromSink& sink_;
  std::string pending_;  // an unfinished line carried to the next chunk
  std::string scratch_;  // unescaped label values
  PromSample sample_;
  StringMap<Family> families_;
  std::string last_family_;
  int64_t line_ = 0;
  int64_t samples_ = 0;
  absl::Status error_;
};

// Parses a whole text; convenience over PromTextParser.
absl::Status ParsePromText(std::string_view text, PromSink& sink);

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_PROM_TEXT_H_
