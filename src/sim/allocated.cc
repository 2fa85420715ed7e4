#include "sim/allocated.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpuaas::sim {

using allocator::FleetSnapshot;
using allocator::GpuChoice;
using allocator::GpuState;
using allocator::NodeSpec;
using allocator::NodeState;
using allocator::PodShape;

FleetSnapshot SimFleet(const std::vector<NodeSpec>& specs, const std::vector<uint32_t>& order,
                       const std::function<const catalog::GpuModel*(const NodeSpec&)>& model_of,
                       std::vector<size_t>& first_gpu) {
  FleetSnapshot fleet;
  first_gpu.clear();
  for (size_t k = 0; k < order.size(); ++k) {
    const NodeSpec& spec = specs[order[k]];
    const std::string name = fmt::format("n{:05d}-{}", k, spec.name);
    first_gpu.push_back(fleet.gpus.size());
    const int gpus = std::max(spec.gpus, 1);
    fleet.nodes.push_back({name, spec.cpu_milli, spec.memory_mib, static_cast<double>(spec.cpu_milli) / gpus,
                           static_cast<double>(spec.memory_mib) / gpus});
    const catalog::GpuModel* model = spec.gpus > 0 ? model_of(spec) : nullptr;
    for (int i = 0; i < spec.gpus; ++i) {
      GpuState g;
      g.uuid = fmt::format("GPU-{:05d}-{}", k, i);
      g.cluster = "sim";
      g.node = name;
      g.index = i;
      g.model = model;
      g.node_room = static_cast<int32_t>(k);
      fleet.gpus.push_back(std::move(g));
    }
  }
  first_gpu.push_back(fleet.gpus.size());
  fleet.Reindex();
  return fleet;
}

AllocatorScheduler::AllocatorScheduler(const std::vector<NodeSpec>& nodes, allocator::TypicalPods typical,
                                       uint64_t seed, std::shared_ptr<const allocator::Profile> profile)
    : Scheduler(nodes, typical),
      profile_(profile != nullptr ? std::move(profile) : allocator::FragmentationAwareProfile(std::move(typical))) {
  order_ = NodeOrder(nodes.size(), seed);
  slot_of_.resize(nodes.size());
  for (size_t k = 0; k < order_.size(); ++k) slot_of_[order_[k]] = static_cast<uint32_t>(k);
  // The trace's models under the names it spells them with, which pods' gpu_spec and the typical
  // pods name.
  std::unordered_map<std::string, const catalog::GpuModel*> by_name;
  fleet_ = SimFleet(nodes, order_, [&](const NodeSpec& spec) {
    auto [it, added] = by_name.try_emplace(spec.gpu_model, nullptr);
    if (added) {
      const std::string& name = names_.emplace_back(spec.gpu_model);
      it->second = &models_.emplace_back(catalog::GpuModel{name, "", 0, 0, 0, false, {}, {}});
    }
    return it->second;
  }, first_gpu_);
  for (size_t k = 0; k < fleet_.nodes.size(); ++k) slot_by_name_[fleet_.nodes[k].name] = static_cast<uint32_t>(k);
  // What the expected pods ask for per GPU: the GPU pods' CPU (a GPU's share of its node's CPU
  // in this replay: a GPU is stranded when its node can no longer give it what its work asks
  // for), and with CPU-only pods' CPU counted too, to tell a CPU-bound workload. The expected
  // pods carry no memory (FGD's shapes): a GPU's share of memory is left unknown.
  double cluster_cpu = 0, cluster_gpu = 0, gpu_pods_cpu = 0, pods_cpu = 0, pods_gpu = 0;
  for (const NodeSpec& n : nodes) {
    cluster_cpu += static_cast<double>(n.cpu_milli);
    cluster_gpu += static_cast<double>(n.gpus) * allocator::kMilliGpu;
  }
  for (const allocator::TypicalPod& t : Typical()) {
    const double cpu = t.weight * static_cast<double>(t.shape.cpu_milli);
    pods_cpu += cpu;
    if (t.shape.TotalGpuMilli() == 0) continue;
    gpu_pods_cpu += cpu;
    pods_gpu += t.weight * static_cast<double>(t.shape.TotalGpuMilli());
  }
  if (pods_gpu > 0) {
    const double per_gpu = gpu_pods_cpu / pods_gpu * allocator::kMilliGpu;
    for (allocator::NodeRoom& room : fleet_.nodes) {
      if (per_gpu > 0) room.cpu_share_milli = per_gpu;
      room.memory_share_mib = -1;
    }
  }
  cpu_bound_ = cluster_gpu > 0 && pods_gpu > 0 && pods_cpu / pods_gpu > kCpuBound * cluster_cpu / cluster_gpu;
}

