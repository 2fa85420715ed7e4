#include "model/json_reader.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"

namespace gpuaas::model {
namespace {

using nlohmann::json;

std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string Element(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

}  // namespace

namespace internal {
struct JsonReadLog {
  std::set<std::pair<const json*, std::string>> read;  // (object, member) asked for
  std::set<const json*> whole;                          // values taken whole: data, not fields
};
}  // namespace internal

namespace {

// The members of `j` (at `path`) that no reader asked for, depth first, in document order.
void Unread(const json& j, const std::string& path, const internal::JsonReadLog& log, std::vector<std::string>& out) {
  if (log.whole.contains(&j)) return;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string at = Join(path, it.key());
      if (!log.read.contains({&j, it.key()})) {
        out.push_back(at);
      } else {
        Unread(it.value(), at, log, out);
      }
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) Unread(j[i], Element(path, i), log, out);
  }
}

// Follows a parse and notes each member given twice in one object, by its path. Each level keeps
// only its own key or index; a path is spelled out only for a duplicate, so that a deeply nested
// document costs in proportion to its size.
class DuplicateFinder {
 public:
  DuplicateFinder(std::string root, std::vector<std::string>& out) : root_(std::move(root)), out_(out) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        frames_.push_back({event == json::parse_event_t::array_start, {}, 0, {}});
        break;
      case json::parse_event_t::key:
        if (!frames_.empty()) {
          Frame& f = frames_.back();
          f.key = parsed.get<std::string>();
          if (!f.keys.insert(f.key).second) out_.push_back(Path());
        }
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        Next();
        break;
      case json::parse_event_t::value:
        Next();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool array;
    std::set<std::string> keys;  // an object's members so far
    size_t index;                // an array's elements so far
    std::string key;             // an object's member being read
  };
  // The path of the member or element being read now.
  std::string Path() const {
    std::string path = root_;
    for (const Frame& f : frames_) path = f.array ? Element(path, f.index) : Join(path, f.key);
    return path;
  }
  void Next() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  std::string root_;
  std::vector<std::string>& out_;
  std::vector<Frame> frames_;
};

}  // namespace

void FailAt(std::string_view path, std::string_view what) { throw JsonError{fmt::format("{}: {}", path, what)}; }

JsonIn::JsonIn(const json& j, std::string path, JsonNulls nulls, internal::JsonReadLog* log)
    : j_(j), path_(std::move(path)), nulls_(nulls), log_(log) {
  if (!j_.is_object()) FailAt(path_.empty() ? "(root)" : path_, "expected an object");
}

namespace {
const json& EmptyObject() {
  static const json* const kEmpty = new json(json::object());
  return *kEmpty;
}
}  // namespace

JsonIn::JsonIn(json* schema, std::string path)
    : j_(EmptyObject()), path_(std::move(path)), nulls_(JsonNulls::kAbsent), log_(nullptr), schema_(schema) {
  (*schema_)["type"] = "object";
}

namespace {

// While describing, the members a decoder asked Has about: read only when present, so never
// required, whatever the accessor that reads them says. Removed once the schema is complete.
constexpr std::string_view kOptional = "x-gpuaas-optional";
void DropOptionalMarks(json& schema) {
  if (!schema.is_object()) return;
  schema.erase(std::string(kOptional));
  if (auto p = schema.find("properties"); p != schema.end()) {
    for (auto& [k, v] : p->items()) DropOptionalMarks(v);
  }
  if (auto i = schema.find("items"); i != schema.end()) DropOptionalMarks(*i);
}
}  // namespace

json& JsonIn::Describe(std::string_view key, bool required) const {
  json& member = (*schema_)["properties"][std::string(key)];
  const json& optional = schema_->contains(kOptional) ? (*schema_)[std::string(kOptional)] : EmptyObject();
  if (required && std::find(optional.begin(), optional.end(), key) == optional.end()) {
    json& req = (*schema_)["required"];
    if (std::find(req.begin(), req.end(), key) == req.end()) req.push_back(key);
  }
  return member;
}

const JsonIn& JsonIn::Doc(std::string_view key, std::string_view description) const {
  if (schema_ != nullptr) Describe(key, false)["description"] = description;
  return *this;
}

void JsonIn::Check(bool ok, std::string_view key, std::string_view what) const {
  if (!ok && schema_ == nullptr) FailAt(Path(key), what);
}

void JsonIn::Needs(std::string_view key) const {
  if (schema_ != nullptr) {
    Describe(key, true);
  } else {
    Require(key, false);
  }
}

