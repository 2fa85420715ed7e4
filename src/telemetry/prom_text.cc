#include "telemetry/prom_text.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "fmt/format.h"

namespace gpuaas::telemetry {
namespace {

// Character classes as bits of one table: names are scanned a character at a time, millions of
// lines a second.
enum : uint8_t { kNameStart = 1, kNameChar = 2, kLabelStart = 4, kLabelChar = 8 };
constexpr std::array<uint8_t, 256> kClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    t[c] = static_cast<uint8_t>((alpha || c == ':' ? kNameStart : 0) | (alpha || digit || c == ':' ? kNameChar : 0) |
                                (alpha ? kLabelStart : 0) | (alpha || digit ? kLabelChar : 0));
  }
  return t;
}();
bool IsNameStart(char c) { return kClass[static_cast<uint8_t>(c)] & kNameStart; }
bool IsNameChar(char c) { return kClass[static_cast<uint8_t>(c)] & kNameChar; }
bool IsLabelStart(char c) { return kClass[static_cast<uint8_t>(c)] & kLabelStart; }
bool IsLabelChar(char c) { return kClass[static_cast<uint8_t>(c)] & kLabelChar; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Length of the metric name at the start of `s` (0 if none).
size_t MetricNameLength(std::string_view s) {
  if (s.empty() || !IsNameStart(s[0])) return 0;
  size_t i = 1;
  while (i < s.size() && IsNameChar(s[i])) ++i;
  return i;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// A Go-style float: decimal or exponent form with an optional sign, NaN, Inf, +Inf, -Inf.
bool ParseValue(std::string_view s, double& out) {
  if (s.empty()) return false;
  bool neg = false;
  std::string_view body = s;
  if (body[0] == '+' || body[0] == '-') {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (EqualsNoCase(body, "inf") || EqualsNoCase(body, "infinity")) {
    out = neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  if (EqualsNoCase(body, "nan")) {
    if (body.size() != s.size()) return false;  // no signed NaN
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (body.empty() || !((body[0] >= '0' && body[0] <= '9') || body[0] == '.')) return false;
  double v = 0;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (end != body.data() + body.size()) return false;
  // Out of range: Go's ParseFloat gives ±Inf or 0 with an error; Prometheus refuses the line.
  if (ec != std::errc()) return false;
  out = neg ? -v : v;
  return true;
}

bool ParseTimestamp(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const char* b = s.data();
  if (*b == '+') ++b;
  auto [end, ec] = std::from_chars(b, s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string_view ToString(MetricType t) {
  switch (t) {
    case MetricType::kUntyped: return "untyped";
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
    case MetricType::kSummary: return "summary";
  }
  return "untyped";
}

absl::Status PromTextParser::Fail(std::string_view what) {
  error_ = absl::InvalidArgumentError(fmt::format("line {}: {}", line_, what));
  return error_;
}

absl::Status PromTextParser::Feed(std::string_view chunk) {
  if (!error_.ok()) return error_;
  size_t pos = 0;
  if (!pending_.empty()) {
    const size_t nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      pending_.append(chunk);
      return absl::OkStatus();
    }
    pending_.append(chunk.substr(0, nl));
    std::string line = std::move(pending_);
    pending_.clear();
    ++line_;
    if (absl::Status s = Line(line); !s.ok()) return s;
    pos = nl + 1;
  }
  while (pos < chunk.size()) {
    const size_t nl = chunk.find('\n', pos);
    if (nl == std::string_view::npos) {
      pending_.assign(chunk.substr(pos));
      return absl::OkStatus();
    }
    ++line_;
    if (absl::Status s = Line(chunk.substr(pos, nl - pos)); !s.ok()) return s;
    pos = nl + 1;
  }
  return absl::OkStatus();
}

absl::Status PromTextParser::Finish() {
  if (!error_.ok()) return error_;
  if (!pending_.empty()) {
    ++line_;
    return Fail("the last line does not end with a line feed");
  }
  return absl::OkStatus();
}

absl::Status PromTextParser::Line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') {
    return Fail("carriage return before the line feed (the format wants \\n line ends)");
  }
  size_t i = 0;
  while (i < line.size() && IsBlank(line[i])) ++i;
  if (i == line.size()) return absl::OkStatus();  // empty lines are ignored
  if (line[i] == '#') return Comment(line.substr(i));
  return Sample(line.substr(i));
}

MetricType PromTextParser::FamilyType(std::string_view name) const {
  if (auto it = families_.find(name); it != families_.end() && it->second.has_type) return it->second.type;
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      auto it = families_.find(name.substr(0, name.size() - suffix.size()));
      if (it != families_.end() &&
          (it->second.type == MetricType::kHistogram ||
           (it->second.type == MetricType::kSummary && suffix != "_bucket"))) {
        return it->second.type;
      }
    }
  }
  return MetricType::kUntyped;
}

absl::Status PromTextParser::Comment(std::string_view line) {
  // '#', HELP or TYPE, the metric name, then the doc or the type; anything else after '#' is a
  // comment.
  std::string_view rest = line.substr(1);
  size_t i = 0;
  while (i < rest.size() && IsBlank(rest[i])) ++i;
  rest.remove_prefix(i);
  const bool help = rest.starts_with("HELP") && (rest.size() == 4 || IsBlank(rest[4]));
  const bool type = rest.starts_with("TYPE") && (rest.size() == 4 || IsBlank(rest[4]));
  if (!help && !type) return absl::OkStatus();
  rest.remove_prefix(4);
  i = 0;
  while (i < rest.size() && IsBlank(rest[i])) ++i;
  rest.remove_prefix(i);
  const size_t n = MetricNameLength(rest);
  if (n == 0) return Fail(fmt::format("{} without a valid metric name", help ? "HELP" : "TYPE"));
  if (n < rest.size() && !IsBlank(rest[n])) {
    return Fail(fmt::format("invalid character '{}' in metric name", rest[n]));
  }
  const std::string_view name = rest.substr(0, n);
  rest.remove_prefix(n);
  i = 0;
  while (i < rest.size() && IsBlank(rest[i])) ++i;
  rest.remove_prefix(i);
  Family& f = families_[name];
  if (help) {
    if (f.has_help) return Fail(fmt::format("second HELP line for {}", name));
    f.has_help = true;
    std::string doc;
    doc.reserve(rest.size());
    for (size_t k = 0; k < rest.size(); ++k) {
      if (rest[k] != '\\') {
        doc.push_back(rest[k]);
        continue;
      }
      if (k + 1 == rest.size()) return Fail("HELP text ends in a lone backslash");
      const char e = rest[++k];
      if (e == '\\') doc.push_back('\\');
      else if (e == 'n') doc.push_back('\n');
      else return Fail(fmt::format("invalid escape \\{} in HELP text (only \\\\ and \\n)", e));
    }
    sink_.OnHelp(name, doc);
    return absl::OkStatus();
  }
  if (f.has_type) return Fail(fmt::format("second TYPE line for {}", name));
  if (f.has_samples) return Fail(fmt::format("TYPE line for {} after its samples", name));
  while (!rest.empty() && IsBlank(rest.back())) rest.remove_suffix(1);
  if (rest == "counter") f.type = MetricType::kCounter;
  else if (rest == "gauge") f.type = MetricType::kGauge;
  else if (rest == "histogram") f.type = MetricType::kHistogram;
  else if (rest == "summary") f.type = MetricType::kSummary;
  else if (rest == "untyped") f.type = MetricType::kUntyped;
  else if (rest.empty()) return Fail(fmt::format("TYPE line for {} has no type", name));
  else return Fail(fmt::format("unknown metric type \"{}\" for {}", rest, name));
  f.has_type = true;
  return absl::OkStatus();
}

absl::Status PromTextParser::Sample(std::string_view line) {
  PromSample& s = sample_;
  s.labels.clear();
  s.line = line_;
  if (line[0] == '{') {
    return Fail("quoted (UTF-8) metric names are not supported; use a legacy metric name");
  }
  const size_t n = MetricNameLength(line);
  if (n == 0) return Fail(fmt::format("invalid character '{}' at the start of a metric name", line[0]));
  s.name = line.substr(0, n);
  size_t i = n;
  if (i < line.size() && line[i] == '{') {
    ++i;
    bool scratch_reserved = false;
    while (true) {
      while (i < line.size() && IsBlank(line[i])) ++i;
      if (i >= line.size()) return Fail("label set not closed with '}'");
      if (line[i] == '}') break;
      if (line[i] == '"') return Fail("quoted (UTF-8) label names are not supported");
      if (!IsLabelStart(line[i])) return Fail(fmt::format("invalid character '{}' at the start of a label name", line[i]));
      const size_t ls = i;
      while (i < line.size() && IsLabelChar(line[i])) ++i;
      const std::string_view lname = line.substr(ls, i - ls);
      while (i < line.size() && IsBlank(line[i])) ++i;
      if (i >= line.size() || line[i] != '=') return Fail(fmt::format("expected '=' after label name {}", lname));
      ++i;
      while (i < line.size() && IsBlank(line[i])) ++i;
      if (i >= line.size() || line[i] != '"') return Fail(fmt::format("label {}: value must start with '\"'", lname));
      ++i;
      const size_t vs = i;
      bool escaped = false;
      // Fast path: the closing quote, with no backslash before it (the common case).
      const char* q = static_cast<const char*>(std::memchr(line.data() + i, '"', line.size() - i));
      if (q != nullptr && std::memchr(line.data() + i, '\\', static_cast<size_t>(q - (line.data() + i))) == nullptr) {
        i = static_cast<size_t>(q - line.data());
      } else {
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            escaped = true;
            if (i + 1 >= line.size()) break;
            const char e = line[i + 1];
            if (e != '\\' && e != '"' && e != 'n') {
              return Fail(fmt::format("label {}: invalid escape \\{} (only \\\\, \\\" and \\n)", lname, e));
            }
            i += 2;
            continue;
          }
          ++i;
        }
      }
      if (i >= line.size()) return Fail(fmt::format("label {}: value not closed with '\"'", lname));
      std::string_view value = line.substr(vs, i - vs);
      ++i;  // closing quote
      if (escaped) {
        if (!scratch_reserved) {
          // Views into scratch_ must stay valid: never let it reallocate within a line.
          scratch_.clear();
          scratch_.reserve(line.size());
          scratch_reserved = true;
        }
        const size_t at = scratch_.size();
        for (size_t k = 0; k < value.size(); ++k) {
          if (value[k] == '\\') {
            const char e = value[++k];
            scratch_.push_back(e == 'n' ? '\n' : e);
          } else {
            scratch_.push_back(value[k]);
          }
        }
        value = std::string_view(scratch_).substr(at);
      }
      if (value.size() > kMaxLabelValueBytes) {
        return Fail(fmt::format("label {}: a value of {} bytes exceeds {}", lname, value.size(), kMaxLabelValueBytes));
      }
      // Bounded, so that the duplicate check below stays cheap.
      if (s.labels.size() >= kMaxLabels) return Fail(fmt::format("more than {} labels on one sample", kMaxLabels));
      for (const PromLabel& l : s.labels) {
        if (l.name.size() == lname.size() && l.name[0] == lname[0] && l.name == lname) {
          return Fail(fmt::format("duplicate label {}", lname));
        }
      }
      s.labels.push_back({lname, value});
      while (i < line.size() && IsBlank(line[i])) ++i;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') break;
      return Fail(fmt::format("expected ',' or '}}' after label {}", lname));
    }
    ++i;  // '}'
  }
  s.series = line.substr(0, i);
  if (i >= line.size()) return Fail(fmt::format("sample {} has no value", s.name));
  if (!IsBlank(line[i])) return Fail(fmt::format("invalid character '{}' after {}", line[i], s.series.size() > 80 ? s.name : s.series));
  while (i < line.size() && IsBlank(line[i])) ++i;
  size_t ve = i;
  while (ve < line.size() && !IsBlank(line[ve])) ++ve;
  const std::string_view value = line.substr(i, ve - i);
  if (value.empty()) return Fail(fmt::format("sample {} has no value", s.name));
  if (!ParseValue(value, s.value)) return Fail(fmt::format("invalid value \"{}\"", value));
  i = ve;
  while (i < line.size() && IsBlank(line[i])) ++i;
  s.timestamp_ms.reset();
  if (i < line.size()) {
    size_t te = i;
    while (te < line.size() && !IsBlank(line[te])) ++te;
    int64_t ts = 0;
    if (!ParseTimestamp(line.substr(i, te - i), ts)) {
      return Fail(fmt::format("invalid timestamp \"{}\" (int64 milliseconds)", line.substr(i, te - i)));
    }
    s.timestamp_ms = ts;
    i = te;
    while (i < line.size() && IsBlank(line[i])) ++i;
    if (i < line.size()) return Fail("unexpected text after the timestamp");
  }
  // Family bookkeeping, skipped while the same name repeats (the common case).
  if (s.name != last_family_) {
    last_family_.assign(s.name);
    families_[s.name].has_samples = true;
    s.type = FamilyType(s.name);
  }
  ++samples_;
  if (absl::Status st = sink_.OnSample(s); !st.ok()) {
    // The sink's own code stays (a refusal is not a syntax error); the line is added.
    error_ = absl::Status(st.code(), fmt::format("line {}: {}", line_, std::string(st.message())));
    return error_;
  }
  return absl::OkStatus();
}

absl::Status ParsePromText(std::string_view text, PromSink& sink) {
  PromTextParser p(sink);
  if (absl::Status s = p.Feed(text); !s.ok()) return s;
  return p.Finish();
}

}  // namespace gpuaas::telemetry
