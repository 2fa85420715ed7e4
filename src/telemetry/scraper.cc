#include "telemetry/scraper.h"

namespace gpuaas::telemetry {

void Scraper::ScrapeAll(int64_t now_ms) {
  for (const std::string& url : urls_) {
    TargetHealth& t = targets_[url];
    t.last_scrape_ms = now_ms;
    absl::StatusOr<std::string> body = fetch_(url);
    absl::StatusOr<IngestResult> r =
        body.ok() ? hub_.IngestText(*body, now_ms, nullptr, "scrape " + url) : absl::StatusOr<IngestResult>(body.status());
    t.up = r.ok();
    t.last_error = r.ok() ? "" : std::string(r.status().message());
    t.samples = r.ok() ? r->samples : 0;
  }
}

}  // namespace gpuaas::telemetry
