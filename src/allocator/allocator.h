// The allocator: decides where a pool's items go, on an immutable FleetSnapshot, in the phases
// of the Kubernetes scheduler framework. A decision is a sequence of cycles, each placing one
// device of an item (or, for MIG items that need idle GPUs, one whole planned layout on one GPU):
//   PreFilter  the request is possible at all (models, profiles, what the fleet could ever hold);
//   Filter     each FilterPlugin may reject a GPU, with a reason (health, cluster, node room);
//   Score      each ScorePlugin scores every option the GPUs left offer; the sum ranks them, the
//              first GPU in the snapshot's order winning among equals;
//   Reserve    the best option is applied to the decision's working copy of the snapshot;
//   Unreserve  on failure every reservation of the request is dropped with the copy, exactly.
// Every cycle, device or layout, goes through the same plugins (a Profile). The caller (the pool
// controller) commits ("binds") a successful plan. Outcomes are values, not errors: a request
// that does not fit says why. Thread-compatible; Allocate is a pure function of its arguments.
#ifndef GPUAAS_ALLOCATOR_ALLOCATOR_H_
#define GPUAAS_ALLOCATOR_ALLOCATOR_H_

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "allocator/packing.h"
#include "allocator/snapshot.h"
#include "catalog/catalog.h"

