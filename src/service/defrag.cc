#include "service/defrag.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "absl/time/time.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/fleet.h"
#include "service/pools.h"
#include "store/objects.h"

namespace gpuaas::service {
namespace {

template <typename T>
std::vector<const T*> Pointers(const std::vector<T>& v) {
  std::vector<const T*> out;
  out.reserve(v.size());
  for (const T& x : v) out.push_back(&x);
  return out;
}

// defrag-<UTC time to the second>-<8 hex digits of a random UID>: sorts by when it was asked for.
std::string RequestName(Time now) {
  return fmt::format("defrag-{}-{}", absl::FormatTime("%Y%m%d-%H%M%S", absl::FromChrono(now), absl::UTCTimeZone()),
                     NewUid().substr(0, 8));
}

}  // namespace

absl::StatusOr<allocator::DefragFleet> ReadDefragFleet(store::Txn& tx) {
  ASSIGN_OR_RETURN(std::vector<model::GpuCapacity> gpus, store::ListObjects<model::GpuCapacity>(tx));
  ASSIGN_OR_RETURN(std::vector<model::NodeCapacity> nodes, store::ListObjects<model::NodeCapacity>(tx));
  ASSIGN_OR_RETURN(std::vector<model::MigLayout> layouts, store::ListObjects<model::MigLayout>(tx));
  ASSIGN_OR_RETURN(std::vector<model::GpuPool> pools, store::ListObjects<model::GpuPool>(tx));
  ASSIGN_OR_RETURN(std::vector<model::Workload> workloads, store::ListObjects<model::Workload>(tx));
  return allocator::BuildDefragFleet(Pointers(gpus), Pointers(nodes), Pointers(layouts), Pointers(pools),
                                     Pointers(workloads));
}

absl::StatusOr<allocator::DefragPlan> DefragService::Plan() {
  allocator::DefragPlan plan;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(allocator::DefragFleet fleet, ReadDefragFleet(tx));
    plan = allocator::PlanDefrag(fleet.snapshot, fleet.movable);
    return absl::OkStatus();
  }));
  return plan;
}

absl::StatusOr<model::Defragmentation> DefragService::Request(const std::vector<std::string>& gpus,
                                                              const std::string& user) {
  // GPUs by UUID in any letter case (the inventory keeps NVIDIA's spelling, GPU-<hex>).
  std::set<std::string> wanted;
  for (const std::string& u : gpus) {
    if (u.size() < 5 || u.size() > 128 || !EqualsIgnoreCase(std::string_view(u).substr(0, 4), "GPU-")) {
      return absl::InvalidArgumentError(fmt::format("\"{}\" is not a GPU UUID (GPU-..., in any letter case)", u));
    }
    wanted.insert(ToLower(u));
  }
  model::Defragmentation d;
  RETURN_IF_ERROR(store_.Transact([&](store::Txn& tx) -> absl::Status {
    ASSIGN_OR_RETURN(allocator::DefragFleet fleet, ReadDefragFleet(tx));
    // A GPU without a move now is refused here; the controller checks again when it makes them.
    RETURN_IF_ERROR(
        allocator::ChooseMoves(fleet, allocator::PlanDefrag(fleet.snapshot, fleet.movable), wanted).status());
    const Time now = clock_.Now();
    d = {};
    d.metadata.name = RequestName(now);
    d.spec.gpus.assign(wanted.begin(), wanted.end());
    d.spec.requested_by = user;
    RETURN_IF_ERROR(store::CreateObject(tx, d, now));
    return RecordAudit(tx, now, user, "Defragment", "defragmentations/" + d.metadata.name,
                       wanted.empty() ? std::string("every move of the plan") : fmt::format("GPUs {}", fmt::join(wanted, ", ")));
  }));
  return d;
}

absl::StatusOr<model::Defragmentation> DefragService::Await(const std::string& name, Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(5);
  while (true) {
    ASSIGN_OR_RETURN(std::optional<store::Record> r, store_.Get(store::KeyOf<model::Defragmentation>("", name)));
    if (!r) return absl::NotFoundError(fmt::format("defragmentations \"{}\" not found", name));
    ASSIGN_OR_RETURN(model::Defragmentation d, store::DecodeRecord<model::Defragmentation>(*r));
    if (d.status.phase != model::Defragmentation::Phase::kPending || std::chrono::steady_clock::now() >= deadline) {
      return d;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::milliseconds(100));
  }
}

}  // namespace gpuaas::service
