// Object metadata and conditions shared by every gpuaas kind. Objects are shaped like Kubernetes
// objects (apiVersion gpuaas.io/v1, kind, metadata, spec, status) so that they map to CRDs later.
// Layer 3 of docs/architecture.md: plain data, no I/O.
#ifndef GPUAAS_MODEL_OBJECT_H_
#define GPUAAS_MODEL_OBJECT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"

namespace gpuaas::model {

inline constexpr std::string_view kApiVersion = "gpuaas.io/v1";
inline constexpr std::string_view kGroup = "gpuaas.io";

// Which fields of an object one writer set (Kubernetes' managedFields entry): server-side
// apply's record of ownership. `fields` is the FieldsV1 set as JSON text
// ({"f:spec":{"f:items":{}}}); api/internal/apply.h reads and writes it.
struct ManagedFields {
  std::string manager;     // "kubectl", "argocd-controller", "gpuaas"
  std::string operation;   // "Apply" or "Update"
  Time time{};
  std::string fields;
  friend bool operator==(const ManagedFields&, const ManagedFields&) = default;
};

// The finalizer that keeps a deleted pool until its release is done (the pool controller removes
// the pool once it is Released).
inline constexpr std::string_view kReleaseFinalizer = "gpuaas.io/release";

struct ObjectMeta {
  std::string name;
  std::string ns;  // "namespace"; empty for cluster-scoped kinds
  std::string uid;
  int64_t resource_version = 0;  // set by the store on every write
  int64_t generation = 0;        // bumped by the store when spec changes
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::optional<Time> creation_timestamp;
  // Set when a deletion was asked for and finalizers keep the object until its end is done.
  std::optional<Time> deletion_timestamp;
  std::vector<std::string> finalizers;
  std::vector<ManagedFields> managed_fields;
  friend bool operator==(const ObjectMeta&, const ObjectMeta&) = default;
};

enum class ConditionStatus { kTrue, kFalse, kUnknown };

struct Condition {
  std::string type;
  ConditionStatus status = ConditionStatus::kUnknown;
  std::string reason;   // CamelCase, machine-readable
  std::string message;  // for people
  Time last_transition_time{};
  int64_t observed_generation = 0;
  friend bool operator==(const Condition&, const Condition&) = default;
};

// Sets condition `c` in `conds`, keeping last_transition_time when the status did not change.
// Returns true when anything changed.
bool SetCondition(std::vector<Condition>& conds, Condition c);
const Condition* FindCondition(const std::vector<Condition>& conds, std::string_view type);

// Kubernetes object names: a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.', starting
// and ending alphanumeric, at most 253 characters). InvalidArgument with the reason otherwise.
absl::Status ValidateName(std::string_view name);

// Label keys ([prefix/]name) and values as Kubernetes allows them.
absl::Status ValidateLabels(const std::map<std::string, std::string>& labels);
// Kubernetes' rule: keys as label keys, keys and values together at most 256 KiB, UTF-8.
inline constexpr size_t kMaxAnnotationBytes = 256 * 1024;
absl::Status ValidateAnnotations(const std::map<std::string, std::string>& annotations);

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_OBJECT_H_
