// The GPU catalogue: every GPU model gpuaas knows, its MIG geometry, and the rules that say which
// MIG layouts are legal. Layer 2 of docs/architecture.md: pure data and functions, no I/O, no
// allocation policy. All functions are thread-safe (the tables are immutable).
//
// Geometry: a MIG GPU has `compute_slices` SM slices and `memory_slices` memory slices (7 and 8 on
// A100/H100/H200/B200, 4 and 4 on A30). A profile occupies a contiguous run of memory slices that
// must begin at one of its legal start slots; this is NVML's placement {start, size}, in memory-slice
// units, as `nvidia-smi mig -lgipp` prints it.
#ifndef GPUAAS_CATALOG_CATALOG_H_
#define GPUAAS_CATALOG_CATALOG_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuaas::catalog {

// The name used for a whole GPU (MIG disabled, or the GPU handed out as one device).
inline constexpr std::string_view kFullProfile = "full";

struct MigProfile {
  std::string_view name;  // "3g.71gb", "1g.18gb+me"
  int id;                 // GPU-instance profile ID as nvidia-smi prints it (e.g. 9 for 3g)
  int compute_slices;
  int memory_slices;      // also the placement size
  int memory_gb;
  int max_count;          // most instances of this profile on one GPU
  std::span<const int> starts;  // legal placement start slots
  int memory_mib;         // 0 where no source gives it
  int sm_count;           // 0 where no source gives it

  // True for media-extension profiles (+me): a GPU holds at most one of them in total.
  bool media_extensions() const { return name.find("+me") != std::string_view::npos; }
};

struct GpuModel {
  std::string_view name;    // "H200-SXM-141GB": the gpu_model of the catalogue
  std::string_view family;  // ampere, hopper, blackwell, ada, turing
  int memory_gb;
  int compute_slices;       // 0 for GPUs without MIG
  int memory_slices;        // 0 for GPUs without MIG
  bool mig_capable;
  std::span<const MigProfile> profiles;         // empty for GPUs without MIG
  std::span<const std::string_view> products;   // nvidia.com/gpu.product label values
};

// One MIG instance of a layout: a profile at a start slot.
struct Instance {
  const MigProfile* profile;
  int start;
  friend bool operator==(const Instance& a, const Instance& b) {
    return a.profile == b.profile && a.start == b.start;
  }
};
using Layout = std::vector<Instance>;

// Every model, MIG-capable ones first in catalogue order, then full-GPU-only ones.
std::span<const GpuModel> AllModels();

// The model named `name` (exact gpu_model, case-insensitive), or nullptr.
const GpuModel* FindModel(std::string_view name);

// The model behind a device-plugin/GFD `nvidia.com/gpu.product` label such as "NVIDIA-H200",
// "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb" or "A100-SXM4-40GB-MIG-1g.5gb-SHARED", or an NVML name such
// as "NVIDIA H200". NotFound names the label when no model matches.
absl::StatusOr<const GpuModel*> ModelFromProduct(std::string_view product);

// The profile `name` of `model`, or nullptr (also for "full").
const MigProfile* FindProfile(const GpuModel& model, std::string_view name);

// OK when `layout` may exist on one GPU of `model`; InvalidArgument with the first broken rule
// otherwise: unknown profile, illegal start slot, overlapping memory slices, too many compute
// slices, too many instances of a profile, more than one +me instance.
absl::Status ValidateLayout(const GpuModel& model, std::span<const Instance> layout);

// Start slots where one more instance of `profile` (a profile of `model`) could go on a GPU that
// already holds `used`, ascending. Empty when it cannot go anywhere, or when `used` is not a
// legal layout of `model`.
std::vector<int> FreeStarts(const GpuModel& model, std::span<const Instance> used,
                            const MigProfile& profile);

// Every legal non-empty layout of `model`, each sorted (start, then profile name), in canonical
// order of FormatLayout. Empty for GPUs without MIG.
std::vector<Layout> AllLayouts(const GpuModel& model);

// The legal layouts to which no further instance can be added.
std::vector<Layout> MaximalLayouts(const GpuModel& model);

// Places `profiles` (names, in any order) on an empty GPU: the first legal layout found, with the
// largest profiles placed first. InvalidArgument when no legal layout holds them all.
absl::StatusOr<Layout> PlaceProfiles(const GpuModel& model, std::span<const std::string> profiles);

// Parses "3g.71gb@0 2g.35gb@4 1g.18gb" (start optional: placed as by PlaceProfiles) and validates.
absl::StatusOr<Layout> ParseLayout(const GpuModel& model, std::string_view text);

// "PROFILE@START ..." sorted by start slot then profile name, joined by single spaces.
std::string FormatLayout(std::span<const Instance> layout);

// Sorts a layout into the canonical order of FormatLayout.
void SortLayout(Layout& layout);

// Kubernetes extended-resource name of a profile as the device plugin's mixed strategy names it:
// "nvidia.com/mig-3g.71gb", "nvidia.com/mig-1g.18gb.me"; "nvidia.com/gpu" for "full".
std::string ResourceName(std::string_view profile);

// The share of a GPU that one device is: 1 for "full", the profile's compute slices over the
// model's for a MIG instance (1 for what the catalogue does not know). Utilization and billing
// weigh devices by it.
double GpuShare(std::string_view model, std::string_view profile);

}  // namespace gpuaas::catalog

#endif  // GPUAAS_CATALOG_CATALOG_H_
