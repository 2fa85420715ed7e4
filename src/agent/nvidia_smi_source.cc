#include "agent/nvidia_smi_source.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "agent/nvidia_smi.h"

namespace gpuaas::agent {
namespace {

class NvidiaSmiSource final : public GpuSource {
 public:
  NvidiaSmiSource(std::string node, std::string file) : node_(std::move(node)), file_(std::move(file)) {}

  absl::StatusOr<telemetry::NodeReport> Read(int64_t now_ms) override {
    std::string xml;
    if (!file_.empty()) {
      std::ifstream in(file_);
      if (!in) return absl::NotFoundError(fmt::format("cannot read {}", file_));
      std::stringstream ss;
      ss << in.rdbuf();
      xml = ss.str();
    } else {
      FILE* p = popen("nvidia-smi -q -x 2>/dev/null", "r");
      if (p == nullptr) return absl::UnavailableError("cannot run nvidia-smi");
      char buf[65536];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) xml.append(buf, n);
      const int status = pclose(p);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return absl::FailedPreconditionError(
            fmt::format("nvidia-smi -q -x failed (exit {}): is the NVIDIA driver installed?",
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1));
      }
    }
    return ParseNvidiaSmiXml(xml, node_, now_ms);
  }

 private:
  std::string node_;
  std::string file_;
};

}  // namespace

std::unique_ptr<GpuSource> MakeNvidiaSmiSource(const std::string& node, const std::string& xml_file) {
  return std::make_unique<NvidiaSmiSource>(node, xml_file);
}

}  // namespace gpuaas::agent
