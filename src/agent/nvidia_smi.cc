#include "agent/nvidia_smi.h"

#include <charconv>
#include <cstring>
#include <optional>

#include "fmt/format.h"
#include "tinyxml2.h"

namespace gpuaas::agent {

using telemetry::Field;
using telemetry::GpuReport;
using telemetry::InstanceReport;
using telemetry::NodeReport;
using telemetry::Readings;
using telemetry::RecoveryAction;

namespace {

using tinyxml2::XMLElement;

// The element at a path of child names, or null.
const XMLElement* At(const XMLElement* e, std::initializer_list<const char*> path) {
  for (const char* name : path) {
    if (e == nullptr) return nullptr;
    e = e->FirstChildElement(name);
  }
  return e;
}

std::string Text(const XMLElement* e) {
  if (e == nullptr || e->GetText() == nullptr) return "";
  std::string t = e->GetText();
  const size_t b = t.find_first_not_of(" \t\r\n");
  const size_t end = t.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : t.substr(b, end - b + 1);
}

// "67.03 W", "81559 MiB", "29 C", "0 %", "3": the leading number; nullopt for "N/A" and the like.
std::optional<double> Number(const XMLElement* e) {
  const std::string t = Text(e);
  if (t.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end == t.data()) return std::nullopt;
  return v;
}

std::optional<bool> YesNo(const XMLElement* e) {
  const std::string t = Text(e);
  if (t == "Yes") return true;
  if (t == "No") return false;
  return std::nullopt;
}

void Put(Readings& r, Field f, std::optional<double> v) {
  if (v) r[f] = *v;
}

// ECC counts of one kind (volatile or aggregate): double-bit = the uncorrectable DRAM and SRAM
// counts (v12+), or double_bit/total (older DTDs); single-bit likewise.
void Ecc(const XMLElement* block, Readings& r, Field sbe, Field dbe) {
  if (block == nullptr) return;
  if (const XMLElement* old = block->FirstChildElement("double_bit")) {
    Put(r, dbe, Number(old->FirstChildElement("total")));
    Put(r, sbe, Number(At(block, {"single_bit", "total"})));
    return;
  }
  auto sum = [&](std::initializer_list<const char*> names) -> std::optional<double> {
    std::optional<double> total;
    for (const char* n : names) {
      if (std::optional<double> v = Number(block->FirstChildElement(n))) total = total.value_or(0) + *v;
    }
    return total;
  };
  Put(r, dbe, sum({"dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity",
                   "sram_uncorrectable_secded"}));
  Put(r, sbe, sum({"dram_correctable", "sram_correctable"}));
}

std::optional<double> RecoveryActionOf(const XMLElement* gpu) {
  if (const XMLElement* a = gpu->FirstChildElement("gpu_recovery_action")) {
    const std::string t = Text(a);
    if (t == "None") return 0;
    if (t == "GPU Reset" || t == "Reset") return 1;
    if (t == "Node Reboot" || t == "Reboot") return 2;
    if (t == "Drain P2P") return 3;
    if (t == "Drain and Reset") return 4;
    return std::nullopt;
  }
  if (const XMLElement* s = gpu->FirstChildElement("gpu_reset_status")) {  // DTD v12
    if (YesNo(s->FirstChildElement("drain_and_reset_recommended")).value_or(false)) return 4;
    if (std::optional<bool> reset = YesNo(s->FirstChildElement("reset_required"))) return *reset ? 1 : 0;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<NodeReport> ParseNvidiaSmiXml(std::string_view xml, const std::string& node, int64_t now_ms) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) {
    return absl::InvalidArgumentError(
        fmt::format("nvidia-smi XML: {} (line {})", doc.ErrorStr() ? doc.ErrorStr() : "parse error", doc.ErrorLineNum()));
  }
  const XMLElement* root = doc.FirstChildElement("nvidia_smi_log");
  if (root == nullptr) return absl::InvalidArgumentError("nvidia-smi XML: no <nvidia_smi_log> root");
  NodeReport r;
  r.node = node;
  r.time_ms = now_ms;
  r.driver_version = Text(root->FirstChildElement("driver_version"));
  int index = 0;
  for (const XMLElement* g = root->FirstChildElement("gpu"); g != nullptr; g = g->NextSiblingElement("gpu")) {
    GpuReport gr;
    const double minor = Number(g->FirstChildElement("minor_number")).value_or(index);
    gr.index = minor >= 0 && minor < 1e6 ? static_cast<int>(minor) : index;
    ++index;
    gr.uuid = Text(g->FirstChildElement("uuid"));
    if (!gr.uuid.starts_with("GPU-")) {
      return absl::InvalidArgumentError(fmt::format("nvidia-smi XML: GPU {} has no UUID", index - 1));
    }
    gr.name = Text(g->FirstChildElement("product_name"));
    gr.mig_enabled = Text(At(g, {"mig_mode", "current_mig"})) == "Enabled";
    Readings& rd = gr.readings;
    const XMLElement* fb = g->FirstChildElement("fb_memory_usage");
    Put(rd, Field::kFbTotalMib, Number(At(fb, {"total"})));
    Put(rd, Field::kFbUsedMib, Number(At(fb, {"used"})));
    Put(rd, Field::kFbFreeMib, Number(At(fb, {"free"})));
    gr.memory_mib = static_cast<int64_t>(Number(At(fb, {"total"})).value_or(0));
    std::optional<double> power;
    for (auto path : {std::initializer_list<const char*>{"gpu_power_readings", "average_power_draw"},
                      std::initializer_list<const char*>{"gpu_power_readings", "power_draw"},
                      std::initializer_list<const char*>{"gpu_power_readings", "instant_power_draw"},
                      std::initializer_list<const char*>{"power_readings", "power_draw"}}) {
      if ((power = Number(At(g, path)))) break;
    }
    Put(rd, Field::kPowerW, power);
    Put(rd, Field::kTempC, Number(At(g, {"temperature", "gpu_temp"})));
    Put(rd, Field::kMemTempC, Number(At(g, {"temperature", "memory_temp"})));
    if (!gr.mig_enabled) Put(rd, Field::kGpuUtil, Number(At(g, {"utilization", "gpu_util"})));
    Ecc(At(g, {"ecc_errors", "volatile"}), rd, Field::kEccSbeVolatile, Field::kEccDbeVolatile);
    Ecc(At(g, {"ecc_errors", "aggregate"}), rd, Field::kEccSbeAggregate, Field::kEccDbeAggregate);
    if (const XMLElement* rp = g->FirstChildElement("retired_pages")) {
      Put(rd, Field::kRetiredSbe, Number(At(rp, {"multiple_single_bit_retirement", "retired_count"})));
      Put(rd, Field::kRetiredDbe, Number(At(rp, {"double_bit_retirement", "retired_count"})));
      std::optional<bool> pending = YesNo(rp->FirstChildElement("pending_retirement"));
      if (!pending) pending = YesNo(rp->FirstChildElement("pending_blacklist"));
      if (pending) rd[Field::kRetiredPending] = *pending ? 1 : 0;
    }
    if (const XMLElement* rr = g->FirstChildElement("remapped_rows")) {
      Put(rd, Field::kRemapCorrectable, Number(rr->FirstChildElement("remapped_row_corr")));
      Put(rd, Field::kRemapUncorrectable, Number(rr->FirstChildElement("remapped_row_unc")));
      if (std::optional<bool> p = YesNo(rr->FirstChildElement("remapped_row_pending"))) rd[Field::kRemapPending] = *p;
      if (std::optional<bool> f = YesNo(rr->FirstChildElement("remapped_row_failure"))) rd[Field::kRemapFailure] = *f;
    }
    Put(rd, Field::kRecoveryAction, RecoveryActionOf(g));
    if (const XMLElement* migs = g->FirstChildElement("mig_devices")) {
      for (const XMLElement* m = migs->FirstChildElement("mig_device"); m != nullptr;
           m = m->NextSiblingElement("mig_device")) {
        std::optional<double> gi = Number(m->FirstChildElement("gpu_instance_id"));
        if (!gi || *gi < 0 || *gi > 1e6) continue;
        InstanceReport in;
        in.gi = static_cast<int>(*gi);
        in.start = -1;
        const XMLElement* mfb = m->FirstChildElement("fb_memory_usage");
        Put(in.readings, Field::kFbTotalMib, Number(At(mfb, {"total"})));
        Put(in.readings, Field::kFbUsedMib, Number(At(mfb, {"used"})));
        Put(in.readings, Field::kFbFreeMib, Number(At(mfb, {"free"})));
        gr.instances.push_back(std::move(in));
      }
    }
    r.gpus.push_back(std::move(gr));
  }
  return r;
}

}  // namespace gpuaas::agent