int AllocatorScheduler::Choose(int shape, GpuChoice* gpus) {
  const PodShape& pod = Shape(shape);
  *gpus = {};
  if (pod.TotalGpuMilli() == 0) return ChooseCpuOnly(pod);
  allocator::Request req;
  req.pool = fmt::format("p{}", next_pod_++);
  allocator::RequestItem item;
  item.model = pod.gpu_models.empty() ? "*" : pod.gpu_models;
  item.profile = std::string(catalog::kFullProfile);
  item.count = pod.num_gpu;
  item.share_milli = pod.Shares() ? pod.gpu_milli : 0;
  item.cpu_milli = pod.cpu_milli;
  item.memory_mib = pod.memory_mib;
  item.one_node = true;
  req.items.push_back(std::move(item));
  const allocator::Outcome o = allocator::Allocate(fleet_, req, *profile_);
  if (o.code != allocator::Code::kSuccess) return -1;
  allocator::ApplyPlan(fleet_, req, o.plan);
  const uint32_t k = slot_by_name_.at(o.plan.placements.front().node);
  for (const allocator::Placement& p : o.plan.placements) {
    for (size_t i = first_gpu_[k]; i < first_gpu_[k + 1]; ++i) {
      if (fleet_.gpus[i].uuid == p.gpu_uuid) gpus->index[static_cast<size_t>(gpus->count++)] = static_cast<int8_t>(fleet_.gpus[i].index);
    }
  }
  std::sort(gpus->index.begin(), gpus->index.begin() + gpus->count);
  allocator::NodeRoom& room = fleet_.nodes[k];
  room.cpu_free_milli -= pod.cpu_milli;
  room.memory_free_mib -= pod.memory_mib;
  return static_cast<int>(order_[k]);
}

void AllocatorScheduler::Released(int node, int shape, const GpuChoice& gpus) {
  const PodShape& pod = Shape(shape);
  const uint32_t k = slot_of_[static_cast<size_t>(node)];
  allocator::NodeRoom& room = fleet_.nodes[k];
  room.cpu_free_milli += pod.cpu_milli;
  room.memory_free_mib += pod.memory_mib;
  if (gpus.count == 0) return;
  // Pods of one shape on one GPU are interchangeable: any share of this size is the pod's.
  for (int c = 0; c < gpus.count; ++c) {
    GpuState& g = fleet_.gpus[first_gpu_[k] + static_cast<size_t>(gpus.index[static_cast<size_t>(c)])];
    if (!pod.Shares()) {
      g.owner.clear();
      continue;
    }
    auto it = std::find_if(g.shares.begin(), g.shares.end(),
                           [&](const allocator::GpuShare& s) { return s.milli == pod.gpu_milli; });
    if (it == g.shares.end()) continue;
    g.shares.erase(it);
  }
  fleet_.Reindex();
}

// The node where FGD's score is best, then where the fewest more idle GPUs lose their share of
// CPU and memory (allocator::StrandedGpus, the Stranding score's key), or the least CPU is left
// for a CPU-bound workload; the first in node order among equals.
int AllocatorScheduler::ChooseCpuOnly(const PodShape& pod) {
  int best = -1;
  int64_t best_key = 0;
  for (size_t k = 0; k < order_.size(); ++k) {
    const size_t n = order_[k];
    const allocator::NodeRoom& room = fleet_.nodes[k];
    if (room.cpu_free_milli < pod.cpu_milli || room.memory_free_mib < pod.memory_mib) continue;
    NodeState after = States()[n];
    after.cpu_left -= pod.cpu_milli;
    after.memory_left -= pod.memory_mib;
    const int64_t fgd =
        allocator::FragmentationScore(FragOf(n), allocator::NodeFragmentation(Nodes()[n].gpu_model, after, Typical()));
    const double free = static_cast<double>(States()[n].GpuLeftTotal()) / allocator::kMilliGpu;
    const double growth =
        allocator::StrandedGpus(room, free, room.cpu_free_milli - pod.cpu_milli, room.memory_free_mib - pod.memory_mib) -
        allocator::StrandedGpus(room, free, room.cpu_free_milli, room.memory_free_mib);
    // Then: where the fewest idle GPUs lose their CPU; or, when CPU is what the workload runs
    // short of, on the node with the least CPU left (CPU work together, whole nodes' CPU kept).
    const int64_t then = cpu_bound_ ? -(room.cpu_free_milli - pod.cpu_milli) : -std::llround(growth * 1000);
    const int64_t key = fgd * (int64_t{1} << 40) + then;
    if (best < 0 || key > best_key) best = static_cast<int>(k), best_key = key;
  }
  if (best < 0) return -1;
  allocator::NodeRoom& room = fleet_.nodes[static_cast<size_t>(best)];
  room.cpu_free_milli -= pod.cpu_milli;
  room.memory_free_mib -= pod.memory_mib;
  return static_cast<int>(order_[static_cast<size_t>(best)]);
}

}  // namespace gpuaas::sim
