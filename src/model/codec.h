// JSON codecs for every kind. Encode writes Kubernetes-style JSON (camelCase, empty optional
// fields omitted); Decode checks apiVersion and kind, types, required fields and enum values, and
// fails with InvalidArgument naming the field ("status.migMode: unknown value \"On\"; expected one
// of Disabled, Enabled"). Unknown fields are ignored, as kube-apiserver does by default.
// Thread-safe; no I/O.
#ifndef GPUAAS_MODEL_CODEC_H_
#define GPUAAS_MODEL_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/billing.h"
#include "model/fleet.h"
#include "model/json_reader.h"
#include "model/pool.h"

namespace gpuaas::model {

template <typename T>
std::string Encode(const T& obj);

// `fields`, when set, receives what the document holds beyond the kind's fields: unknown and
// duplicate members (model/json_reader.h), for the API's field validation.
template <typename T>
absl::StatusOr<T> Decode(std::string_view json, JsonFields* fields = nullptr);

// The OpenAPI v3 schema of kind T (JSON text: an object schema with properties, types,
// formats, enums, minimums, required members and descriptions), described by the very function
// that decodes T, so that the API's OpenAPI documents cannot drift from what it accepts.
template <typename T>
std::string SchemaOf();

// The moves of a defragmentation as JSON (an array), as a Defragmentation's status.moves holds
// them: for the plan that the API shows before anything is made.
std::string EncodeMoves(const std::vector<Defragmentation::Move>& moves);

// The text of the top-level member `key` of a JSON object whose value is an object ("metadata",
// "spec"), found by following strings and nesting without building the document. Empty when the
// text is not an object with that member spelled plainly (the caller then parses the whole text,
// which also reports malformed JSON).
std::string_view TopLevelMember(std::string_view json, std::string_view key);

// Reads only metadata (name, namespace, labels, resourceVersion) of any kind's JSON. Used by the
// object cache, which must not know every kind.
absl::StatusOr<ObjectMeta> DecodeMeta(std::string_view json);

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_CODEC_H_
