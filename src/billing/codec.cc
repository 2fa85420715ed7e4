#include "billing/codec.h"

#include "common/status.h"
#include "fmt/format.h"
#include "model/billing.h"
#include "nlohmann/json.hpp"

namespace gpuaas::billing {

using nlohmann::json;

std::string EncodeInvoice(const Invoice& inv) {
  json lines = json::array();
  for (const Line& l : inv.lines) {
    json j = {{"pool", l.pool},
              {"item", l.item()},
              {"category", l.category},
              {"quantity", l.quantity},
              {"seconds", l.seconds},
              {"unitPriceMicros", l.unit_price_micros},
              {"amountMicros", l.amount_micros},
              {"start", FormatTime(l.start)},
              {"end", FormatTime(l.end)},
              {"allocatedGpuHours", l.allocated_gpu_hours}};
    if (!l.rate_card.empty()) j["rateCard"] = l.rate_card;
    if (!l.description.empty()) j["description"] = l.description;
    if (l.used_gpu_hours) j["usedGpuHours"] = *l.used_gpu_hours;
    if (!l.corrects.empty()) j["corrects"] = l.corrects;
    if (!l.loan.empty()) j["loan"] = l.loan;
    lines.push_back(std::move(j));
  }
  const std::string name = inv.period.Name();
  json out = {{"apiVersion", "gpuaas.io/v1"},
              {"kind", model::kInvoiceKind},
              {"metadata", {{"name", name}, {"namespace", inv.project}}},
              {"project", inv.project},
              {"period", {{"name", name}, {"start", FormatTime(inv.period.start)}, {"end", FormatTime(inv.period.end)}}},
              {"state", ToString(inv.state)},
              {"currency", inv.currency},
              {"lines", std::move(lines)},
              {"totalMicros", inv.total_micros},
              {"allocatedGpuHours", inv.allocated_gpu_hours}};
  return out.dump();
}

absl::StatusOr<Invoice> DecodeInvoice(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("stored invoice is not JSON");
  try {
    Invoice inv;
    inv.project = j.at("project").get<std::string>();
    absl::StatusOr<Period> p = ParsePeriod(j.at("period").at("name").get<std::string>());
    if (!p.ok()) return absl::DataLossError(fmt::format("stored invoice: {}", p.status().message()));
    inv.period = *p;
    inv.state = j.at("state") == "final" ? InvoiceState::kFinal : InvoiceState::kDraft;
    inv.currency = j.at("currency").get<std::string>();
    inv.total_micros = j.at("totalMicros").get<int64_t>();
    inv.allocated_gpu_hours = j.value("allocatedGpuHours", 0.0);
    for (const json& l : j.at("lines")) {
      Line line;
      line.pool = l.at("pool").get<std::string>();
      const std::string item = l.at("item").get<std::string>();
      const size_t slash = item.rfind('/');
      line.model = item.substr(0, slash);
      line.profile = slash == std::string::npos ? "" : item.substr(slash + 1);
      line.category = l.at("category").get<std::string>();
      line.description = l.value("description", "");
      line.rate_card = l.value("rateCard", "");
      line.quantity = l.at("quantity").get<int64_t>();
      line.seconds = l.at("seconds").get<int64_t>();
      line.unit_price_micros = l.at("unitPriceMicros").get<int64_t>();
      line.amount_micros = l.at("amountMicros").get<int64_t>();
      line.start = ParseTime(l.at("start").get<std::string>()).value_or(Time{});
      line.end = ParseTime(l.at("end").get<std::string>()).value_or(Time{});
      line.allocated_gpu_hours = l.value("allocatedGpuHours", 0.0);
      if (l.contains("usedGpuHours")) line.used_gpu_hours = l.at("usedGpuHours").get<double>();
      line.corrects = l.value("corrects", "");
      line.loan = l.value("loan", "");
      inv.lines.push_back(std::move(line));
    }
    return inv;
  } catch (const json::exception& e) {
    return absl::DataLossError(fmt::format("stored invoice does not decode: {}", e.what()));
  }
}

}  // namespace gpuaas::billing
