// Field managers, as kube-apiserver keeps them in metadata.managedFields: which writer set which
// fields of an object, so that server-side apply can tell two tools that own different fields of
// one object apart, and report a conflict when one would change what another set. Objects are
// handled as JSON (their model::Encode form); a field is a path of object keys, and lists are
// atomic (owned whole), as for a CustomResourceDefinition without list-type markers. Tracked:
// metadata.labels, metadata.annotations and spec; never status (its controllers') or what the
// server sets in metadata. Pure functions; thread-safe; no I/O.
#ifndef GPUAAS_API_INTERNAL_APPLY_H_
#define GPUAAS_API_INTERNAL_APPLY_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "api/http.h"
#include "common/clock.h"
#include "nlohmann/json_fwd.hpp"

namespace gpuaas::api::internal {

// The manager a write's fields are recorded under: ?fieldManager= (at most 128 characters,
// printable), else the product of the User-Agent ("kubectl" of "kubectl/v1.32.4 (linux/amd64)"),
// else "unknown". `apply`: server-side apply, which must name one (InvalidArgument otherwise).
absl::StatusOr<std::string> FieldManagerOf(const HttpRequest& req, bool apply);

// A write other than an apply (create, update, patch) by `manager`: `after`'s managedFields are
// `before`'s (null for a create), with the fields the write set or changed now owned by
// (manager, Update) and taken from every other manager, and the fields it removed owned by none.
// An entry whose fields do not change keeps its time, so that a write that changes nothing
// leaves the object equal.
void RecordUpdate(const nlohmann::json* before, nlohmann::json& after, std::string_view manager, Time now);

// Server-side apply of `config` (the applied configuration, an object of the kind) by `manager`
// to `live` (null: the object does not exist yet, and the apply creates it). The result is the
// live object with the configuration merged in (objects merged member by member, lists and
// values replaced), less the fields `manager` applied before, no longer applies, and nobody else
// owns; `manager` then owns exactly the configuration's fields. A field that another manager owns
// and the configuration would change is a conflict: Aborted, in kube-apiserver's words ("Apply
// failed with 1 conflict: conflict with \"argocd\": .spec.items"), unless `force`, which takes
// the field from its owner.
absl::StatusOr<nlohmann::json> ServerSideApply(const nlohmann::json* live, const nlohmann::json& config,
                                               std::string_view manager, bool force, Time now);

// Drops from `managed_fields` (a managedFields array) every field that `object` does not have
// (a field the decoder dropped, or the encoder omits as empty), and the entries left with none.
void KeepOwnedFieldsOf(const nlohmann::json& object, nlohmann::json& managed_fields);

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_APPLY_H_
