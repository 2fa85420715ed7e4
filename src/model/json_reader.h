// Reading JSON documents into typed values, field by field, with the field's path in every
// error: "spec.items[2].count: expected an integer". The model's codecs (model/codec.cc) and the
// API's request bodies read through it, so every JSON input of gpuaas is refused in the same
// words. A decode function reads a document through a JsonIn cursor, which throws on the first
// value that does not fit; ReadJson runs the decode function and turns that into
// InvalidArgument, so no exception leaves a ReadJson call. nlohmann::json is only
// forward-declared here; files that call Find or Need include nlohmann/json.hpp themselves.
// Thread-safe (no shared state); no I/O.
#ifndef GPUAAS_MODEL_JSON_READER_H_
#define GPUAAS_MODEL_JSON_READER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "nlohmann/json_fwd.hpp"

namespace gpuaas::model {

// What a member whose value is null means to a reader.
enum class JsonNulls {
  kAbsent,   // the member is read as absent, as kube-apiserver reads objects
  kRefused,  // a value of the wrong type: {"approve": null} fails "approve: expected true or false"
};

// What a document holds beyond what its reader read, as kube-apiserver's field validation
// reports it: members no accessor asked for ("spec.quotta", "spec.items[0].modle") and members
// given twice in one object (JSON keeps the last; "metadata.name"), each by its path.
struct JsonFields {
  std::vector<std::string> unknown;
  std::vector<std::string> duplicate;
  bool empty() const { return unknown.empty() && duplicate.empty(); }
};

// How ReadJson reads a document.
struct JsonDocument {
  // The path of the document's root in errors: empty for a whole body ("(root)" when the body
  // is not an object), or where the document was cut from ("metadata").
  std::string_view path = {};
  JsonNulls nulls = JsonNulls::kAbsent;
  // When set, filled once the document was read: what the reader did not read, and what was
  // given twice. The values of StrMap and Counts (labels, counts by name) are data, not fields;
  // so is an object that a reader takes whole with Find or Need.
  JsonFields* fields = nullptr;
};

namespace internal {
struct JsonReadLog;  // the members a reader asked for (json_reader.cc)
}  // namespace internal

// What JsonIn and FailAt throw; ReadJson catches it and nothing else lets it out.
struct JsonError {
  std::string message;  // "path: what"
};

// Throws JsonError "path: what": for a check of a decode function beyond a field's type ("status:
// allocated (3) + free (2) must equal count (4)").
[[noreturn]] void FailAt(std::string_view path, std::string_view what);

// A cursor over one JSON object that knows its path.
//
// The same decode function also describes what it reads: run by DescribeJson, each accessor
// records its member's OpenAPI v3 schema (type, format, enum, minimum, required, and the
// description given with Doc) instead of reading a value, and answers a default (Has: true, so
// that every branch is described; Find: nullptr). One definition thus both decodes a kind and
// gives its schema, which cannot drift apart. Each accessor returns the member's value,
// or a default when it is absent and not required, and otherwise throws JsonError naming the
// member: "required", "expected a string", "must be at least 1". The document must outlive
// the cursor and the cursors made from it.
class JsonIn {
 public:
  // Throws "path: expected an object" ("(root): ..." for the empty path) unless `j` is one.
  // `log`, when set, records the members read (ReadJson's JsonDocument::fields).
  JsonIn(const nlohmann::json& j, std::string path, JsonNulls nulls = JsonNulls::kAbsent,
         internal::JsonReadLog* log = nullptr);
  // A cursor that describes: accessors record into `schema`, an OpenAPI object schema.
  JsonIn(nlohmann::json* schema, std::string path);

  // The member's description in the schema; nothing when reading.
  const JsonIn& Doc(std::string_view key, std::string_view description) const;
  // Throws "path.key: what" unless `ok`: a check of a value beyond its type. Never fails while
  // describing (there are no values then).
  void Check(bool ok, std::string_view key, std::string_view what) const;
  // Throws "required" when the member is absent (for a member read by another accessor that
  // has no `required` flag, such as TimeField).
  void Needs(std::string_view key) const;

  // Present, and not null where nulls are read as absent.
  bool Has(std::string_view key) const;
  // Present with the value null.
  bool IsNull(std::string_view key) const;
  // The member's value; nullptr when it is absent (Has is false).
  const nlohmann::json* Find(std::string_view key) const;
  // The member's value; throws "required" when it is absent.
  const nlohmann::json& Need(std::string_view key) const;
  // The member's path for an error: "spec.items".
  std::string Path(std::string_view key) const;

