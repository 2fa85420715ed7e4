#include "api/internal/apply.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/object.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {
namespace {

using nlohmann::json;
using Path = std::vector<std::string>;
using FieldSet = std::set<Path>;

constexpr size_t kMaxManagerLength = 128;

// The members of an object that managers own: labels and annotations of metadata, and spec.
// (status is its controllers'; the rest of metadata the server's.)
bool Tracked(const Path& p) {
  if (p.empty()) return true;
  if (p[0] == "metadata") return p.size() < 2 || p[1] == "labels" || p[1] == "annotations";
  return p[0] == "spec";
}

// The leaves of `j` under `at`: members whose values are not non-empty objects.
void Leaves(const json& j, Path& at, FieldSet& out) {
  if (!Tracked(at)) return;
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      at.push_back(it.key());
      Leaves(it.value(), at, out);
      at.pop_back();
    }
  } else if (!at.empty()) {
    out.insert(at);
  }
}

FieldSet LeavesOf(const json& obj) {
  FieldSet out;
  Path at;
  Leaves(obj, at, out);
  return out;
}

// The value at `p`, or nullptr.
const json* At(const json& j, const Path& p) {
  const json* cur = &j;
  for (const std::string& k : p) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

// Removes the member at `p`, and the objects it leaves empty on the way up (but not metadata or
// spec themselves).
void Remove(json& j, const Path& p, size_t depth = 0) {
  if (!j.is_object() || depth >= p.size()) return;
  auto it = j.find(p[depth]);
  if (it == j.end()) return;
  if (depth + 1 == p.size()) {
    j.erase(it);
    return;
  }
  Remove(*it, p, depth + 1);
  if (depth >= 1 && it->is_object() && it->empty()) j.erase(it);
}

// Member by member for objects; anything else replaces.
void MergeInto(json& target, const json& from) {
  if (!target.is_object() || !from.is_object()) {
    target = from;
    return;
  }
  for (auto it = from.begin(); it != from.end(); ++it) MergeInto(target[it.key()], it.value());
}

// One path is the other or lies under it.
bool Overlap(const Path& a, const Path& b) {
  const size_t n = std::min(a.size(), b.size());
  return std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin());
}

// ".spec.items", as kube-apiserver names a field in a conflict.
std::string FieldName(const Path& p) {
  std::string out;
  for (const std::string& k : p) out += "." + k;
  return out;
}

// FieldsV1: {"f:spec":{"f:items":{}}}.
json ToFieldsV1(const FieldSet& set) {
  json out = json::object();
  for (const Path& p : set) {
    json* cur = &out;
    for (const std::string& k : p) cur = &(*cur)["f:" + k];
    if (cur->is_null()) *cur = json::object();
  }
  return out;
}

void FromFieldsV1(const json& j, Path& at, FieldSet& out) {
  bool any = false;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.key().starts_with("f:")) continue;  // "." and keyed list entries: not kept here
      any = true;
      at.push_back(it.key().substr(2));
      FromFieldsV1(it.value(), at, out);
      at.pop_back();
    }
  }
  if (!any && !at.empty()) out.insert(at);
}

struct Entry {
  std::string manager;
  std::string operation;
  std::string time;
  FieldSet fields;
};

std::vector<Entry> EntriesOf(const json* obj) {
  std::vector<Entry> out;
  if (obj == nullptr) return out;
  const json* mf = At(*obj, {"metadata", "managedFields"});
  if (mf == nullptr || !mf->is_array()) return out;
  for (const json& e : *mf) {
    if (!e.is_object()) continue;
    Entry entry{e.value("manager", ""), e.value("operation", ""), e.value("time", ""), {}};
    Path at;
    if (auto f = e.find("fieldsV1"); f != e.end()) FromFieldsV1(*f, at, entry.fields);
    out.push_back(std::move(entry));
  }
  return out;
}

// Writes `entries` as `obj`'s managedFields (none left: the member goes). An entry whose fields
// are unchanged from `before` keeps its time.
void SetEntries(json& obj, std::vector<Entry> entries, const std::vector<Entry>& before, Time now) {
  json a = json::array();
  for (Entry& e : entries) {
    if (e.fields.empty()) continue;
    std::string time = FormatTime(std::chrono::floor<std::chrono::seconds>(now));
    for (const Entry& b : before) {
      if (b.manager == e.manager && b.operation == e.operation && b.fields == e.fields) time = b.time;
    }
    a.push_back({{"manager", e.manager},
                 {"operation", e.operation},
                 {"apiVersion", model::kApiVersion},
                 {"time", time},
                 {"fieldsType", "FieldsV1"},
                 {"fieldsV1", ToFieldsV1(e.fields)}});
  }
  if (!obj.is_object()) return;
  auto meta = obj.find("metadata");
  if (a.empty()) {
    if (meta != obj.end() && meta->is_object()) meta->erase("managedFields");
  } else if (meta == obj.end() || meta->is_object()) {
    obj["metadata"]["managedFields"] = std::move(a);
  }
}

Entry& EntryFor(std::vector<Entry>& entries, std::string_view manager, std::string_view operation) {
  for (Entry& e : entries) {
    if (e.manager == manager && e.operation == operation) return e;
  }
  entries.push_back({std::string(manager), std::string(operation), "", {}});
  return entries.back();
}

// Takes `p` (and what overlaps it) from every entry but `keep`.
void TakeFromOthers(std::vector<Entry>& entries, const Entry* keep, const Path& p) {
  for (Entry& e : entries) {
    if (&e == keep) continue;
    std::erase_if(e.fields, [&](const Path& q) { return Overlap(p, q); });
  }
}

}  // namespace

