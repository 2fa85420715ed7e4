#include "api/internal/web.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "zlib.h"

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

bool Compressible(std::string_view type) {
  return type.starts_with("text/") || type.starts_with("application/json") || type.starts_with("image/svg");
}

WebFile MakeFile(std::string body, std::string_view type) {
  WebFile f{std::move(body), std::string(type), {}};
  if (Compressible(type)) {
    std::string z = Gzip(f.body);
    if (!z.empty() && z.size() < f.body.size()) f.gzip = std::move(z);
  }
  return f;
}

}  // namespace

std::string Gzip(std::string_view in) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const uLong written = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return {};
  out.resize(written);
  return out;
}

bool AcceptsGzip(std::string_view header) {
  size_t at = 0;
  while (at <= header.size()) {
    size_t end = header.find(',', at);
    if (end == std::string_view::npos) end = header.size();
    std::string_view item = header.substr(at, end - at);
    at = end + 1;
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    const size_t semi = item.find(';');
    std::string_view coding = item.substr(0, semi);
    while (!coding.empty() && coding.back() == ' ') coding.remove_suffix(1);
    if (coding != "gzip" && coding != "*") continue;
    if (semi == std::string_view::npos) return true;
    std::string_view params = item.substr(semi + 1);
    const size_t q = params.find("q=");
    if (q == std::string_view::npos) return true;
    std::string_view v = params.substr(q + 2);
    // q=0, q=0.0, q=0.000: refused; anything else accepts.
    bool zero = !v.empty() && v.front() == '0';
    for (size_t i = 1; zero && i < v.size() && v[i] != ' ' && v[i] != ';'; ++i) zero = v[i] == '.' || v[i] == '0';
    if (!zero) return true;
  }
  return false;
}

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
  w.index_ = MakeFile(std::move(*index), ContentTypeOf("index.html"));
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
      w.assets_[name] = MakeFile(std::move(*body), ContentTypeOf(name));
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
          {"Cache-Control", immutable ? "public, max-age=31536000, immutable" : "no-cache"},
          {"Vary", "Accept-Encoding"}};
}

namespace {

HttpResponse DashboardFile(const HttpRequest& req, const WebFile& f, bool immutable) {
  HttpResponse r{200, f.content_type, f.body, WebAssets::Headers(immutable), nullptr};
  if (!f.gzip.empty() && AcceptsGzip(req.Header("Accept-Encoding"))) {
    r.body = f.gzip;
    r.headers.emplace_back("Content-Encoding", "gzip");
  }
  return r;
}

}  // namespace

absl::StatusOr<HttpResponse> DashboardPage(const WebAssets* web, const HttpRequest& req) {
  if (web == nullptr) {
    return absl::NotFoundError(
        "this server runs without the dashboard: build it (make web) and start the server with --web web/dist");
  }
  return DashboardFile(req, web->index(), false);
}

absl::StatusOr<HttpResponse> DashboardAsset(const WebAssets* web, const HttpRequest& req, std::string_view name) {
  const WebFile* f = web ? web->Asset(name) : nullptr;
  if (f == nullptr) return absl::NotFoundError(fmt::format("no dashboard asset \"{}\"", name));
  return DashboardFile(req, *f, true);
}

}  // namespace gpuaas::api::internal
