#include "catalog/catalog.h"

#include <algorithm>
#include <cstdint>
#include <array>
#include <cassert>

#include "catalog/internal/catalog_data.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace gpuaas::catalog {
namespace internal {

const std::vector<GpuModel>& FullOnlyModels() {
  // GPUs without MIG support. Names follow the catalogue's MODEL-MEMORY style; products are the
  // NVML names as GFD sanitises them (nvidia-smi -q of an L40S prints "NVIDIA L40S", a T4 "Tesla T4").
  static constexpr std::string_view kL40S[] = {"NVIDIA-L40S"};
  static constexpr std::string_view kL4[] = {"NVIDIA-L4"};
  static constexpr std::string_view kA10[] = {"NVIDIA-A10"};
  static constexpr std::string_view kA10G[] = {"NVIDIA-A10G"};
  static constexpr std::string_view kT4[] = {"Tesla-T4", "NVIDIA-T4"};
  static const std::vector<GpuModel> kModels = {
      {"L40S-48GB", "ada", 48, 0, 0, false, {}, kL40S},
      {"L4-24GB", "ada", 24, 0, 0, false, {}, kL4},
      {"A10-24GB", "ampere", 24, 0, 0, false, {}, kA10},
      {"A10G-24GB", "ampere", 24, 0, 0, false, {}, kA10G},
      {"T4-16GB", "turing", 16, 0, 0, false, {}, kT4},
  };
  return kModels;
}

}  // namespace internal

namespace {

const std::vector<GpuModel>& Models() {
  static const std::vector<GpuModel> kAll = [] {
    std::vector<GpuModel> all = internal::MigModels();
    const auto& full = internal::FullOnlyModels();
    all.insert(all.end(), full.begin(), full.end());
    return all;
  }();
  return kAll;
}

// Occupancy of one GPU while checking or building a layout. No allocation: the allocator asks
// these questions for every GPU it considers.
struct Occupancy {
  static constexpr size_t kMaxProfiles = 16;
  explicit Occupancy(const GpuModel& m) : base(m.profiles.data()) {
    assert(m.profiles.size() <= kMaxProfiles);  // the catalogue's models have at most 7
  }
  const MigProfile* base;
  uint32_t memory_mask = 0;
  int compute = 0;
  int media = 0;
  std::array<int, kMaxProfiles> counts{};
  int& Count(const MigProfile& p) { return counts[static_cast<size_t>(&p - base)]; }
  int Count(const MigProfile& p) const { return counts[static_cast<size_t>(&p - base)]; }

  // Why `inst` cannot be added, or empty when it can.
  std::string Conflict(const GpuModel& model, const Instance& inst) const {
    const MigProfile& p = *inst.profile;
    if (std::find(p.starts.begin(), p.starts.end(), inst.start) == p.starts.end()) {
      return fmt::format("{} cannot start at slot {}; legal starts are {}", p.name, inst.start,
                         fmt::join(p.starts, ","));
    }
    const uint32_t mask = ((1u << p.memory_slices) - 1u) << inst.start;
    if (memory_mask & mask) {
      return fmt::format("{}@{} overlaps memory slices already in use", p.name, inst.start);
    }
    if (compute + p.compute_slices > model.compute_slices) {
      return fmt::format("{}@{} needs {} compute slices but only {} of {} are left", p.name,
                         inst.start, p.compute_slices, model.compute_slices - compute,
                         model.compute_slices);
    }
    if (Count(p) >= p.max_count) {
      return fmt::format("at most {} instance(s) of {} fit on one {}", p.max_count, p.name,
                         model.name);
    }
    if (p.media_extensions() && media > 0) {
      return fmt::format("{}: a GPU holds at most one +me instance", p.name);
    }
    return "";
  }

