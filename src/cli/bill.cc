#include "cli/commands.h"

#include <optional>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "billing/billing.h"
#include "cli/client.h"
#include "cli/output.h"
#include "common/clock.h"
#include "common/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Escape;
using internal::Fail;
using internal::Fetch;
using internal::PrintStructured;
using internal::Send;
using nlohmann::json;

namespace {

// "4.5" for --NAME -> 4500000 micro-units (billing::ParseDecimal), the flag named in the error.
absl::StatusOr<int64_t> ParseMoney(std::string_view name, std::string_view v) {
  absl::StatusOr<billing::Micros> m = billing::ParseDecimal(v);
  if (!m.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", name, m.status().message()));
  return *m;
}

// Micro-units as the exact decimal amount: 4500000 -> "4.500000".
std::string Money(const json& micros) {
  return billing::Decimal(micros.is_number_integer() ? micros.get<int64_t>() : 0);
}

std::string Hours(const json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-"; }

std::string RunningMonth() {
  const std::string now = FormatTime(std::chrono::system_clock::now());
  return now.substr(0, 7);
}

void PrintInvoiceList(const std::vector<json>& invoices, std::ostream& out) {
  Table t({"PROJECT", "PERIOD", "STATE", "LINES", "GPU-HOURS", "USED", "TOTAL"});
  for (const json& inv : invoices) {
    double used = 0;
    bool has_used = false;
    for (const json& l : inv.value("lines", json::array())) {
      if (l.contains("usedGpuHours")) {
        used += l["usedGpuHours"].get<double>();
        has_used = true;
      }
    }
    t.Add({inv.value("project", ""), inv["period"].value("name", ""), inv.value("state", ""),
           std::to_string(inv.value("lines", json::array()).size()), Hours(inv["allocatedGpuHours"]),
           has_used ? Hours(json(used)) : "-", Money(inv["totalMicros"]) + " " + inv.value("currency", "")});
  }
  t.Print(out);
}

}  // namespace

int BillListCmd(const ClientOptions& o, const std::string& project, const std::string& period, std::ostream& out,
                std::ostream& err) {
  std::vector<std::string> projects;
  if (!project.empty()) {
    projects.push_back(project);
  } else {
    absl::StatusOr<std::string> body = Fetch(o, "/apis/gpuaas.io/v1/projects");
    if (!body.ok()) return Fail(err, body.status());
    const json list = json::parse(*body, nullptr, false);
    for (const json& p : list.value("items", json::array())) projects.push_back(p["metadata"].value("name", ""));
  }
  std::vector<json> invoices;
  json all = json::array();
  for (const std::string& p : projects) {
    absl::StatusOr<std::string> body =
        Fetch(o, "/api/v1/projects/" + Escape(p) + "/invoices" + (period.empty() ? "" : "?period=" + Escape(period)));
    if (!body.ok()) return Fail(err, body.status());
    const json j = json::parse(*body, nullptr, false);
    for (const json& inv : j.value("items", json::array())) {
      invoices.push_back(inv);
      all.push_back(inv);
    }
  }
  if (std::optional<int> code = PrintStructured(o, json{{"items", all}}.dump(), out, err)) return *code;
  if (invoices.empty()) {
    err << "No invoices found (a project's first invoice starts with its first approved pool).\n";
    return 0;
  }
  PrintInvoiceList(invoices, out);
  return 0;
}

int BillShowCmd(const ClientOptions& o, const std::string& project, const std::string& period, std::ostream& out,
                std::ostream& err) {
  const std::string p = period.empty() ? RunningMonth() : period;
  absl::StatusOr<std::string> body = Fetch(o, "/api/v1/projects/" + Escape(project) + "/invoices/" + Escape(p));
  if (!body.ok()) return Fail(err, body.status());
  if (std::optional<int> code = PrintStructured(o, *body, out, err)) return *code;
  const json inv = json::parse(*body, nullptr, false);
  const std::string currency = inv.value("currency", "");
  out << "Project: " << inv.value("project", "") << "   Period: " << inv["period"].value("name", "") << " ("
      << inv["period"].value("start", "") << " to " << inv["period"].value("end", "") << ")   State: "
      << inv.value("state", "") << "\n\n";
  Table t({"POOL", "ITEM", "KIND", "QTY", "HOURS", "UNIT PRICE/H", "AMOUNT", "GPU-HOURS", "USED"});
  for (const json& l : inv.value("lines", json::array())) {
    t.Add({l.value("pool", ""), l.value("item", ""), l.value("category", ""), std::to_string(l.value("quantity", 0)),
           fmt::format("{:.2f}", l.value("seconds", int64_t{0}) / 3600.0), Money(l["unitPriceMicros"]),
           Money(l["amountMicros"]), Hours(l["allocatedGpuHours"]),
           l.contains("usedGpuHours") ? Hours(l["usedGpuHours"]) : "-"});
  }
  t.Print(out);
  out << "\nTotal: " << Money(inv["totalMicros"]) << " " << currency << "   (" << inv.value("totalMicros", int64_t{0})
      << " micro-units; each line is seconds x quantity x unit price / 3600, rounded once)\n";
  for (const json& l : inv.value("lines", json::array())) {
    if (l.contains("description")) out << "  " << l.value("pool", "") << " " << l.value("item", "") << ": " << l.value("description", "") << "\n";
  }
  return 0;
}

int BillExportCmd(const ClientOptions& o, const std::string& project, const std::string& period,
                  const std::string& format, bool focus, const std::string& from, const std::string& to,
                  std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> body;
  if (focus) {
    std::string q;
    if (!project.empty()) q += "project=" + Escape(project);
    if (!from.empty()) q += (q.empty() ? "" : "&") + std::string("from=") + Escape(from);
    if (!to.empty()) q += (q.empty() ? "" : "&") + std::string("to=") + Escape(to);
    body = Fetch(o, "/api/v1/billing/focus" + (q.empty() ? "" : "?" + q));
  } else {
    if (project.empty()) return Fail(err, absl::InvalidArgumentError("give a PROJECT, or --focus for every project"));
    if (format != "csv" && format != "json") return Fail(err, absl::InvalidArgumentError("--format: csv or json"));
    body = Fetch(o, "/api/v1/projects/" + Escape(project) + "/invoices/" +
                        Escape(period.empty() ? RunningMonth() : period) + "?format=" + format);
  }
  if (!body.ok()) return Fail(err, body.status());
  out << *body;
  if (!body->empty() && body->back() != '\n') out << "\n";
  return 0;
}

int BillBudgetCmd(const ClientOptions& o, const std::string& project, const std::string& amount, int64_t gpu_hours,
                  bool allow_overrun, std::ostream& out, std::ostream& err) {
  int64_t micros = 0;
  if (!amount.empty()) {
    absl::StatusOr<int64_t> m = ParseMoney("--amount", amount);
    if (!m.ok()) return Fail(err, m.status());
    micros = *m;
  }
  if (gpu_hours < 0) return Fail(err, absl::InvalidArgumentError("--gpu-hours: must not be negative"));
  const json body = {{"amountMicros", micros}, {"gpuHours", gpu_hours}, {"allowOverrun", allow_overrun}};
  absl::StatusOr<std::string> r = Send(o, "PUT", "/apis/gpuaas.io/v1/projects/" + Escape(project) + "/budget", body.dump());
  if (!r.ok()) return Fail(err, r.status());
  if (micros == 0 && gpu_hours == 0) {
    out << "project/" << project << " budget removed\n";
  } else {
    out << "project/" << project << " budget set\n";
  }
  return 0;
}

int BillCreditCmd(const ClientOptions& o, const std::string& project, const std::string& period,
                  const std::string& amount, const std::string& reason, std::ostream& out, std::ostream& err) {
  absl::StatusOr<int64_t> micros = ParseMoney("--amount", amount);
  if (!micros.ok()) return Fail(err, micros.status());
  const json body = {{"period", period}, {"amountMicros", *micros}, {"reason", reason}};
  absl::StatusOr<std::string> r = Send(o, "POST", "/api/v1/projects/" + Escape(project) + "/creditnotes", body.dump());
  if (!r.ok()) return Fail(err, r.status());
  const json note = json::parse(*r, nullptr, false);
  out << "creditnote/" << (note.is_object() ? note["metadata"].value("name", "?") : "?") << " issued\n";
  return 0;
}

int RateCardCreateCmd(const ClientOptions& o, const RateCardCreate& c, std::ostream& out, std::ostream& err) {
  json prices = json::array();
  for (const std::string& p : c.prices) {
    const size_t slash = p.find('/'), eq = p.find('=');
    if (slash == std::string::npos || eq == std::string::npos || eq < slash) {
      return Fail(err, absl::InvalidArgumentError(fmt::format(
                           "--price \"{}\": MODEL/PROFILE=AMOUNT per device-hour, e.g. H200-SXM-141GB/full=4.50", p)));
    }
    absl::StatusOr<int64_t> m = ParseMoney("--price", p.substr(eq + 1));
    if (!m.ok()) return Fail(err, m.status());
    prices.push_back({{"model", p.substr(0, slash)}, {"profile", p.substr(slash + 1, eq - slash - 1)}, {"pricePerHourMicros", *m}});
  }
  const json card = {{"apiVersion", "gpuaas.io/v1"},
                     {"kind", "RateCard"},
                     {"metadata", {{"name", c.name}}},
                     {"spec",
                      {{"currency", c.currency},
                       {"effectiveFrom", c.from.empty() ? FormatTime(std::chrono::system_clock::now()) : c.from},
                       {"migPricing", c.mig_pricing},
                       {"prices", prices}}}};
  absl::StatusOr<std::string> r = Send(o, "POST", "/apis/gpuaas.io/v1/ratecards", card.dump());
  if (!r.ok()) return Fail(err, r.status());
  out << "ratecard/" << c.name << " created\n";
  return 0;
}

}  // namespace gpuaas::cli