namespace gpuaas::allocator {

struct RequestItem {
  // A catalogue name, "H200-SXM-141GB", or a model the snapshot's GPUs carry that the catalogue
  // does not know (a simulated cluster's). Whole GPUs and shares may name several, joined by
  // '|' ("V100M16|V100M32"), or "*" for any model of the fleet; a MIG profile names one.
  std::string model;
  std::string profile;  // "3g.71gb", or "full" for whole GPUs and shares
  int count = 0;
  // What the item's work needs of its nodes besides GPUs, for the whole item, spread over its
  // devices in equal integer parts (a pod's request). 0 for pools, whose pods are counted when
  // they run (FleetSnapshot::nodes).
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  // Every device on one node, as a pod's GPUs are; the item's CPU and memory are then taken on
  // that node at its first device.
  bool one_node = false;
  // With profile "full": each device is this share of a whole GPU, in thousandths (1..999),
  // time-sliced with other holders' shares (GpuShare); 0 takes the whole GPU.
  int32_t share_milli = 0;
};

struct Request {
  std::string pool;     // "namespace/name": the owner written on every device
  std::string cluster;  // empty: any cluster
  std::vector<RequestItem> items;
};

// How a device is obtained, in order of preference.
enum class Action {
  kUseInstance,     // a free MIG instance that exists already
  kCreateInstance,  // a new MIG instance in free slots, leaving the GPU's other instances alone
  kUseGpu,          // a whole GPU with MIG disabled
  kShareGpu,        // a share of a whole GPU with MIG disabled, beside the shares it has
  kReconfigure,     // an idle GPU whose MIG layout (or MIG mode) must change first
};
std::string_view ToString(Action a);

struct Placement {
  size_t item = 0;  // index into Request::items
  std::string cluster;
  std::string node;
  std::string gpu_uuid;
  std::string profile;  // "full" or a MIG profile
  int start = 0;        // MIG placement start
  std::string instance_uuid;  // for kUseInstance
  Action action = Action::kUseInstance;
  int64_t cpu_milli = 0;   // what this device takes of its node's room (RequestItem::cpu_milli)
  int64_t memory_mib = 0;
  int32_t share_milli = 0;  // for kShareGpu (RequestItem::share_milli)
};

struct Plan {
  std::vector<Placement> placements;
  // The layout every touched MIG GPU must have afterwards (instances kept plus new ones), and
  // GPUs that must leave MIG mode (empty layout with `mig_disabled`).
  struct GpuChange {
    catalog::Layout layout;
    bool mig_enabled = true;
    bool reconfigure = false;  // existing instances are destroyed: the GPU must be idle
  };
  std::map<std::string, GpuChange> gpu_changes;  // by GPU UUID
  int ReconfiguredGpus() const;
};

// As the Kubernetes scheduler's plugin status codes.
enum class Code {
  kSuccess,
  kUnschedulable,                 // not now: capacity is in use or needs freeing
  kUnschedulableAndUnresolvable,  // never on this fleet (unknown model, more than it could hold)
};

struct Outcome {
  Code code = Code::kSuccess;
  Plan plan;           // for kSuccess
  std::string reason;  // for the others: what failed and why, for people
};

// One way a GPU could provide one device of an item.
struct Option {
  Action action = Action::kUseInstance;
  int start = 0;
  size_t instance = 0;  // index into GpuState::instances for kUseInstance
};

// The GPUs as a decision has left them so far (the snapshot's, with this request's
// reservations), by position in FleetSnapshot::gpus.
class GpuView {
 public:
  virtual ~GpuView() = default;
  virtual const GpuState& Get(size_t position) const = 0;
};

// A whole MIG layout for one idle GPU, which the MIG plan (mig_plan.h) made for the request's
// devices that no existing room holds: a layout cycle places all its instances at once.
struct LayoutDemand {
  const catalog::Layout* instances = nullptr;
  int64_t cpu_milli = 0;  // what its devices ask of the node together (RequestItem::cpu_milli)
  int64_t memory_mib = 0;
  double gpus = 0;        // its compute slices in GPUs' worth
};

// What one scheduling cycle knows beyond the GPU at hand, as the Kubernetes scheduler's
// CycleState: what it places, and the request's reservations so far.
struct CycleState {
  const Request* request = nullptr;
  const FleetSnapshot* fleet = nullptr;
  const GpuView* view = nullptr;
  const std::vector<uint32_t>* node_first = nullptr;  // SnapshotIndex::node_first and node_gpus
  const std::vector<uint32_t>* node_gpus = nullptr;
  int unit = 0;  // devices of the current item placed so far
  int left = 0;  // devices of the current item still to place, this one included
  const catalog::MigProfile* profile = nullptr;  // the item's MIG profile; null for whole GPUs
  // Set in a layout cycle: the layout placed, whose options are whole idle GPUs (the `item` the
  // plugins are given is then the item of its first device). Null in a device cycle.
  const LayoutDemand* layout = nullptr;
  // The node of the GPU at hand, by number (SnapshotIndex::node_of): what the per-node counts
  // below are indexed by.
  uint32_t node = 0;
  int64_t item_node = -1;  // the node the current item's first device went to (one_node items)
  std::vector<int> devices_on_node;  // this request's devices per node so far
  // GPUs of the item's model per node that could become a whole GPU now (free whole GPUs and
  // idle MIG GPUs, healthy and schedulable), for items that take idle GPUs; kept current as
  // units are reserved.
  std::vector<int> free_full_on_node;
  // What shared GPUs (GpuShare) of the item's model(s) have left per node, in GPUs' worth, for
  // whole-GPU and share items; kept current as units are reserved.
  std::vector<double> shared_room_on_node;
  std::vector<double> gpus_on_node;  // GPUs' worth of this request's devices per node (MIG: compute share)
  // CPU and memory this request has taken per node (by FleetSnapshot::nodes index).
  std::unordered_map<int32_t, std::pair<int64_t, int64_t>> taken_on_node;
  // Per node, cleared (-1) before each device: what a scorer found that depends on the node
  // alone within a device's cycle (the Stranding score's verdict), so it is worked out once.
  mutable std::vector<int8_t> node_memo;
  mutable std::vector<double> node_value;  // the same for a figure (NaN: not yet worked out)
  // What a scorer worked out within a device's cycle under a key of its own (cleared per device).
  mutable std::unordered_map<uint64_t, int64_t> memo;

  // Positions of the GPUs on the node at hand (`node`).
  std::span<const uint32_t> NodeGpus() const;

  // What device `unit` of `item` takes of its node: its share of the item's CPU and memory.
  static std::pair<int64_t, int64_t> Charge(const RequestItem& item, int unit);
  // (The GPU passed to these is the one at hand, on node `node`.)
  // CPU and memory the node of `gpu` has left for this request; negative: unknown, no limit.
  std::pair<int64_t, int64_t> RoomLeft(const GpuState& gpu) const;
  // True when `gpus` more GPUs' worth of this request on the node of `gpu` would leave some of
  // its devices there without their share of the node's CPU or memory (NodeRoom): GPUs
  // stranded behind CPU and memory that other work has taken.
  bool Starves(const GpuState& gpu, double gpus) const;
  // How many more GPUs' worth of its node's idle GPUs (free_full_on_node, and the room of shared
  // ones, shared_room_on_node) would lack their share of CPU or memory once this request takes
  // `idle_taken` GPUs' worth of them and `cpu` and `memory` there (negative when fewer would).
  double StrandGrowth(const GpuState& gpu, double idle_taken, int64_t cpu, int64_t memory) const;
};

// A filter: may reject a GPU for one device of an item, saying why in a few words
// ("unhealthy", "in another cluster").
class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view Name() const = 0;
  // Empty when the GPU may be considered; otherwise the reason it may not, as a phrase that
  // follows "N GPUs ...", e.g. "are unhealthy" (a static string: filters run for every GPU and
  // must not allocate).
  virtual std::string_view Filter(const CycleState& state, const RequestItem& item,
                                  const GpuState& gpu) const = 0;
  // True when the filter has nothing to say about any GPU for this device (as the Kubernetes
  // scheduler's PreFilter Skip): it is then not asked GPU by GPU.
  virtual bool Skip(const CycleState&, const RequestItem&) const { return false; }
};