const json* JsonIn::Lookup(std::string_view key, bool whole) const {
  auto it = j_.find(key);
  if (it == j_.end()) return nullptr;
  if (log_ != nullptr) {
    log_->read.emplace(&j_, std::string(key));
    if (whole && it->is_object()) log_->whole.insert(&*it);
  }
  if (it->is_null() && nulls_ == JsonNulls::kAbsent) return nullptr;
  return &*it;
}

const json& JsonIn::Require(std::string_view key, bool whole) const {
  const json* v = Lookup(key, whole);
  if (v == nullptr) FailAt(Path(key), "required");
  return *v;
}

const json* JsonIn::Find(std::string_view key) const {
  if (schema_ != nullptr) {
    Describe(key, false)["x-kubernetes-preserve-unknown-fields"] = true;
    return nullptr;
  }
  return Lookup(key, /*whole=*/true);
}

bool JsonIn::Has(std::string_view key) const {
  if (schema_ != nullptr) {
    (*schema_)[std::string(kOptional)].push_back(key);
    return true;
  }
  return Lookup(key, /*whole=*/false) != nullptr;
}

bool JsonIn::IsNull(std::string_view key) const {
  if (schema_ != nullptr) return false;
  auto it = j_.find(key);
  if (it == j_.end()) return false;
  if (log_ != nullptr) log_->read.emplace(&j_, std::string(key));
  return it->is_null();
}

const json& JsonIn::Need(std::string_view key) const {
  if (schema_ != nullptr) {
    Describe(key, true)["x-kubernetes-preserve-unknown-fields"] = true;
    return EmptyObject();
  }
  return Require(key, /*whole=*/true);
}

std::string JsonIn::Path(std::string_view key) const { return Join(path_, key); }

JsonIn JsonIn::Obj(std::string_view key) const {
  if (schema_ != nullptr) return JsonIn(&Describe(key, true), Path(key));
  return JsonIn(Require(key, false), Path(key), nulls_, log_);
}

std::string JsonIn::Str(std::string_view key, bool required) const {
  if (schema_ != nullptr) {
    Describe(key, required)["type"] = "string";
    return "";
  }
  const json* v = required ? &Require(key, false) : Lookup(key, false);
  if (v == nullptr) return "";
  if (!v->is_string()) FailAt(Path(key), "expected a string");
  return v->get<std::string>();
}

int64_t JsonIn::Int(std::string_view key, bool required, int64_t min) const {
  if (schema_ != nullptr) {
    json& m = Describe(key, required);
    m["type"] = "integer";
    m["format"] = "int64";
    m["minimum"] = min;
    return min;
  }
  const json* v = required ? &Require(key, false) : Lookup(key, false);
  if (v == nullptr) return 0;
  if (!v->is_number_integer()) FailAt(Path(key), "expected an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
    FailAt(Path(key), "out of range");
  }
  const int64_t x = v->get<int64_t>();
  if (x < min) FailAt(Path(key), fmt::format("must be at least {}", min));
  return x;
}

bool JsonIn::Bool(std::string_view key, bool dflt) const {
  if (schema_ != nullptr) {
    Describe(key, false)["type"] = "boolean";
    return dflt;
  }
  const json* v = Lookup(key, false);
  if (v == nullptr) return dflt;
  if (!v->is_boolean()) FailAt(Path(key), "expected true or false");
  return v->get<bool>();
}

bool JsonIn::Bool(std::string_view key) const {
  if (schema_ != nullptr) {
    Describe(key, true)["type"] = "boolean";
    return false;
  }
  Require(key, false);
  return Bool(key, false);
}

std::optional<size_t> JsonIn::OneOf(std::string_view key, std::span<const std::string_view> names,
                                    bool required) const {
  if (schema_ != nullptr) {
    json& m = Describe(key, required);
    m["type"] = "string";
    m["enum"] = json::array();
    for (std::string_view n : names) m["enum"].push_back(n);
    return 0;
  }
  const json* v = required ? &Require(key, false) : Lookup(key, false);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) FailAt(Path(key), "expected a string");
  const std::string s = v->get<std::string>();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == s) return i;
  }
  FailAt(Path(key), fmt::format("unknown value \"{}\"; expected one of {}", s, fmt::join(names, ", ")));
}

