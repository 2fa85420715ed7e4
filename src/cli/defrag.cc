#include "cli/commands.h"

#include <optional>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/output.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::Fetch;
using internal::PrintStructured;
using internal::Send;
using nlohmann::json;

namespace {

void PrintMoves(const json& moves, std::ostream& out) {
  Table t({"GPU", "NODE", "MODEL", "NOW", "AFTER", "DESTROYS", "LARGEST NOW", "LARGEST AFTER"});
  for (const json& m : moves) {
    auto or_dash = [&](const char* k) { return m.value(k, "").empty() ? std::string("-") : m.value(k, ""); };
    t.Add({m.value("gpu", ""), m.value("node", ""), m.value("model", ""), or_dash("before"), or_dash("after"),
           or_dash("destroys"), or_dash("largestBefore"), or_dash("largestAfter")});
  }
  t.Print(out);
  // Moves that empty a GPU: where each instance goes.
  bool header = false;
  for (const json& m : moves) {
    for (const json& r : m.value("moves", json::array())) {
      if (!header) out << "\nmoved instances (pools that allow it; no workload uses them):\n";
      header = true;
      const json from = r.value("from", json::object()), to = r.value("to", json::object());
      out << fmt::format("  {} {} on {}@{} -> {}@{}{}\n", r.value("pool", ""), r.value("profile", ""),
                         from.value("gpu", ""), from.value("start", 0), to.value("gpu", ""), to.value("start", 0),
                         to.value("instance", "").empty() ? " (a new instance)" : " (a free instance there)");
    }
  }
}

}  // namespace

int DefragPlanCmd(const ClientOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/defrag");
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  const json j = json::parse(*body, nullptr, false);
  const json moves = j.value("moves", json::array());
  if (moves.empty()) {
    out << "nothing to defragment: no GPU's free instances stand in the way of a larger profile, and no GPU can be "
           "emptied by moving idle instances of pools that allow it\n";
    return 0;
  }
  PrintMoves(moves, out);
  // What changes in what the fleet could hand out.
  Table room({"MODEL", "PROFILE", "ROOM NOW", "ROOM AFTER"});
  const json rooms = j.value("room", json::object());  // kept: items() refers to it
  for (const auto& [model, profiles] : rooms.items()) {
    for (const auto& [profile, r] : profiles.items()) {
      if (r.value("now", 0) == r.value("after", 0)) continue;
      room.Add({model, profile, std::to_string(r.value("now", 0)), std::to_string(r.value("after", 0))});
    }
  }
  out << "\n";
  room.Print(out);
  out << "\n" << moves.size() << " GPU(s); `gpuaas defrag apply` makes every move, `--gpu UUID` some\n";
  return 0;
}

int DefragApplyCmd(const ClientOptions& o, const std::vector<std::string>& gpus, std::ostream& out, std::ostream& err) {
  const json req = gpus.empty() ? json::object() : json{{"gpus", gpus}};
  absl::StatusOr<std::string> body = Send(o, "POST", "/api/v1/defrag", req.dump());
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  // The answer is the request (a Defragmentation) as the pool controller left it.
  const json d = json::parse(*body, nullptr, false);
  const std::string name = d.is_object() ? d.value("metadata", json::object()).value("name", "") : "";
  const json status = d.is_object() ? d.value("status", json::object()) : json::object();
  if (status.value("phase", "") != "Applied") {
    out << "asked for as " << name << "; its moves are not made yet: `gpuaas get defragmentations " << name
        << "` follows it\n";
    return 0;
  }
  const json moves = status.value("moves", json::array());
  PrintMoves(moves, out);
  out << moves.size() << " GPU(s) to be laid out anew (" << name << "); `gpuaas get miglayouts` follows them\n";
  return 0;
}

}  // namespace gpuaas::cli
