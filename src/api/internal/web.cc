#include "api/internal/web.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"

namespace gpuaas::api::internal {
namespace {

constexpr uintmax_t kMaxBytes = 64u << 20;

bool PlainName(std::string_view name) {
  if (name.empty() || name.front() == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot read {}", p.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string_view ContentTypeOf(std::string_view name) {
  auto ends = [&](std::string_view ext) { return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext; };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".json") || ends(".map")) return "application/json";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  if (ends(".ico")) return "image/x-icon";
  if (ends(".woff2")) return "font/woff2";
  if (ends(".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

absl::StatusOr<WebAssets> WebAssets::Load(const std::string& root) {
  namespace fs = std::filesystem;
  WebAssets w;
  const fs::path dir(root);
  absl::StatusOr<std::string> index = ReadFile(dir / "index.html");
  if (!index.ok()) {
    return absl::NotFoundError(fmt::format("{}: no index.html (build the dashboard: make web)", root));
  }
  w.index_ = {std::move(*index), std::string(ContentTypeOf("index.html"))};
  uintmax_t total = w.index_.body.size();
  std::error_code ec;
  if (fs::is_directory(dir / "assets", ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(dir / "assets", ec)) {
      if (!e.is_regular_file()) continue;
      const std::string name = e.path().filename().string();
      if (!PlainName(name)) {
        return absl::InvalidArgumentError(fmt::format("{}: asset names are [A-Za-z0-9._-] only", e.path().string()));
      }
      total += e.file_size(ec);
      if (total > kMaxBytes) return absl::InvalidArgumentError(fmt::format("{}: more than 64 MiB of assets", root));
      absl::StatusOr<std::string> body = ReadFile(e.path());
      if (!body.ok()) return body.status();
      w.assets_[name] = {std::move(*body), std::string(ContentTypeOf(name))};
    }
  }
  return w;
}

const WebFile* WebAssets::Asset(std::string_view name) const {
  auto it = assets_.find(name);
  return it == assets_.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, std::string>> WebAssets::Headers(bool immutable) {
  return {{"Content-Security-Policy", std::string(kDashboardCsp)},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"},
          {"Cache-Control", immutable ? "public, max-age=31536000, immutable" : "no-cache"}};
}

}  // namespace gpuaas::api::internal