std::map<std::string, std::string> JsonIn::StrMap(std::string_view key) const {
  std::map<std::string, std::string> out;
  if (schema_ != nullptr) {
    Describe(key, false).update({{"type", "object"}, {"additionalProperties", {{"type", "string"}}}});
    return out;
  }
  const json* v = Lookup(key, /*whole=*/true);
  if (v == nullptr) return out;
  if (!v->is_object()) FailAt(Path(key), "expected an object of strings");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_string()) FailAt(Join(Path(key), it.key()), "expected a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

std::vector<std::string> JsonIn::StrList(std::string_view key) const {
  std::vector<std::string> out;
  if (schema_ != nullptr) {
    Describe(key, false).update({{"type", "array"}, {"items", {{"type", "string"}}}});
    return out;
  }
  const json* v = Lookup(key, false);
  if (v == nullptr) return out;
  if (!v->is_array()) FailAt(Path(key), "expected an array of strings");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) FailAt(Element(Path(key), i), "expected a string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::map<std::string, int64_t> JsonIn::Counts(std::string_view key) const {
  std::map<std::string, int64_t> out;
  if (schema_ != nullptr) {
    Describe(key, false).update(
        {{"type", "object"}, {"additionalProperties", {{"type", "integer"}, {"format", "int64"}, {"minimum", 0}}}});
    return out;
  }
  const json* v = Lookup(key, /*whole=*/true);
  if (v == nullptr) return out;
  if (!v->is_object()) FailAt(Path(key), "expected an object of integers");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0) {
      FailAt(Join(Path(key), it.key()), "expected a non-negative integer");
    }
    out[it.key()] = it.value().get<int64_t>();
  }
  return out;
}

void JsonIn::Each(std::string_view key, absl::FunctionRef<void(const JsonIn&)> f) const {
  if (schema_ != nullptr) {
    json& m = Describe(key, false);
    m["type"] = "array";
    f(JsonIn(&m["items"], Element(Path(key), 0)));
    return;
  }
  const json* v = Lookup(key, false);
  if (v == nullptr) return;
  if (!v->is_array()) FailAt(Path(key), "expected an array");
  const std::string path = Path(key);
  for (size_t i = 0; i < v->size(); ++i) f(JsonIn((*v)[i], Element(path, i), nulls_, log_));
}

std::optional<Time> JsonIn::TimeField(std::string_view key) const {
  if (schema_ != nullptr) {
    json& m = Describe(key, false);
    m["type"] = "string";
    m["format"] = "date-time";
    return Time{};
  }
  const std::string s = Str(key);
  if (s.empty()) return std::nullopt;
  std::optional<Time> t = ParseTime(s);
  if (!t) FailAt(Path(key), fmt::format("\"{}\" is not an RFC 3339 UTC time", s));
  return t;
}

bool NestsDeeperThan(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

absl::StatusOr<json> ParseJson(std::string_view text, std::string_view what, std::vector<std::string>* duplicates) {
  // What is read as a tree is walked by recursion (writing, patching, field sets): a document
  // deeper than any kind is refused before it is built.
  if (NestsDeeperThan(text, kMaxJsonDepth)) {
    return absl::InvalidArgumentError(fmt::format("{} nests deeper than {} levels", what, kMaxJsonDepth));
  }
  json j = duplicates == nullptr
               ? json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false)
               : json::parse(text.begin(), text.end(), DuplicateFinder("", *duplicates), /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(fmt::format("{} is not valid JSON", what));
  return j;
}

void DescribeJson(absl::FunctionRef<void(const JsonIn&)> read, json& schema) {
  schema = json::object();
  read(JsonIn(&schema, ""));
  DropOptionalMarks(schema);
}

absl::Status ReadJsonRoot(std::string_view text, const JsonDocument& doc,
                          absl::FunctionRef<void(const JsonIn&)> read) {
  std::vector<std::string> duplicate;
  const json j = doc.fields == nullptr
                     ? json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false)
                     : json::parse(text.begin(), text.end(), DuplicateFinder(std::string(doc.path), duplicate),
                                   /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(fmt::format("{} is not valid JSON", doc.path.empty() ? "body" : doc.path));
  }
  internal::JsonReadLog log;
  try {
    read(JsonIn(j, std::string(doc.path), doc.nulls, doc.fields == nullptr ? nullptr : &log));
    if (doc.fields != nullptr) {
      *doc.fields = {};
      Unread(j, std::string(doc.path), log, doc.fields->unknown);
      doc.fields->duplicate = std::move(duplicate);
    }
  } catch (const JsonError& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("invalid JSON value: {}", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace gpuaas::model