  void Add(const Instance& inst) {
    const MigProfile& p = *inst.profile;
    memory_mask |= ((1u << p.memory_slices) - 1u) << inst.start;
    compute += p.compute_slices;
    media += p.media_extensions() ? 1 : 0;
    ++Count(p);
  }
  void Remove(const Instance& inst) {
    const MigProfile& p = *inst.profile;
    memory_mask &= ~(((1u << p.memory_slices) - 1u) << inst.start);
    compute -= p.compute_slices;
    media -= p.media_extensions() ? 1 : 0;
    --Count(p);
  }
};

bool InstanceLess(const Instance& a, const Instance& b) {
  if (a.start != b.start) return a.start < b.start;
  return a.profile->name < b.profile->name;
}

// Every (profile, start) pair of a model, in canonical order.
std::vector<Instance> Candidates(const GpuModel& model) {
  std::vector<Instance> out;
  for (const MigProfile& p : model.profiles) {
    for (int s : p.starts) out.push_back({&p, s});
  }
  std::sort(out.begin(), out.end(), InstanceLess);
  return out;
}

void Enumerate(const GpuModel& model, const std::vector<Instance>& cands, size_t from,
               Occupancy& occ, Layout& cur, std::vector<Layout>& out) {
  for (size_t i = from; i < cands.size(); ++i) {
    if (!occ.Conflict(model, cands[i]).empty()) continue;
    occ.Add(cands[i]);
    cur.push_back(cands[i]);
    out.push_back(cur);
    Enumerate(model, cands, i + 1, occ, cur, out);
    cur.pop_back();
    occ.Remove(cands[i]);
  }
}

bool Place(const GpuModel& model, const std::vector<const MigProfile*>& todo, size_t i,
           Occupancy& occ, Layout& cur) {
  if (i == todo.size()) return true;
  for (int s : todo[i]->starts) {
    Instance inst{todo[i], s};
    if (!occ.Conflict(model, inst).empty()) continue;
    occ.Add(inst);
    cur.push_back(inst);
    if (Place(model, todo, i + 1, occ, cur)) return true;
    cur.pop_back();
    occ.Remove(inst);
  }
  return false;
}

}  // namespace

std::span<const GpuModel> AllModels() { return Models(); }

const GpuModel* FindModel(std::string_view name) {
  for (const GpuModel& m : Models()) {
    if (EqualsIgnoreCase(m.name, name)) return &m;
  }
  return nullptr;
}

absl::StatusOr<const GpuModel*> ModelFromProduct(std::string_view product) {
  std::string p(Trim(product));
  std::replace(p.begin(), p.end(), ' ', '-');
  // GFD appends "-SHARED" under time-slicing and "-MIG-<profile>" under the single strategy.
  if (EndsWithIgnoreCase(p, "-SHARED")) p.resize(p.size() - 7);
  if (size_t mig = p.find("-MIG-"); mig != std::string::npos) p.resize(mig);
  auto strip_vendor = [](std::string_view s) {
    return StartsWithIgnoreCase(s, "NVIDIA-") ? s.substr(7) : s;
  };
  for (const GpuModel& m : Models()) {
    for (std::string_view label : m.products) {
      if (EqualsIgnoreCase(strip_vendor(label), strip_vendor(p))) return &m;
    }
  }
  return absl::NotFoundError(fmt::format("no GPU model matches product \"{}\"", product));
}

const MigProfile* FindProfile(const GpuModel& model, std::string_view name) {
  for (const MigProfile& p : model.profiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::Status ValidateLayout(const GpuModel& model, std::span<const Instance> layout) {
  if (!model.mig_capable && !layout.empty()) {
    return absl::InvalidArgumentError(fmt::format("{} does not support MIG", model.name));
  }
  Occupancy occ(model);
  for (const Instance& inst : layout) {
    if (inst.profile == nullptr || inst.profile < model.profiles.data() ||
        inst.profile >= model.profiles.data() + model.profiles.size()) {
      return absl::InvalidArgumentError(
          fmt::format("instance uses a profile that {} does not have", model.name));
    }
    if (std::string why = occ.Conflict(model, inst); !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
    occ.Add(inst);
  }
  return absl::OkStatus();
}

std::vector<int> FreeStarts(const GpuModel& model, std::span<const Instance> used,
                            const MigProfile& profile) {
  if (FindProfile(model, profile.name) != &profile || !ValidateLayout(model, used).ok()) return {};
  Occupancy occ(model);
  for (const Instance& inst : used) occ.Add(inst);
  std::vector<int> out;
  for (int s : profile.starts) {
    if (occ.Conflict(model, {&profile, s}).empty()) out.push_back(s);
  }
  return out;
}

std::vector<Layout> AllLayouts(const GpuModel& model) {
  std::vector<Layout> out;
  if (!model.mig_capable) return out;
  const std::vector<Instance> cands = Candidates(model);
  Occupancy occ(model);
  Layout cur;
  Enumerate(model, cands, 0, occ, cur, out);
  // Sort by the formatted text, computed once per layout rather than per comparison.
  std::vector<std::pair<std::string, size_t>> keys;
  keys.reserve(out.size());
  for (size_t i = 0; i < out.size(); ++i) keys.emplace_back(FormatLayout(out[i]), i);
  std::sort(keys.begin(), keys.end());
  std::vector<Layout> sorted;
  sorted.reserve(out.size());
  for (const auto& [text, i] : keys) sorted.push_back(std::move(out[i]));
  return sorted;
}

std::vector<Layout> MaximalLayouts(const GpuModel& model) {
  std::vector<Layout> out;
  const std::vector<Instance> cands = Candidates(model);
  for (Layout& layout : AllLayouts(model)) {
    Occupancy occ(model);
    for (const Instance& inst : layout) occ.Add(inst);
    bool extendable = std::any_of(cands.begin(), cands.end(), [&](const Instance& c) {
      return occ.Conflict(model, c).empty();
    });
    if (!extendable) out.push_back(std::move(layout));
  }
  return out;
}

absl::StatusOr<Layout> PlaceProfiles(const GpuModel& model, std::span<const std::string> profiles) {
  std::vector<const MigProfile*> todo;
  for (const std::string& name : profiles) {
    const MigProfile* p = FindProfile(model, name);
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{} has no MIG profile \"{}\"", model.name, name));
    }
    todo.push_back(p);
  }
  std::stable_sort(todo.begin(), todo.end(), [](const MigProfile* a, const MigProfile* b) {
    if (a->memory_slices != b->memory_slices) return a->memory_slices > b->memory_slices;
    return a->compute_slices > b->compute_slices;
  });
  Occupancy occ(model);
  Layout cur;
  if (!Place(model, todo, 0, occ, cur)) {
    return absl::InvalidArgumentError(fmt::format("no legal layout of {} holds {}", model.name,
                                                  fmt::join(profiles, " + ")));
  }
  SortLayout(cur);
  return cur;
}

