// The trace replay's pods placed by the pool allocator itself (allocator::Allocate with FGD's
// fragmentation score, allocator::FragmentationAwareProfile), so that what `gpuaas sim
// --policy gpuaas` measures is what the product's allocator does. The node list becomes a
// FleetSnapshot; a GPU pod is a request of one one-node item with its CPU and memory: whole GPUs,
// or a share of one GPU (RequestItem::share_milli). CPU-only pods stand for the Kubernetes
// scheduler's other work; they go where FGD's score puts them, computed by the same functions
// the plugins use, then where the Stranding score's key does, or, when the workload asks for
// clearly more CPU per GPU than the cluster has, where the least CPU is left. A GPU's share of
// its node's CPU is what the expected GPU pods ask for per GPU; its share of memory is unknown.
// Pure computation; thread-compatible.
#ifndef GPUAAS_SIM_ALLOCATED_H_
#define GPUAAS_SIM_ALLOCATED_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/snapshot.h"
#include "catalog/catalog.h"
#include "sim/replay.h"

namespace gpuaas::sim {

// The node list as a fleet: nodes in `order` (positions in `specs`), named so that the
// snapshot's sorted order is that order and the allocator's first best choice is the first in
// it; GPUs of `model_of(spec)` with MIG disabled, free; each node's CPU and memory as its room,
// with a GPU's share of them. `first_gpu` receives where each node's GPUs start (one entry per
// node, and the total last).
allocator::FleetSnapshot SimFleet(const std::vector<allocator::NodeSpec>& specs, const std::vector<uint32_t>& order,
                                  const std::function<const catalog::GpuModel*(const allocator::NodeSpec&)>& model_of,
                                  std::vector<size_t>& first_gpu);

class AllocatorScheduler final : public Scheduler {
 public:
  // `profile`: the allocator's plugins; null for FragmentationAwareProfile(typical).
  AllocatorScheduler(const std::vector<allocator::NodeSpec>& nodes, allocator::TypicalPods typical, uint64_t seed,
                     std::shared_ptr<const allocator::Profile> profile = nullptr);

  const allocator::FleetSnapshot& Fleet() const { return fleet_; }

 private:
  int Choose(int shape, allocator::GpuChoice* gpus) override;
  void Released(int node, int shape, const allocator::GpuChoice& gpus) override;
  void Changed(size_t) override {}
  int ChooseCpuOnly(const allocator::PodShape& pod);

  std::deque<std::string> names_;  // what the models' names view
  std::deque<catalog::GpuModel> models_;  // the trace's GPU models, as the snapshot's GPUs carry them
  allocator::FleetSnapshot fleet_;
  std::shared_ptr<const allocator::Profile> profile_;
  std::vector<uint32_t> order_;    // snapshot node k is node order_[k] of the list
  std::vector<uint32_t> slot_of_;  // and node n of the list is snapshot node slot_of_[n]
  std::vector<size_t> first_gpu_;
  std::unordered_map<std::string, uint32_t> slot_by_name_;
  uint64_t next_pod_ = 0;
  // The workload is CPU-bound when its expected pods ask for this much more CPU per GPU than the
  // cluster has. Chosen on the trace's lists (docs/packing.md): cpu235 asks for 1.03 times the
  // cluster's and gains from the stranding key for CPU-only pods, cpu300 asks for 1.19 times and
  // gains from packing them.
  static constexpr double kCpuBound = 1.1;
  bool cpu_bound_ = false;
};

}  // namespace gpuaas::sim

#endif  // GPUAAS_SIM_ALLOCATED_H_
