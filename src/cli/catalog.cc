#include "cli/commands.h"

#include <algorithm>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "cli/client.h"
#include "cli/output.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {

using internal::Fail;
using internal::PrintDoc;
using nlohmann::json;

int CatalogModels(const std::string& output, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Format> format = ParseFormat(output);
  if (!format.ok()) return Fail(err, format.status());
  if (*format == Format::kTable) {
    Table t({"MODEL", "FAMILY", "MEMORY", "MIG", "PROFILES"});
    for (const catalog::GpuModel& m : catalog::AllModels()) {
      std::string profiles;
      for (const catalog::MigProfile& p : m.profiles) {
        profiles += (profiles.empty() ? "" : ",") + std::string(p.name);
      }
      t.Add({std::string(m.name), std::string(m.family), fmt::format("{}GB", m.memory_gb),
             m.mig_capable ? "yes" : "no", profiles.empty() ? "full only" : profiles});
    }
    t.Print(out);
    return 0;
  }
  json models = json::array();
  for (const catalog::GpuModel& m : catalog::AllModels()) {
    json profiles = json::array();
    for (const catalog::MigProfile& p : m.profiles) {
      profiles.push_back({{"name", p.name}, {"id", p.id}, {"computeSlices", p.compute_slices},
                          {"memorySlices", p.memory_slices}, {"memoryGB", p.memory_gb},
                          {"maxCount", p.max_count},
                          {"starts", std::vector<int>(p.starts.begin(), p.starts.end())}});
    }
    models.push_back({{"model", m.name}, {"family", m.family}, {"memoryGB", m.memory_gb},
                      {"migCapable", m.mig_capable}, {"computeSlices", m.compute_slices},
                      {"memorySlices", m.memory_slices},
                      {"products", std::vector<std::string>(m.products.begin(), m.products.end())},
                      {"profiles", profiles}});
  }
  absl::Status s = PrintDoc(models.dump(), *format, out);
  return s.ok() ? 0 : Fail(err, s);
}

int CatalogLayouts(const std::string& model, std::ostream& out, std::ostream& err) {
  const catalog::GpuModel* m = catalog::FindModel(model);
  if (m == nullptr) {
    return Fail(err, absl::NotFoundError(fmt::format(
                         "unknown GPU model \"{}\"; `gpuaas catalog models` lists them", model)));
  }
  if (!m->mig_capable) {
    return Fail(err, absl::FailedPreconditionError(
                         fmt::format("{} does not support MIG; it is used as a full GPU only", m->name)));
  }
  std::vector<std::string> lines;
  for (const catalog::Layout& l : catalog::MaximalLayouts(*m)) lines.push_back(catalog::FormatLayout(l));
  std::sort(lines.begin(), lines.end());
  for (const std::string& l : lines) out << l << "\n";
  return 0;
}

}  // namespace gpuaas::cli
