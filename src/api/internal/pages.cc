#include "api/internal/pages.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "common/strings.h"
#include "fmt/format.h"

namespace gpuaas::api::internal {

std::string ContinueToken(std::string_view plural, int64_t revision, std::string_view ns, std::string_view name) {
  return Base64UrlEncode(fmt::format("v2\x1f{}\x1f{}\x1f{}\x1f{}", plural, revision, ns, name));
}

absl::StatusOr<ContinueAt> ParseContinue(std::string_view plural, std::string_view token) {
  std::optional<std::string> raw = Base64UrlDecode(token);
  std::vector<std::string_view> parts;
  if (raw) parts = Split(*raw, '\x1f');
  if (parts.size() == 4 && parts[0] == "v1" && parts[1] == plural) {
    return absl::OutOfRangeError("continue: the token is too old to continue the list consistently; list again");
  }
  std::optional<int64_t> rev = parts.size() == 5 ? ParseInt(parts[2]) : std::nullopt;
  if (parts.size() != 5 || parts[0] != "v2" || parts[1] != plural || !rev || *rev < 0) {
    return absl::InvalidArgumentError(
        "continue: invalid token; pass the metadata.continue value of the previous page unchanged");
  }
  return ContinueAt{*rev, {std::string(parts[3]), std::string(parts[4])}};
}

void PageSnapshots::ExpireLocked(TimePoint now) {
  std::erase_if(held_, [&](const auto& kv) { return now - kv.second.used > ttl_; });
  while (held_.size() > max_held_) {
    auto oldest = std::min_element(held_.begin(), held_.end(),
                                   [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    held_.erase(oldest);
  }
}

void PageSnapshots::Hold(const std::string& kind, std::shared_ptr<const store::KindSnapshot> snap, TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t rev = snap->revision;
  held_[{kind, rev}] = Held{std::move(snap), now};
  ExpireLocked(now);
}

std::shared_ptr<const store::KindSnapshot> PageSnapshots::Find(const std::string& kind, int64_t revision,
                                                               TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked(now);
  auto it = held_.find({kind, revision});
  if (it == held_.end()) return nullptr;
  it->second.used = now;
  return it->second.snap;
}

size_t PageSnapshots::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

}  // namespace gpuaas::api::internal
