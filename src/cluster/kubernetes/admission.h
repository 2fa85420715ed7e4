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

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/pool.h"

namespace gpuaas::cluster::kubernetes {

enum class AdmissionMode { kMutate, kValidate };

// The AdmissionReview (JSON text) answering `review_json`, a review of a Pod CREATE or UPDATE
// from cluster `cluster`, against every pool (any project). InvalidArgument for a body that is
// not an AdmissionReview v1 with a request.
absl::StatusOr<std::string> ReviewPod(std::string_view review_json, std::string_view cluster,
                                      std::span<const model::GpuPool> pools, AdmissionMode mode);

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_ADMISSION_H_
