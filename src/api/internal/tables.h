// Kubernetes Table responses (meta.k8s.io/v1 Table), which kubectl asks for with
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`: the columns of model/columns.h
// (the same `gpuaas get` prints), one row per object, each row carrying the object's metadata
// (PartialObjectMetadata; `includeObject=Object` the whole object, `None` nothing).
#ifndef GPUAAS_API_INTERNAL_TABLES_H_
#define GPUAAS_API_INTERNAL_TABLES_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gpuaas::api::internal {

enum class IncludeObject { kNone, kMetadata, kObject };

struct TableRequest {
  std::string api_version;  // "meta.k8s.io/v1" (or v1beta1, as asked)
  IncludeObject include = IncludeObject::kMetadata;
};

// The Table the request's Accept header asks for (its first acceptable media range that names
// as=Table in group meta.k8s.io, version v1 or v1beta1), or nullopt when it asks for plain JSON.
// InvalidArgument for an includeObject that is not None, Metadata or Object.
absl::StatusOr<std::optional<TableRequest>> WantsTable(std::string_view accept, std::string_view include_object);

// A list's JSON (items, metadata.resourceVersion, metadata.continue) as a Table of `plural`.
absl::StatusOr<std::string> ListAsTable(std::string_view plural, std::string_view list_json, const TableRequest& t,
                                        Time now);
// One object as a Table of one row; `with_columns` false leaves the column definitions out (the
// events of a watch after its first, as kube-apiserver sends them).
absl::StatusOr<std::string> ObjectAsTable(std::string_view plural, std::string_view object_json, const TableRequest& t,
                                          Time now, bool with_columns = true);

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_TABLES_H_