void KeepOwnedFieldsOf(const json& object, json& managed_fields) {
  if (!managed_fields.is_array()) return;
  json kept = json::array();
  for (json& e : managed_fields) {
    if (!e.is_object()) continue;
    FieldSet fields;
    Path at;
    if (auto f = e.find("fieldsV1"); f != e.end()) FromFieldsV1(*f, at, fields);
    std::erase_if(fields, [&](const Path& p) { return At(object, p) == nullptr; });
    if (fields.empty()) continue;
    e["fieldsV1"] = ToFieldsV1(fields);
    kept.push_back(std::move(e));
  }
  managed_fields = std::move(kept);
}

absl::StatusOr<std::string> FieldManagerOf(const HttpRequest& req, bool apply) {
  std::string manager = req.Param("fieldManager");
  if (manager.empty() && req.HasParam("fieldManager")) {
    return absl::InvalidArgumentError("fieldManager: must not be empty");
  }
  if (manager.size() > kMaxManagerLength ||
      std::any_of(manager.begin(), manager.end(), [](char c) { return c < 0x20 || c == 0x7f; })) {
    return absl::InvalidArgumentError(
        fmt::format("fieldManager: at most {} printable characters", kMaxManagerLength));
  }
  if (!manager.empty()) return manager;
  if (apply) {
    return absl::InvalidArgumentError(
        "fieldManager: required for apply requests (application/apply-patch+yaml): name the tool that owns the "
        "fields, e.g. ?fieldManager=argocd");
  }
  const std::string agent = req.Header("User-Agent");
  manager = agent.substr(0, std::min(agent.find('/'), agent.find(' ')));
  if (manager.empty() || manager.size() > kMaxManagerLength) return std::string("unknown");
  return manager;
}

void RecordUpdate(const json* before, json& after, std::string_view manager, Time now) {
  const std::vector<Entry> old = EntriesOf(before);
  std::vector<Entry> entries = old;
  const FieldSet now_fields = LeavesOf(after);
  Entry& mine = EntryFor(entries, manager, "Update");
  for (const Path& p : now_fields) {
    const json* was = before == nullptr ? nullptr : At(*before, p);
    if (was != nullptr && *was == *At(after, p)) continue;  // unchanged: its owners keep it
    TakeFromOthers(entries, &mine, p);
    mine.fields.insert(p);
  }
  if (before != nullptr) {
    for (const Path& p : LeavesOf(*before)) {
      if (At(after, p) != nullptr) continue;
      for (Entry& e : entries) {
        std::erase_if(e.fields, [&](const Path& q) { return Overlap(p, q) && At(after, q) == nullptr; });
      }
    }
  }
  SetEntries(after, std::move(entries), old, now);
}

absl::StatusOr<json> ServerSideApply(const json* live, const json& config, std::string_view manager, bool force,
                                     Time now) {
  const std::vector<Entry> old = EntriesOf(live);
  std::vector<Entry> entries = old;
  const FieldSet applied = LeavesOf(config);
  json result = live != nullptr ? *live : json::object();
  // What the manager applied before and no longer does goes, unless another manager owns it.
  Entry& mine = EntryFor(entries, manager, "Apply");
  for (const Path& p : mine.fields) {
    if (applied.contains(p)) continue;
    const bool shared = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
      return &e != &mine && std::any_of(e.fields.begin(), e.fields.end(), [&](const Path& q) { return Overlap(p, q); });
    });
    if (!shared) Remove(result, p);
  }
  MergeInto(result, config);
  // Whether applying field `p` changes the value of another manager's field `q`: they overlap,
  // and the value at the shorter of the two paths differs (the same value is shared, no conflict).
  auto changes = [&](const Path& p, const Path& q) {
    if (!Overlap(p, q)) return false;
    const Path& at = p.size() <= q.size() ? p : q;
    const json* was = live == nullptr ? nullptr : At(*live, at);
    const json* will = At(result, at);
    return was == nullptr || will == nullptr || *was != *will;
  };
  if (!force) {
    // Conflicts, named as kube-apiserver names them: "mgr" for an applier, "mgr" using
    // gpuaas.io/v1 for an updater.
    std::map<std::string, std::vector<std::string>> conflicts;  // manager -> fields
    size_t count = 0;
    for (const Entry& e : entries) {
      if (&e == &mine || e.manager == manager) continue;
      const std::string who = e.operation == "Apply" ? fmt::format("\"{}\"", e.manager)
                                                     : fmt::format("\"{}\" using {}", e.manager, model::kApiVersion);
      for (const Path& q : e.fields) {
        if (std::any_of(applied.begin(), applied.end(), [&](const Path& p) { return changes(p, q); })) {
          conflicts[who].push_back(FieldName(q));
          ++count;
        }
      }
    }
    if (count == 1) {
      return absl::AbortedError(fmt::format("Apply failed with 1 conflict: conflict with {}: {}",
                                            conflicts.begin()->first, conflicts.begin()->second.front()));
    }
    if (count > 1) {
      std::vector<std::string> lines;
      for (const auto& [who, fields] : conflicts) {
        lines.push_back(fmt::format("conflicts with {}:", who));
        for (const std::string& f : fields) lines.push_back("- " + f);
      }
      return absl::AbortedError(fmt::format("Apply failed with {} conflicts: {}", count, fmt::join(lines, "\n")));
    }
  }
  // The applied fields are the manager's now: taken from the managers whose values they change,
  // shared with those whose values they keep.
  for (Entry& e : entries) {
    if (&e == &mine) continue;
    std::erase_if(e.fields, [&](const Path& q) {
      return std::any_of(applied.begin(), applied.end(), [&](const Path& p) { return changes(p, q); });
    });
  }
  mine.fields = applied;
  SetEntries(result, std::move(entries), old, now);
  return result;
}

}  // namespace gpuaas::api::internal
