// Projects (tenants) and their GPU pools. A project member asks for a GpuPool; an operator
// approves or rejects it through its approval subresource; the pool controller allocates and
// provisions dedicated devices and records them in status.allocation.
#ifndef GPUAAS_MODEL_POOL_H_
#define GPUAAS_MODEL_POOL_H_

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/object.h"

namespace gpuaas::model {

struct Project {
  static constexpr std::string_view kKind = "Project";
  static constexpr std::string_view kPlural = "projects";
  static constexpr bool kNamespaced = false;

  struct Quota {
    std::map<std::string, int64_t> full_gpus;           // by model: most whole GPUs
    std::map<std::string, int64_t> mig_compute_slices;  // by model: most MIG compute slices
    friend bool operator==(const Quota&, const Quota&) = default;
  };
  // What the project may spend per calendar month (UTC): money (in millionths of the rate
  // card's currency) and allocated GPU-hours (a MIG instance counts its share of a GPU); 0 is
  // no limit. A pool whose cost to the month's end would pass what is left is refused, unless
  // the operator allows overruns (then it only raises the alerts).
  struct Budget {
    int64_t amount_micros = 0;
    int64_t gpu_hours = 0;
    bool allow_overrun = false;
    friend bool operator==(const Budget&, const Budget&) = default;
  };
  struct Spec {
    std::string display_name;
    std::optional<Quota> quota;  // none: limited only by the fleet
    std::optional<Budget> budget;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    std::vector<Condition> conditions;
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const Project&, const Project&) = default;
};

enum class WorkloadType { kTraining, kInference, kDevelopment };

struct PoolItem {
  std::string model;    // catalogue name
  std::string profile;  // MIG profile or "full"
  int64_t count = 0;
  friend bool operator==(const PoolItem&, const PoolItem&) = default;
};

struct AllocatedDevice {
  std::string cluster;
  std::string node;
  std::string gpu_uuid;
  std::string profile;  // "full" or the MIG profile
  int64_t start = 0;    // MIG placement start
  std::string instance_uuid;  // MIG instance UUID once it exists
  friend bool operator==(const AllocatedDevice&, const AllocatedDevice&) = default;
};

// The UUID a device goes by in its cluster: the GPU's for a whole GPU, the MIG instance's
// (empty until the instance exists) for a MIG device.
const std::string& DeviceUuid(const AllocatedDevice& d);

struct GpuPool {
  static constexpr std::string_view kKind = "GpuPool";
  static constexpr std::string_view kPlural = "gpupools";
  static constexpr bool kNamespaced = true;

  struct Spec {
    std::string cluster;  // empty: any
    std::vector<PoolItem> items;
    WorkloadType workload_type = WorkloadType::kTraining;
    int64_t time_slicing_replicas = 0;  // 0 or 1: no time slicing
    // MIG defragmentation may move the pool's instances that no workload uses to other GPUs
    // (allocator/defrag.h), so that the GPUs they leave become whole again.
    bool move_idle_instances = false;
    // The project's wish to give the pool's devices back, set once through the release
    // subresource (PoolService::Release) with who asked and when: the pool controller ends its
    // runs, frees its devices and closes its meter at `time`.
    struct ReleaseRequest {
      std::string user;
      Time time{};
      friend bool operator==(const ReleaseRequest&, const ReleaseRequest&) = default;
    };
    std::optional<ReleaseRequest> release_requested;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Approval {
    bool approved = false;
    std::string reason;
    std::string user;
    Time time{};
    friend bool operator==(const Approval&, const Approval&) = default;
  };
  struct Status {
    std::optional<Approval> approval;  // set once, by the approval subresource
    std::vector<AllocatedDevice> allocation;
    std::vector<Condition> conditions;  // Approved, Allocated, Provisioned, Ready, Released
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const GpuPool&, const GpuPool&) = default;
};

// The MIG layout gpuaas wants on one GPU (written by the pool controller, applied by the MIG
// controller through the cluster driver). Named like the GpuCapacity of the GPU.
struct MigLayout {
  static constexpr std::string_view kKind = "MigLayout";
  static constexpr std::string_view kPlural = "miglayouts";
  static constexpr bool kNamespaced = false;

