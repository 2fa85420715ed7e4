// Projects (tenants) and their GPU pools. A project member asks for a GpuPool; an operator
// approves or rejects it through its approval subresource; the pool controller allocates and
// provisions dedicated devices and records them in status.allocation.
#ifndef GPUAAS_MODEL_POOL_H_
#define GPUAAS_MODEL_POOL_H_

#include <functional>
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
    // by model: most devices (a whole GPU or a MIG instance each) its preemptible workloads may
    // borrow from other projects' lending pools at once; a model without an entry: what is lent
    std::map<std::string, int64_t> borrowing = {};
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
    // Lending (docs/lending.md): the pool's devices that no run of the project has used for
    // `idle_after_seconds` go to other projects' preemptible workloads, and come back when the
    // project's work needs them, `reclaim_grace_seconds` after the borrowers are told.
    struct Lending {
      bool enabled = false;
      int64_t idle_after_seconds = 600;
      int64_t reclaim_grace_seconds = 30;
      friend bool operator==(const Lending&, const Lending&) = default;
    };
    std::optional<Lending> lending;
    // A reservation (docs/lending.md): the pool's devices are its from `start_time` (billing
    // starts then; they are allocated at approval and lent until then) and go back at
    // `end_time`. Either may be absent: from the approval, or until released.
    std::optional<Time> start_time;
    std::optional<Time> end_time;
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
// devices of the pool, queues it, or preempts lower-priority work for it. A preemptible workload
// that names no pool borrows devices that other projects' pools lend (allocator/lending.h).
//   inference: guaranteed; batch: preempted by inference; preemptible: also lent devices, taken back
enum class PriorityClass { kInference, kBatch, kPreemptible };
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
    std::string model = {};  // a borrower (preemptible, no pool): the GPU model it wants; empty: any
    bool requeue_on_reclaim = true;  // a reclaimed borrower queues again (else it is Evicted)
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  // The pool a borrower's devices belong to.
  struct Lender {
    std::string project;
    std::string pool;
    friend bool operator==(const Lender&, const Lender&) = default;
  };
  struct Status {
    WorkloadPhase phase = WorkloadPhase::kPending;
    // Queued, Admitted, Preempted, Deleted, PoolReleased; a borrower's Borrowed, Reclaimed
    std::string reason;
    std::string message;
    std::vector<WorkloadDevice> devices;
    std::optional<Time> start_time;
    std::string profile;  // the Profile recording the current run
    std::optional<Lender> borrowed_from;   // a borrower's run: whose devices
    std::optional<Time> reclaim_deadline;  // a borrower told to leave: by when
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const Workload&, const Workload&) = default;
};

// A borrower: a preemptible workload that names no pool.
bool IsBorrower(const Workload& w);

// The receipt of one loan: a borrower's run on devices of another project's lending pool, from
// its start to its end, to the second. Written in the transaction that starts the run and in the
// one that ends it; billing charges the borrower and credits the lender from it
// (billing::RateLoans). Cluster-scoped, named "<borrower project>.<Profile of the run>".
struct Loan {
  static constexpr std::string_view kKind = "Loan";
  static constexpr std::string_view kPlural = "loans";
  static constexpr bool kNamespaced = false;

  struct Spec {
    std::string borrower;  // project
    std::string workload;
    std::string lender;  // project
    std::string pool;    // the lender's pool
    std::string model;
    std::string profile;  // "full" or the MIG profile
    std::vector<WorkloadDevice> devices;
    Time start{};
    std::optional<Time> end;
    std::string end_reason;  // Reclaimed, Deleted, PoolReleased, DeviceFailed
    // The lender is credited from here: a reservation lends before its start, when its own
    // billing has not begun, and earns nothing for that time.
    std::optional<Time> credit_from = {};
    friend bool operator==(const Spec&, const Spec&) = default;
  };
  // In clusters with pods of their own (Kubernetes): the borrower's pods on the devices once
  // the loan ended (controller/loan_pods.h).
  struct Status {
    std::vector<std::string> removed_pods = {};  // deleted at once ("namespace/name")
    // Still on the devices a minute after the loan's end (finalizers, a node that does not
    // answer); emptied once they are gone.
    std::vector<std::string> stuck_pods = {};
    friend bool operator==(const Status&, const Status&) = default;
  };
  ObjectMeta metadata;
  Spec spec;
  Status status;
  friend bool operator==(const Loan&, const Loan&) = default;
};

// What `project` may use in its clusters at `now`, as pools, for the clusters' enforcement
// (quotas, device taints, the admission webhook): its pools less the devices they lend now (and
// less its reservations that have not started: their devices are held, not its yet) and, as a
// pool of its own for each lending pool (named "loan.<lender>.<pool>", Ready, labelled
// kLoanOfLabel), the devices it borrows now. `loans` may hold any loans (those ended, or of other projects, are skipped);
// `lender_pool` finds a pool by namespace and name (null when gone).
std::vector<GpuPool> PoolsWithLoans(std::string_view project, std::vector<GpuPool> pools, std::span<const Loan> loans,
                                    const std::function<const GpuPool*(std::string_view, std::string_view)>& lender_pool,
                                    Time now);

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
// On each pool PoolsWithLoans makes up for a borrower: the lending pool's NodePoolValue. A node
// the lender holds whole keeps its taint while one of its GPUs is lent (the lender's other GPUs
// there stay fenced); the borrower's pods tolerate that taint, not one of their own.
inline constexpr std::string_view kLoanOfLabel = "gpuaas.io/loan-of";
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
// True once released (PoolReleaseRequested) or past its reservation's end (spec.endTime).
bool PoolEnded(const GpuPool& pool, Time now);
// When a pool's devices stop being its own: the release request or the reservation's end,
// whichever is first; nullopt while neither is set.
std::optional<Time> PoolEnd(const GpuPool& pool);
// True while a reserved pool waits for its start (spec.startTime after `now`).
bool PoolBeforeStart(const GpuPool& pool, Time now);

// The longest reclaim grace a lending pool may give its borrowers.
inline constexpr int64_t kMaxReclaimGraceSeconds = 600;

// Checks what a user wrote (names, items against the catalogue, counts, replicas, lending). Quota and
// fleet capacity are checked by the pool service, which knows them. InvalidArgument otherwise.
absl::Status ValidatePool(const GpuPool& pool);
absl::Status ValidateProject(const Project& project);

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_POOL_H_
