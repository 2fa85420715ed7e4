// Typed access to the Store: encode/decode model objects and keep their metadata honest. Create
// sets uid, creationTimestamp, generation 1 and resourceVersion; Update checks the caller's
// resourceVersion (optimistic concurrency), keeps uid and creationTimestamp, and bumps generation
// only when spec changed. Callers hold a Txn from Store::Transact.
#ifndef GPUAAS_STORE_OBJECTS_H_
#define GPUAAS_STORE_OBJECTS_H_

#include <optional>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/ids.h"
#include "common/status.h"
#include "fmt/format.h"
#include "model/codec.h"
#include "store/store.h"

namespace gpuaas::store {

template <typename T>
Key KeyOf(std::string_view ns, std::string_view name) {
  return Key{std::string(T::kKind), std::string(ns), std::string(name)};
}

template <typename T>
absl::StatusOr<T> DecodeRecord(const Record& r) {
  absl::StatusOr<T> obj = model::Decode<T>(r.data);
  if (!obj.ok()) {
    return absl::DataLossError(
        fmt::format("stored {} does not decode: {}", r.key.ToString(), obj.status().message()));
  }
  return obj;
}

template <typename T>
absl::StatusOr<std::optional<T>> GetObject(Txn& tx, std::string_view ns, std::string_view name) {
  ASSIGN_OR_RETURN(std::optional<Record> r, tx.Get(KeyOf<T>(ns, name)));
  if (!r) return std::optional<T>();
  ASSIGN_OR_RETURN(T obj, DecodeRecord<T>(*r));
  return std::optional<T>(std::move(obj));
}

template <typename T>
absl::StatusOr<std::vector<T>> ListObjects(Txn& tx, std::string_view ns = "") {
  ASSIGN_OR_RETURN(std::vector<Record> records, tx.List(T::kKind, ns));
  std::vector<T> out;
  out.reserve(records.size());
  for (const Record& r : records) {
    ASSIGN_OR_RETURN(T obj, DecodeRecord<T>(r));
    out.push_back(std::move(obj));
  }
  return out;
}

// Creates `obj`; fills in its server-set metadata. AlreadyExists if the name is taken.
template <typename T>
absl::Status CreateObject(Txn& tx, T& obj, Time now) {
  obj.metadata.uid = NewUid();
  obj.metadata.creation_timestamp = now;
  obj.metadata.generation = 1;
  obj.metadata.resource_version = tx.revision();
  return tx.Put(KeyOf<T>(obj.metadata.ns, obj.metadata.name), obj.metadata.uid,
                model::Encode(obj), kMustNotExist);
}

// Updates `obj`, which must carry the resourceVersion it was read at (Aborted on a conflict,
// NotFound if it is gone). A new spec is a new generation: the spec as stored and as written are
// compared as text first (the encoder writes one value one way), and decoded only when the texts
// differ, so that a status update (most of them) costs no decode of the stored object.
template <typename T>
absl::Status UpdateObject(Txn& tx, T& obj) {
  const Key key = KeyOf<T>(obj.metadata.ns, obj.metadata.name);
  ASSIGN_OR_RETURN(std::optional<Record> cur, tx.Get(key));
  if (!cur) return absl::NotFoundError(fmt::format("{} not found", key.ToString()));
  absl::StatusOr<model::ObjectMeta> old = model::DecodeMeta(cur->data);
  if (!old.ok()) {
    return absl::DataLossError(fmt::format("stored {} does not decode: {}", key.ToString(), old.status().message()));
  }
  const int64_t expected = obj.metadata.resource_version;
  obj.metadata.uid = old->uid;
  obj.metadata.creation_timestamp = old->creation_timestamp;
  obj.metadata.generation = old->generation;
  obj.metadata.resource_version = tx.revision();
  std::string text = model::Encode(obj);
  const std::string_view stored_spec = model::TopLevelMember(cur->data, "spec");
  if (stored_spec.empty() || stored_spec != model::TopLevelMember(text, "spec")) {
    ASSIGN_OR_RETURN(const T stored, DecodeRecord<T>(*cur));
    if (!(stored.spec == obj.spec)) {
      ++obj.metadata.generation;
      text = model::Encode(obj);
    }
  }
  absl::Status s = tx.Put(key, obj.metadata.uid, text, expected);
  if (!s.ok()) obj.metadata.resource_version = expected;
  return s;
}

template <typename T>
absl::Status DeleteObject(Txn& tx, std::string_view ns, std::string_view name,
                          int64_t expected_rv = kAnyVersion) {
  return tx.Delete(KeyOf<T>(ns, name), expected_rv);
}

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_OBJECTS_H_
