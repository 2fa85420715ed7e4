#include "api/internal/tables.h"

#include "common/strings.h"
#include "fmt/format.h"
#include "model/columns.h"
#include "nlohmann/json.hpp"

namespace gpuaas::api::internal {
namespace {

using nlohmann::json;

json ColumnDefinitions(std::string_view plural) {
  json defs = json::array();
  bool first = true;
  for (const std::string& c : model::Columns(plural)) {
    defs.push_back({{"name", c},
                    {"type", "string"},
                    {"format", first ? "name" : ""},
                    {"description", ""},
                    {"priority", 0}});
    first = false;
  }
  return defs;
}

absl::StatusOr<json> RowOf(std::string_view plural, const json& obj, const TableRequest& t, Time now) {
  absl::StatusOr<std::vector<std::string>> cells = model::Row(plural, obj, now);
  if (!cells.ok()) return cells.status();
  json row = {{"cells", *cells}};
  switch (t.include) {
    case IncludeObject::kNone: break;
    case IncludeObject::kMetadata:
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", t.api_version},
                       {"metadata", obj.value("metadata", json::object())}};
      break;
    case IncludeObject::kObject: row["object"] = obj; break;
  }
  return row;
}

}  // namespace

absl::StatusOr<std::optional<TableRequest>> WantsTable(std::string_view accept, std::string_view include_object) {
  std::optional<TableRequest> out;
  for (std::string_view range : SplitAny(accept, ",")) {
    std::string api_version;
    bool table = false, meta = false, json_type = false;
    bool first = true;
    for (std::string_view part : SplitAny(range, ";")) {
      const std::string_view p = Trim(part);
      if (first) {
        json_type = p == "application/json" || p == "*/*" || p == "application/*";
        first = false;
      } else if (p == "as=Table") {
        table = true;
      } else if (p == "g=meta.k8s.io") {
        meta = true;
      } else if (p.starts_with("v=")) {
        api_version = "meta.k8s.io/" + std::string(p.substr(2));
      }
    }
    if (!json_type) continue;
    if (table && meta && (api_version == "meta.k8s.io/v1" || api_version == "meta.k8s.io/v1beta1")) {
      out = TableRequest{api_version, IncludeObject::kMetadata};
      break;
    }
    if (!table) break;  // plain JSON comes first
  }
  if (!out) return out;
  if (include_object.empty() || include_object == "Metadata") {
    out->include = IncludeObject::kMetadata;
  } else if (include_object == "Object") {
    out->include = IncludeObject::kObject;
  } else if (include_object == "None") {
    out->include = IncludeObject::kNone;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("includeObject: \"{}\" is not None, Metadata or Object", include_object));
  }
  return out;
}

absl::StatusOr<std::string> ListAsTable(std::string_view plural, std::string_view list_json, const TableRequest& t,
                                        Time now) {
  const json list = json::parse(list_json, nullptr, false);
  if (!list.is_object()) return absl::InternalError("a list that is not JSON");
  json table = {{"kind", "Table"},
                {"apiVersion", t.api_version},
                {"metadata", list.value("metadata", json::object())},
                {"columnDefinitions", ColumnDefinitions(plural)},
                {"rows", json::array()}};
  table["metadata"].erase("remainingItemCount");
  for (const json& item : list.value("items", json::array())) {
    absl::StatusOr<json> row = RowOf(plural, item, t, now);
    if (!row.ok()) return row.status();
    table["rows"].push_back(std::move(*row));
  }
  return table.dump();
}

absl::StatusOr<std::string> ObjectAsTable(std::string_view plural, std::string_view object_json, const TableRequest& t,
                                          Time now, bool with_columns) {
  const json obj = json::parse(object_json, nullptr, false);
  if (!obj.is_object()) return absl::InternalError("an object that is not JSON");
  const json meta = obj.value("metadata", json::object());
  json table = {{"kind", "Table"},
                {"apiVersion", t.api_version},
                {"metadata", {{"resourceVersion", meta.value("resourceVersion", "")}}},
                {"rows", json::array()}};
  if (with_columns) table["columnDefinitions"] = ColumnDefinitions(plural);
  absl::StatusOr<json> row = RowOf(plural, obj, t, now);
  if (!row.ok()) return row.status();
  table["rows"].push_back(std::move(*row));
  return table.dump();
}

}  // namespace gpuaas::api::internal
