// The admission webhook's decisions on Pods in a project's namespace (AdmissionReview v1), so that
// a project's GPU pods run on its pools' devices only:
//   - a pod asking for no nvidia.com/ device is allowed untouched;
//   - a pod asking for devices its project's live pools do not hold in this cluster (a resource
//     they lack, or more than they hold) is refused, saying what the pools hold;
//   - otherwise (mutating) it is steered to the nodes where its project's pools hold every
//     resource it asks for: a required node affinity on kubernetes.io/hostname, ANDed with any
//     the pod already has, and the toleration of its project's pools' `gpuaas.io/pool` taints
//     (nodes a pool holds whole, controller/fencing.h); (validating, after every mutating
//     webhook) it is refused unless still held to those nodes.
// The ResourceQuota (driver.h) caps the namespace's totals; this places the pods and explains
// refusals. The webhook configuration selects project namespaces by the `gpuaas.io/project`
// label the driver puts on them, so system namespaces (the GPU Operator's validators) are never
// asked about. Pure.
#ifndef GPUAAS_CLUSTER_KUBERNETES_ADMISSION_H_
#define GPUAAS_CLUSTER_KUBERNETES_ADMISSION_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/pool.h"

namespace gpuaas::cluster::kubernetes {

enum class AdmissionMode { kMutate, kValidate };

// The pools of a project (its namespace), as the server holds them now: each review reads only
// the pools of the namespace it is about.
using ProjectPools = std::function<std::vector<std::shared_ptr<const model::GpuPool>>(std::string_view project)>;
// The same over a list held by the caller (tests, tools).
ProjectPools PoolsFrom(std::vector<model::GpuPool> pools);

// The AdmissionReview (JSON text) answering `review_json`, a review of a Pod CREATE or UPDATE
// from cluster `cluster`, against its project's pools. InvalidArgument for a body that is
// not an AdmissionReview v1 with a request.
absl::StatusOr<std::string> ReviewPod(std::string_view review_json, std::string_view cluster,
                                      const ProjectPools& pools, AdmissionMode mode);

// The AdmissionReview answering a review of a ResourceClaim CREATE or UPDATE (DRA), so that a
// project's exact devices (tainted for it, resource_slices.h) go to its claims only:
//   - a claim tolerating another project's `gpuaas.io/project` taint (a toleration of that key
//     with another value or `Exists`, or one of no key that tolerates everything) is refused, in
//     any namespace;
//   - in a namespace whose project's live pools hold devices in `cluster`, each request for an
//     NVIDIA device class (kNvidiaDeviceClasses) is (mutating) given the toleration of the
//     project's taint and a CEL selector for the UUIDs of those devices; (validating) refused
//     unless it still has that selector.
//   - any other claim passes untouched.
// InvalidArgument for a body that is not an AdmissionReview v1 with a request.
absl::StatusOr<std::string> ReviewClaim(std::string_view review_json, std::string_view cluster,
                                        const ProjectPools& pools, AdmissionMode mode);

// The CEL selector ReviewClaim gives a project's requests: one of `uuids` (sorted).
std::string UuidSelector(const std::vector<std::string>& uuids);

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_ADMISSION_H_