  struct Instance {
    std::string profile;
    int64_t start = 0;
    friend bool operator==(const Instance&, const Instance&) = default;
  };
  struct Spec {
    std::string cluster;
    std::string node;  // NodeCapacity name ("cluster.node")
    std::string gpu_uuid;
    bool mig_enabled = true;
    std::vector<Instance> instances;  // sorted by start
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  enum class State { kPending, kApplying, kApplied, kFailed };
  struct Status {
    State state = State::kPending;
    std::string message;
    int64_t attempts = 0;
    Time last_attempt{};
    int64_t observed_generation = 0;
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const MigLayout&, const MigLayout&) = default;
};
std::string_view ToString(MigLayout::State s);

// An operator's request to make moves of the MIG defragmentation plan (POST /api/v1/defrag),
// and what came of it. The API writes the spec; the pool controller, which owns every pool's
// allocation and every MigLayout spec, plans again from what its transaction reads and makes the
// moves there (or fails the request, naming the GPU that has no move any more), and writes the
// status once. Cluster-scoped; named defrag-<time>-<random>.
struct Defragmentation {
  static constexpr std::string_view kKind = "Defragmentation";
  static constexpr std::string_view kPlural = "defragmentations";
  static constexpr bool kNamespaced = false;

  // A pool's idle instance that a move takes elsewhere.
  struct Relocation {
    std::string pool;  // "namespace/name"
    std::string profile;
    std::string from_gpu;
    int64_t from_start = 0;
    std::string to_gpu;
    std::string to_node;
    int64_t to_start = 0;
    std::string to_instance;  // the free instance it takes; empty: a new one in free slots
    friend bool operator==(const Relocation&, const Relocation&) = default;
  };
  // One GPU's move: its layout before and after ("3g.71gb@0 1g.18gb@6"), the free instances it
  // destroys, the largest profile it could hand out before and after, and the instances it moves.
  struct Move {
    std::string gpu_uuid;
    std::string cluster;
    std::string node;
    std::string model;
    std::string before;
    std::string after;
    std::string destroys;
    std::string largest_before;
    std::string largest_after;
    std::vector<Relocation> relocations;
    friend bool operator==(const Move&, const Move&) = default;
  };
  struct Spec {
    std::vector<std::string> gpus;  // GPU UUIDs, lower case; empty: every move of the plan
    std::string requested_by;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  enum class Phase { kPending, kApplied, kFailed };
  struct Status {
    Phase phase = Phase::kPending;
    std::string message;      // why it failed
    std::vector<Move> moves;  // the moves made
    std::optional<Time> completed;
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const Defragmentation&, const Defragmentation&) = default;
};
std::string_view ToString(Defragmentation::Phase p);

// A workload (pod) of a project that runs on its pool's devices. gpuaas admits it onto
// devices of the pool, queues it, or preempts lower-priority work for it.
enum class PriorityClass { kInference, kBatch };  // inference is guaranteed, batch preemptible
enum class WorkloadPhase { kPending, kRunning, kSucceeded, kEvicted };

struct WorkloadDevice {
  std::string gpu_uuid;
  std::string instance_uuid;  // MIG instance; empty for a whole GPU
  friend bool operator==(const WorkloadDevice&, const WorkloadDevice&) = default;
};

struct Workload {
  static constexpr std::string_view kKind = "Workload";
  static constexpr std::string_view kPlural = "workloads";
  static constexpr bool kNamespaced = true;

