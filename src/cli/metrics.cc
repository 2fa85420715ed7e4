#include "cli/commands.h"

#include <optional>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <string>

#include "cli/client.h"
#include "cli/output.h"
#include "common/clock.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::Fetch;
using internal::PrintStructured;
using nlohmann::json;

int MetricsCmd(const ClientOptions& o, const std::string& series, const std::string& since, int64_t step,
               std::ostream& out, std::ostream& err) {
  int64_t seconds = 0;
  const std::string unit = since.empty() ? "" : since.substr(since.size() - 1);
  try {
    seconds = std::stoll(since.substr(0, since.size() - 1)) * (unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0);
  } catch (...) {
    seconds = 0;
  }
  if (seconds <= 0) return Fail(err, absl::InvalidArgumentError("--since: a duration such as 30m, 6h or 7d"));
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  std::string encoded;
  for (char c : series) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':') {
      encoded.push_back(c);
    } else {
      encoded += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  absl::StatusOr<std::string> body = Fetch(
      o, fmt::format("/api/v1/metrics/query?series={}&from={}&to={}&step={}", encoded, now - seconds, now, step));
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  json j = json::parse(*body, nullptr, false);
  Table t({"TIME", "VALUE", "MAX"});
  for (const json& p : j.value("points", json::array())) {
    if (p["value"].is_null()) continue;
    t.Add({FormatTime(Time(std::chrono::seconds(p.value("t", int64_t{0})))), p["value"].dump(),
           p.contains("max") ? p["max"].dump() : "-"});
  }
  t.Print(out);
  return 0;
}

}  // namespace gpuaas::cli
