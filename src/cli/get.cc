#include "cli/commands.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/discovery.h"
#include "cli/output.h"
#include "common/status.h"
#include "common/strings.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Escape;
using internal::Fail;
using internal::Fetch;
using internal::FleetAliases;
using internal::PrintDoc;
using internal::PrintTable;
using internal::ServedType;
using internal::ServedTypes;
using internal::Watch;
using nlohmann::json;

namespace {

// The served type `what` names: its plural, singular, a short name, its kind, or a fleet alias,
// in any letter case. NotFound naming every type the server serves (and the closest) otherwise.
absl::StatusOr<ServedType> ResolveType(const ClientOptions& o, const std::string& what) {
  ASSIGN_OR_RETURN(std::vector<ServedType> types, ServedTypes(o));
  std::string want = ToLower(what);
  if (auto a = FleetAliases().find(want); a != FleetAliases().end()) want = a->second;
  std::vector<std::string> names;
  for (const ServedType& t : types) {
    if (t.plural == want || t.singular == want || ToLower(t.kind) == want ||
        std::find(t.short_names.begin(), t.short_names.end(), want) != t.short_names.end()) {
      return t;
    }
    names.push_back(t.plural);
  }
  for (const auto& [alias, plural] : FleetAliases()) names.push_back(alias);
  const std::string close = ClosestWord(what, names);
  std::vector<std::string> listed;
  for (const ServedType& t : types) listed.push_back(t.plural);
  return absl::NotFoundError(fmt::format(
      "unknown resource type \"{}\"{}; the server serves {} (and nodes, gpus, specs, pools for the fleet's "
      "kinds); gpuaas api-resources lists them with their short names",
      what, close.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", close), fmt::join(listed, ", ")));
}

}  // namespace

int Get(const ClientOptions& o, const std::string& what, const std::string& name, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<Format> format = ParseFormat(o.output);
  if (!format.ok()) return Fail(err, format.status());
  absl::StatusOr<ServedType> r = ResolveType(o, what);
  if (!r.ok()) return Fail(err, r.status());
  const std::string base = fmt::format("/apis/gpuaas.io/v1/{}", r->plural);
  std::vector<json> items;
  std::string list_revision;
  if (o.watch && !name.empty()) {
    return Fail(err, absl::InvalidArgumentError("--watch follows a list: give no NAME (use -l to narrow it)"));
  }
  if (!name.empty()) {
    absl::StatusOr<std::string> body = Fetch(o, base + "/" + Escape(name));
    if (!body.ok()) return Fail(err, body.status());
    if (*format != Format::kTable) {
      absl::Status s = PrintDoc(*body, *format, out);
      return s.ok() ? 0 : Fail(err, s);
    }
    items.push_back(json::parse(*body, nullptr, false));
  } else {
    // Page through the list as kubectl does, 500 at a time.
    std::string token;
    do {
      std::string path = base + "?limit=500";
      if (!o.selector.empty()) path += "&labelSelector=" + Escape(o.selector);
      if (!token.empty()) path += "&continue=" + Escape(token);
      absl::StatusOr<std::string> body = Fetch(o, path);
      if (!body.ok()) return Fail(err, body.status());
      json page = json::parse(*body, nullptr, false);
      if (!page.is_object()) return Fail(err, absl::InternalError("server sent invalid JSON"));
      for (json& item : page["items"]) items.push_back(std::move(item));
      if (list_revision.empty()) list_revision = page["metadata"].value("resourceVersion", "");
      token = page["metadata"].value("continue", "");
    } while (!token.empty());
    if (*format != Format::kTable && !o.watch) {
      json list = {{"apiVersion", "gpuaas.io/v1"}, {"kind", r->kind + "List"},
                   {"items", items}};
      absl::Status s = PrintDoc(list.dump(), *format, out);
      return s.ok() ? 0 : Fail(err, s);
    }
    if (items.empty() && !o.watch) {
      err << "No resources found.\n";
      return 0;
    }
  }
  if (!o.watch) {
    PrintTable(r->plural, items, out);
    return 0;
  }
  // --watch: the list first, then every change after its revision, as kubectl get -w prints them.
  if (*format == Format::kTable) {
    if (!items.empty()) PrintTable(r->plural, items, out);
  } else {
    for (const json& item : items) {
      if (absl::Status s = PrintDoc(item.dump(), *format, out); !s.ok()) return Fail(err, s);
    }
  }
  out << std::flush;
  bool header = items.empty() && *format == Format::kTable;
  absl::Status s = Watch(o, base, list_revision, [&](const json& event) {
    const json& obj = event["object"];
    if (*format != Format::kTable) {
      (void)PrintDoc(obj.dump(), *format, out);
    } else {
      std::ostringstream row;
      PrintTable(r->plural, {obj}, row);
      const std::string text = row.str();
      // The header once; then rows only.
      out << (header ? text : text.substr(text.find('\n') + 1));
      header = false;
    }
    out << std::flush;
  });
  return s.ok() ? 0 : Fail(err, s);
}

}  // namespace gpuaas::cli