  // A required member that must be an object.
  JsonIn Obj(std::string_view key) const;
  std::string Str(std::string_view key, bool required = false) const;  // "" when absent
  // An integer from `min` to INT64_MAX; 0 when absent.
  int64_t Int(std::string_view key, bool required = false, int64_t min = 0) const;
  bool Bool(std::string_view key, bool dflt) const;  // `dflt` when absent
  bool Bool(std::string_view key) const;             // required
  // A string that names one of `table`'s values; `dflt` when absent, or required without one.
  template <typename E, size_t N>
  E Enum(std::string_view key, const std::array<std::pair<std::string_view, E>, N>& table, E dflt) const {
    const std::optional<size_t> i = OneOf(key, Names(table), /*required=*/false);
    return i ? table[*i].second : dflt;
  }
  template <typename E, size_t N>
  E Enum(std::string_view key, const std::array<std::pair<std::string_view, E>, N>& table) const {
    return table[*OneOf(key, Names(table), /*required=*/true)].second;
  }
  std::map<std::string, std::string> StrMap(std::string_view key) const;  // an object of strings
  std::vector<std::string> StrList(std::string_view key) const;           // an array of strings
  std::map<std::string, int64_t> Counts(std::string_view key) const;      // an object of integers >= 0
  // Calls `f` with each element of an array of objects, in order; nothing when absent.
  void Each(std::string_view key, absl::FunctionRef<void(const JsonIn&)> f) const;
  // An RFC 3339 UTC time (common/clock.h: ParseTime); nullopt when absent or "".
  std::optional<Time> TimeField(std::string_view key) const;

 private:
  template <typename E, size_t N>
  static std::array<std::string_view, N> Names(const std::array<std::pair<std::string_view, E>, N>& table) {
    std::array<std::string_view, N> names;
    for (size_t i = 0; i < N; ++i) names[i] = table[i].first;
    return names;
  }
  // The index in `names` of the member's string; nullopt when it is absent and not required.
  std::optional<size_t> OneOf(std::string_view key, std::span<const std::string_view> names, bool required) const;
  // The member's value (nullptr when absent), noted as read; a value taken `whole` is not
  // looked into for unknown members.
  const nlohmann::json* Lookup(std::string_view key, bool whole) const;
  const nlohmann::json& Require(std::string_view key, bool whole) const;
  // While describing: the member's schema (created empty), listed as required when `required`.
  nlohmann::json& Describe(std::string_view key, bool required) const;

  const nlohmann::json& j_;
  std::string path_;
  JsonNulls nulls_;
  internal::JsonReadLog* log_;
  nlohmann::json* schema_ = nullptr;  // set while describing
};

// Parses `text` and reads its root with `read` (const JsonIn& -> the value). The not-throwing
// part of ReadJson: InvalidArgument "body is not valid JSON" ("PATH is not valid JSON" for a
// document at a path), "(root): expected an object", "invalid JSON value: ..." for a value
// nlohmann refuses to convert, or the JsonError `read` threw: "field.path: what".
absl::Status ReadJsonRoot(std::string_view text, const JsonDocument& doc,
                          absl::FunctionRef<void(const JsonIn&)> read);

// The value `read` returns for the document in `text`, or the InvalidArgument of ReadJsonRoot.
template <typename F>
auto ReadJson(std::string_view text, const JsonDocument& doc, F&& read)
    -> absl::StatusOr<std::invoke_result_t<F&, const JsonIn&>> {
  std::optional<std::invoke_result_t<F&, const JsonIn&>> out;
  absl::Status s = ReadJsonRoot(text, doc, [&](const JsonIn& root) { out.emplace(read(root)); });
  if (!s.ok()) return s;
  return *std::move(out);
}
template <typename F>
auto ReadJson(std::string_view text, F&& read) {
  return ReadJson(text, JsonDocument{}, read);
}

// How deep ParseJson lets a document nest (arrays and objects); gpuaas's kinds nest 7 deep.
inline constexpr int kMaxJsonDepth = 64;
// Whether `text` opens more than `limit` arrays and objects within one another (strings skipped;
// the text need not be valid JSON, nor JSON at all: YAML's flow collections count alike).
bool NestsDeeperThan(std::string_view text, int limit);

// `text` parsed, for a document handled as JSON rather than read into a type (a patch):
// InvalidArgument "WHAT is not valid JSON", or "WHAT nests deeper than 64 levels".
// `duplicates`, when set, receives the path of each member given twice in one object.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view what,
                                         std::vector<std::string>* duplicates = nullptr);

// The OpenAPI v3 schema (an object schema) of what `read` reads, by running it over a
// describing cursor. `read` must not throw for lack of values: checks go through JsonIn::Check.
void DescribeJson(absl::FunctionRef<void(const JsonIn&)> read, nlohmann::json& schema);

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_JSON_READER_H_
