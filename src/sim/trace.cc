#include "sim/trace.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>

#include "absl/status/status.h"

namespace gpuaas::sim {

namespace {

// A minimal CSV reader for these files: comma-separated, no quoting (the trace has none), an
// optional trailing CR, blank lines skipped.
class CsvReader {
 public:
  explicit CsvReader(std::string_view text) : text_(text) {}

  // The next non-blank line split into fields; false at the end.
  bool Next(std::vector<std::string_view>& fields) {
    while (pos_ < text_.size()) {
      size_t end = text_.find('\n', pos_);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(pos_, end - pos_);
      pos_ = end + 1;
      ++line_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      fields.clear();
      size_t p = 0;
      while (true) {
        const size_t comma = line.find(',', p);
        fields.push_back(
            line.substr(p, comma == std::string_view::npos ? line.size() - p : comma - p));
        if (comma == std::string_view::npos) break;
        p = comma + 1;
      }
      return true;
    }
    return false;
  }
  int line() const { return line_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 0;
};

struct Columns {
  std::map<std::string, size_t, std::less<>> index;
  std::optional<size_t> Find(std::string_view name) const {
    auto it = index.find(name);
    if (it == index.end()) return std::nullopt;
    return it->second;
  }
};

absl::StatusOr<Columns> Header(CsvReader& r, std::vector<std::string_view>& fields,
                               std::initializer_list<std::string_view> required) {
  if (!r.Next(fields)) return absl::InvalidArgumentError("empty file: no header line");
  Columns c;
  for (size_t i = 0; i < fields.size(); ++i) c.index.emplace(std::string(fields[i]), i);
  for (std::string_view name : required) {
    if (!c.Find(name)) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: missing column \"{}\"", r.line(), name));
    }
  }
  return c;
}

absl::StatusOr<int64_t> Int(const CsvReader& r, const std::vector<std::string_view>& fields,
                            const Columns& c, std::string_view name, int64_t lo, int64_t hi) {
  const size_t i = *c.Find(name);
  if (i >= fields.size()) {
    return absl::InvalidArgumentError(
        fmt::format("line {}: column \"{}\" is missing", r.line(), name));
  }
  const std::string_view f = fields[i];
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (ec != std::errc() || p != f.data() + f.size() || f.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("line {}: {} \"{}\" is not an integer", r.line(), name, f));
  }
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(
        fmt::format("line {}: {} {} is outside {}..{}", r.line(), name, v, lo, hi));
  }
  return v;
}

std::string_view Text(const std::vector<std::string_view>& fields, std::optional<size_t> i) {
  return i && *i < fields.size() ? fields[*i] : std::string_view();
}

constexpr int64_t kMaxResource = int64_t{1} << 40;

}  // namespace

absl::StatusOr<std::vector<allocator::NodeSpec>> ParseNodes(std::string_view csv) {
  CsvReader r(csv);
  std::vector<std::string_view> f;
  absl::StatusOr<Columns> c = Header(r, f, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!c.ok()) return c.status();
  std::vector<allocator::NodeSpec> nodes;
  while (r.Next(f)) {
    allocator::NodeSpec n;
    n.name = std::string(Text(f, c->Find("sn")));
    if (n.name.empty()) {
      return absl::InvalidArgumentError(fmt::format("line {}: empty node name (sn)", r.line()));
    }
    absl::StatusOr<int64_t> v = Int(r, f, *c, "cpu_milli", 0, kMaxResource);
    if (!v.ok()) return v.status();
    n.cpu_milli = *v;
    v = Int(r, f, *c, "memory_mib", 0, kMaxResource);
    if (!v.ok()) return v.status();
    n.memory_mib = *v;
    v = Int(r, f, *c, "gpu", 0, allocator::kMaxGpusPerNode);
    if (!v.ok()) return v.status();
    n.gpus = static_cast<int>(*v);
    n.gpu_model = std::string(Text(f, c->Find("model")));
    if (n.gpus > 0 && n.gpu_model.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: node {} has GPUs but no model", r.line(), n.name));
    }
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return absl::InvalidArgumentError("no nodes in the node list");
  return nodes;
}

absl::StatusOr<std::vector<TracePod>> ParsePods(std::string_view csv) {
  CsvReader r(csv);
  std::vector<std::string_view> f;
  absl::StatusOr<Columns> c =
      Header(r, f, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  if (!c.ok()) return c.status();
  const std::optional<size_t> spec = c->Find("gpu_spec");
  const bool times = c->Find("creation_time") && c->Find("deletion_time");
  std::vector<TracePod> pods;
  while (r.Next(f)) {
    TracePod p;
    p.name = std::string(Text(f, c->Find("name")));
    absl::StatusOr<int64_t> v = Int(r, f, *c, "cpu_milli", 0, kMaxResource);
    if (!v.ok()) return v.status();
    p.shape.cpu_milli = *v;
    v = Int(r, f, *c, "memory_mib", 0, kMaxResource);
    if (!v.ok()) return v.status();
    p.shape.memory_mib = *v;
    v = Int(r, f, *c, "num_gpu", 0, allocator::kMaxGpusPerNode);
    if (!v.ok()) return v.status();
    p.shape.num_gpu = static_cast<int>(*v);
    v = Int(r, f, *c, "gpu_milli", 0, allocator::kMilliGpu);
    if (!v.ok()) return v.status();
    p.shape.gpu_milli = static_cast<int32_t>(*v);
    if (p.shape.num_gpu == 0 && p.shape.gpu_milli != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "line {}: gpu_milli {} without a GPU (num_gpu 0)", r.line(), p.shape.gpu_milli));
    }
    if (p.shape.num_gpu > 0 && p.shape.gpu_milli == 0) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: num_gpu {} with gpu_milli 0", r.line(), p.shape.num_gpu));
    }
    if (p.shape.num_gpu > 1 && p.shape.gpu_milli != allocator::kMilliGpu) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: a pod with {} GPUs must take whole GPUs (gpu_milli 1000), not {}",
                      r.line(), p.shape.num_gpu, p.shape.gpu_milli));
    }
    p.shape.gpu_models = std::string(Text(f, spec));
    if (times) {
      v = Int(r, f, *c, "creation_time", 0, kMaxResource);
      if (!v.ok()) return v.status();
      p.creation_time = *v;
      v = Int(r, f, *c, "deletion_time", 0, kMaxResource);
      if (!v.ok()) return v.status();
      p.deletion_time = *v;
    }
    pods.push_back(std::move(p));
  }
  if (pods.empty()) return absl::InvalidArgumentError("no pods in the pod list");
  return pods;
}

}  // namespace gpuaas::sim
