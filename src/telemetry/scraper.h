// Scrapes existing dcgm-exporter endpoints into the hub, for nodes that run dcgm-exporter rather
// than the gpuaas agent (`gpuaas server --scrape URL`). The HTTP fetch is handed in, so this stays
// free of I/O libraries; exe/ wires cpp-httplib. Thread-compatible: one ScrapeAll at a time.
#ifndef GPUAAS_TELEMETRY_SCRAPER_H_
#define GPUAAS_TELEMETRY_SCRAPER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "telemetry/hub.h"

namespace gpuaas::telemetry {

// GETs a URL and returns the body; Unavailable (or another error) when it cannot.
using Fetch = std::function<absl::StatusOr<std::string>(const std::string& url)>;

struct TargetHealth {
  bool up = false;
  std::string last_error;
  int64_t samples = 0;
  int64_t last_scrape_ms = 0;
};

class Scraper {
 public:
  Scraper(Hub& hub, std::vector<std::string> urls, Fetch fetch)
      : hub_(hub), urls_(std::move(urls)), fetch_(std::move(fetch)) {}
  // Scrapes every target once; a failing target is recorded and does not stop the others.
  void ScrapeAll(int64_t now_ms);
  const std::map<std::string, TargetHealth>& targets() const { return targets_; }

 private:
  Hub& hub_;
  std::vector<std::string> urls_;
  Fetch fetch_;
  std::map<std::string, TargetHealth> targets_;
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_SCRAPER_H_
