// The allocator: decides where a pool's items go, on an immutable FleetSnapshot, in stages
// modelled on the Kubernetes scheduler framework. For every device a request needs:
//   PreFilter  the item is possible at all (model, profile, the fleet could ever hold it);
//   Filter     each plugin may reject a GPU, with a reason (health, cluster, tenancy, room);
//   Score      each plugin scores the options a GPU offers; the best option wins;
//   Reserve    the choice is applied to the working copy of the snapshot;
//   Unreserve  on failure every reservation of the request is undone, exactly.
// The caller (the pool controller) commits ("binds") a successful plan. Outcomes are values, not
// errors: a request that does not fit says why. Thread-compatible; Allocate is a pure function
// of its arguments.
#ifndef GPUAAS_ALLOCATOR_ALLOCATOR_H_
#define GPUAAS_ALLOCATOR_ALLOCATOR_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "allocator/snapshot.h"
#include "catalog/catalog.h"

namespace gpuaas::allocator {

struct RequestItem {
  std::string model;    // catalogue name, "H200-SXM-141GB"
  std::string profile;  // "3g.71gb", or "full" for whole GPUs
  int count = 0;
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

// A filter: may reject a GPU for one device of an item, saying why in a few words
// ("unhealthy", "in another cluster").
class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view Name() const = 0;
  // Empty when the GPU may be considered; otherwise the reason it may not, as a phrase that
  // follows "N GPUs ...", e.g. "are unhealthy" (a static string: filters run for every GPU and
  // must not allocate).
  virtual std::string_view Filter(const Request& req, const RequestItem& item,
                                  const GpuState& gpu) const = 0;
};

// One way a GPU could provide one device of an item.
struct Option {
  Action action = Action::kUseInstance;
  int start = 0;
  size_t instance = 0;  // index into GpuState::instances for kUseInstance
};

// What one scheduling cycle (one device of an item) knows beyond the GPU at hand, as the
// Kubernetes scheduler's CycleState: the request's reservations so far.
struct CycleState {
  const Request* request = nullptr;
  int left = 0;  // devices of the current item still to place, this one included
  const catalog::MigProfile* profile = nullptr;  // the item's MIG profile; null for whole GPUs
  // By node name (views of the snapshot's strings, which outlive the decision).
  std::unordered_map<std::string_view, int> devices_on_node;  // this request's devices per node so far
  std::unordered_map<std::string_view, int> free_full_on_node;  // free whole GPUs of the item's model, per node
};

// A scorer: higher is better. Scores of all plugins are added.
class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view Name() const = 0;
  virtual int64_t Score(const CycleState& state, const RequestItem& item, const GpuState& gpu,
                        const Option& option) const = 0;
};

// A named set of plugins.
struct Profile {
  std::vector<std::shared_ptr<const FilterPlugin>> filters;
  std::vector<std::shared_ptr<const ScorePlugin>> scorers;
};

// The plugin registry: "default" (health, cluster, tenancy filters; tier, best-fit and
// locality scores). Empty pointer for an unknown name.
std::shared_ptr<const Profile> ProfileByName(std::string_view name);

// The most devices of (model, profile) the fleet could hold if it were empty: the number of
// GPUs of the model times the profile's max count (1 for "full").
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