// A scorer: higher is better. Scores of all plugins are added, so each plugin keeps to a band of
// its own and the bands rank as a key would, most significant first:
//   Tier           10^15   what the option disturbs (an instance that exists, a new one, a
//                          reconfiguration); in a layout cycle, 1 for a GPU already in MIG mode;
//   Fragmentation  10^12   FGD's measure of the node, for whole GPUs and shares;
//   Stranding      10^11   GPUs left without their share of CPU and memory (for an item that
//                          asks for CPU and memory itself, 10^6 per thousandth of a GPU);
//   Locality       10^9    nodes that hold the request's devices, then idle GPUs per node;
//   BestFit        10^6    how a MIG device packs, or how tightly a share fits.
class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view Name() const = 0;
  virtual int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& gpu,
                        const Option& option) const = 0;
  // True when the scorer would give every option the same score for this device (PreScore Skip).
  virtual bool Skip(const CycleState&, const RequestItem&) const { return false; }
};

// A named set of plugins.
struct Profile {
  std::vector<std::shared_ptr<const FilterPlugin>> filters;
  std::vector<std::shared_ptr<const ScorePlugin>> scorers;
};

// The plugin registry: "default" (health, cluster, node-resources and same-node filters;
// tier, stranding, best-fit and locality scores). Empty pointer for an unknown name.
std::shared_ptr<const Profile> ProfileByName(std::string_view name);

// The "default" profile with FGD's fragmentation score (packing.h, NodeFragmentation) against
// `typical`, the workload the fleet expects, ranked below the tier and above every other score,
// and without the Locality score: a whole GPU or share goes where the fleet's fragmentation grows
// least, then where the fewest idle GPUs are stranded, then to the first GPU in the fleet's order
// (best fit still lays out MIG devices; it no longer ranks shares).
std::shared_ptr<const Profile> FragmentationAwareProfile(TypicalPods typical);
// That profile's "Fragmentation" score plugin alone.
std::shared_ptr<const ScorePlugin> FragmentationScorer(TypicalPods typical);

// How many GPUs' worth of a node's `free_gpus` idle GPUs' worth its CPU and memory left could no
// longer feed at their share of the node (NodeRoom::cpu_share_milli, memory_share_mib); a
// negative figure left is unknown and strands nothing. The stranding key of the Stranding score.
double StrandedGpus(const NodeRoom& room, double free_gpus, int64_t cpu_left, int64_t memory_left);

// The most devices of (model, profile) the fleet could hold if it were empty: the number of
// GPUs of the model (or models: RequestItem::model) times the profile's max count (1 for
// "full").
int64_t FleetCapacity(const FleetSnapshot& fleet, const std::string& model, const std::string& profile);

// Places every device of `req`, all or nothing. A decision visits the GPUs the snapshot's index
// gives for it (FleetSnapshot::index), and the whole fleet only to explain a failure; with
// `scan_fleet` it visits every GPU instead (tests and benches check that the decisions are the
// same).
Outcome Allocate(const FleetSnapshot& fleet, const Request& req, const Profile& profile, bool scan_fleet = false);

// Applies a successful plan to a snapshot (what the fleet looks like once it is provisioned).
void ApplyPlan(FleetSnapshot& fleet, const Request& req, const Plan& plan);

// Frees every device owned by `pool`; instances it created stay, free, until reconfigured.
void ReleasePool(FleetSnapshot& fleet, const std::string& pool);

}  // namespace gpuaas::allocator

#endif  // GPUAAS_ALLOCATOR_ALLOCATOR_H_
