#include "api/internal/router.h"

#include <set>

#include "common/strings.h"

namespace gpuaas::api::internal {
namespace {

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  for (std::string_view s : SplitAny(path, "/")) out.emplace_back(s);
  return out;
}

// Splits a path into at most kMaxSegments segments without allocating; false when there are more.
constexpr size_t kMaxSegments = 8;
bool PathSegments(std::string_view path, std::array<std::string_view, kMaxSegments>& out, size_t& n) {
  n = 0;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    if (i == path.size()) break;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (n == kMaxSegments) return false;
    out[n++] = path.substr(i, j - i);
    i = j;
  }
  return true;
}

}  // namespace

void Router::Add(std::string pattern, std::string method, Policy policy, Handler h) {
  for (Route& r : routes_) {
    if (r.pattern == pattern) {
      r.methods[method] = {std::move(h), policy};
      return;
    }
  }
  Route r{pattern, SplitPath(pattern), {}, {}};
  r.methods[method] = {std::move(h), policy};
  routes_.push_back(std::move(r));
}

void Router::Instead(const std::string& pattern, const std::string& method, std::string hint) {
  for (Route& r : routes_) {
    if (r.pattern == pattern) r.instead[method] = std::move(hint);
  }
}

const Route* Router::Match(std::string_view path, std::string_view method, Params& params,
                           std::string& allow) const {
  std::array<std::string_view, kMaxSegments> segs;
  size_t n = 0;
  if (!PathSegments(path, segs, n)) return nullptr;
  const Route* best = nullptr;
  int best_literals = -1;
  std::set<std::string> methods;
  for (const Route& r : routes_) {
    if (r.segments.size() != n) continue;
    Params p;
    bool ok = true;
    int literals = 0;
    for (size_t i = 0; i < n && ok; ++i) {
      const std::string& want = r.segments[i];
      if (want.size() > 2 && want.front() == '{' && want.back() == '}' && p.n < p.kv.size()) {
        p.kv[p.n++] = {std::string_view(want).substr(1, want.size() - 2), segs[i]};
      } else {
        ok = want == segs[i];
        ++literals;
      }
    }
    if (!ok) continue;
    for (const auto& [m, h] : r.methods) methods.insert(m);
    if (r.methods.count(std::string(method)) && literals > best_literals) {
      best = &r;
      best_literals = literals;
      params = p;
    }
  }
  if (best == nullptr) {
    for (const std::string& m : methods) allow += (allow.empty() ? "" : ", ") + m;
  }
  return best;
}

}  // namespace gpuaas::api::internal