absl::StatusOr<Layout> ParseLayout(const GpuModel& model, std::string_view text) {
  Layout fixed;
  std::vector<std::string> floating;
  for (std::string_view tok : SplitAny(text, " ,")) {
    std::vector<std::string_view> parts = Split(tok, '@');
    if (parts.size() > 2) {
      return absl::InvalidArgumentError(fmt::format("bad MIG instance \"{}\"", tok));
    }
    const MigProfile* p = FindProfile(model, parts[0]);
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{} has no MIG profile \"{}\"", model.name, parts[0]));
    }
    if (parts.size() == 1) {
      floating.emplace_back(parts[0]);
      continue;
    }
    std::optional<int64_t> start = ParseInt(parts[1]);
    if (!start || *start < 0 || *start > 31) {
      return absl::InvalidArgumentError(fmt::format("bad start slot in \"{}\"", tok));
    }
    fixed.push_back({p, static_cast<int>(*start)});
  }
  if (absl::Status s = ValidateLayout(model, fixed); !s.ok()) return s;
  if (floating.empty()) {
    SortLayout(fixed);
    return fixed;
  }
  // Place the instances without a start around the fixed ones.
  std::vector<const MigProfile*> todo;
  for (const std::string& name : floating) todo.push_back(FindProfile(model, name));
  std::stable_sort(todo.begin(), todo.end(), [](const MigProfile* a, const MigProfile* b) {
    return a->memory_slices > b->memory_slices;
  });
  Occupancy occ(model);
  for (const Instance& inst : fixed) occ.Add(inst);
  Layout cur = fixed;
  if (!Place(model, todo, 0, occ, cur)) {
    return absl::InvalidArgumentError(
        fmt::format("no legal layout of {} holds \"{}\"", model.name, text));
  }
  SortLayout(cur);
  return cur;
}

void SortLayout(Layout& layout) { std::sort(layout.begin(), layout.end(), InstanceLess); }

std::string FormatLayout(std::span<const Instance> layout) {
  Layout sorted(layout.begin(), layout.end());
  SortLayout(sorted);
  std::string out;
  for (const Instance& i : sorted) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}@{}", i.profile->name, i.start);
  }
  return out;
}

std::string ResourceName(std::string_view profile) {
  if (profile == kFullProfile) return "nvidia.com/gpu";
  std::string name = fmt::format("nvidia.com/mig-{}", profile);
  std::replace(name.begin(), name.end(), '+', '.');
  return name;
}

double GpuShare(std::string_view model, std::string_view profile) {
  if (profile == kFullProfile) return 1;
  const GpuModel* m = FindModel(model);
  if (m == nullptr || m->compute_slices == 0) return 1;
  const MigProfile* p = FindProfile(*m, profile);
  return p == nullptr ? 1 : static_cast<double>(p->compute_slices) / m->compute_slices;
}

}  // namespace gpuaas::catalog