  struct Spec {
    std::string pool;      // a GpuPool of the same project
    std::string resource;  // "nvidia.com/gpu" or "nvidia.com/mig-3g.71gb"
    int64_t count = 1;
    PriorityClass priority = PriorityClass::kBatch;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    WorkloadPhase phase = WorkloadPhase::kPending;
    std::string reason;   // Queued, Admitted, Preempted, Deleted, PoolReleased
    std::string message;
    std::vector<WorkloadDevice> devices;
    std::optional<Time> start_time;
    std::string profile;  // the Profile recording the current run
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const Workload&, const Workload&) = default;
};

// Which pod ran on which device, for which pool and project, from when to when: the record
// that utilization and billing per workload build on.
struct Profile {
  static constexpr std::string_view kKind = "Profile";
  static constexpr std::string_view kPlural = "profiles";
  static constexpr bool kNamespaced = true;

  struct Spec {
    std::string pod;  // the workload
    std::string pool;
    std::string project;
    std::vector<WorkloadDevice> devices;
    Time start{};
    std::optional<Time> end;
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  struct Status {
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const Profile&, const Profile&) = default;
};

std::string_view ToString(PriorityClass p);
std::string_view ToString(WorkloadPhase p);
// The MIG profile or "full" that a device-plugin resource name asks for; empty if not one.
std::string ProfileOfResource(std::string_view resource);
absl::Status ValidateWorkload(const Workload& w);

// Pool condition types.
inline constexpr std::string_view kApproved = "Approved";
inline constexpr std::string_view kAllocated = "Allocated";
inline constexpr std::string_view kProvisioned = "Provisioned";
inline constexpr std::string_view kReady = "Ready";
inline constexpr std::string_view kReleased = "Released";
// False while a device of the pool sits on a failed GPU (it is then replaced from free capacity).
inline constexpr std::string_view kDevicesHealthy = "DevicesHealthy";

std::string_view ToString(WorkloadType t);

// True when the pool still holds or may hold devices (not rejected, not released).
bool PoolIsLive(const GpuPool& pool);

// What a project's live pools hold, by cluster, as the device plugin names the resources
// ("nvidia.com/gpu", "nvidia.com/mig-3g.71gb") -> devices: the quota a cluster enforces for it.
std::map<std::string, std::map<std::string, int64_t>> DevicesByCluster(std::span<const GpuPool> pools);
// Nodes a pool holds whole are labelled and tainted `gpuaas.io/pool=<value>:NoSchedule`, so that
// only its project's pods (which the admission webhook gives the toleration) run there.
inline constexpr std::string_view kNodePoolKey = "gpuaas.io/pool";
// The label and taint value naming `pool`: "<project>.<pool>", shortened with a stable hash to
// the 63 characters a label value may have.
std::string NodePoolValue(const GpuPool& pool);
// A node one pool holds whole: the pool's NodePoolValue, and the time slices it shares each GPU
// into (spec.sharing.timeSlicing.replicas; 0 or 1: none).
struct WholeNodeOwner {
  std::string pool;
  int64_t time_slices = 0;
  friend bool operator==(const WholeNodeOwner&, const WholeNodeOwner&) = default;
};
// The nodes one live pool holds whole (a device on every GPU of the node, per `gpus_by_node`,
// NodeCapacity name -> GPUs, and no other pool's device there), by cluster: the node's
// Kubernetes name -> its owner.
std::map<std::string, std::map<std::string, WholeNodeOwner>> WholeNodeOwners(
    std::span<const GpuPool> pools, const std::map<std::string, int64_t>& gpus_by_node);

// True once a release was asked for (spec.releaseRequested): its runs end, then its devices go
// back to the fleet.
bool PoolReleaseRequested(const GpuPool& pool);

// Checks what a user wrote (names, items against the catalogue, counts, replicas). Quota and
// fleet capacity are checked by the pool service, which knows them. InvalidArgument otherwise.
absl::Status ValidatePool(const GpuPool& pool);
absl::Status ValidateProject(const Project& project);

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_POOL_H_
