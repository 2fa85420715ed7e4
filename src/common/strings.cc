#include "common/strings.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include "absl/strings/escaping.h"
#include "fmt/format.h"

namespace gpuaas {

std::vector<std::string_view> SplitAny(std::string_view s, std::string_view seps) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find_first_of(seps, i);
    if (j == std::string_view::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (true) {
    size_t j = s.find(sep, i);
    if (j == std::string_view::npos) {
      out.push_back(s.substr(i));
      return out;
    }
    out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

bool EndsWithIgnoreCase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && EqualsIgnoreCase(s.substr(s.size() - suffix.size()), suffix);
}

std::string FixedMicros(int64_t micros) {
  const bool negative = micros < 0;
  const unsigned long long m =
      negative ? 0ULL - static_cast<unsigned long long>(micros) : static_cast<unsigned long long>(micros);
  return fmt::format("{}{}.{:06}", negative ? "-" : "", m / 1000000, m % 1000000);
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string Base64UrlEncode(std::string_view data) {
  return absl::WebSafeBase64Escape(absl::string_view(data.data(), data.size()));
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
      cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      cp = c & 0x07u;
    } else {
      return false;  // a continuation byte first, an overlong lead (C0, C1) or past F4
    }
    if (i + n >= s.size()) return false;  // cut short
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0u) != 0x80u) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

std::optional<std::string> Base64UrlDecode(std::string_view text) {
  std::string out;
  if (!absl::WebSafeBase64Unescape(absl::string_view(text.data(), text.size()), &out)) return std::nullopt;
  return out;
}

std::string ClosestWord(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string w = ToLower(word);
  std::string best;
  size_t best_d = std::max<size_t>(2, w.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const std::string lc = ToLower(c);
    if (!w.empty() && lc.starts_with(w)) return c;
    // Two rows of the edit-distance table.
    std::vector<size_t> prev(lc.size() + 1), cur(lc.size() + 1);
    for (size_t j = 0; j <= lc.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= w.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= lc.size(); ++j) {
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (w[i - 1] == lc[j - 1] ? 0 : 1)});
      }
      std::swap(prev, cur);
    }
    if (prev[lc.size()] < best_d) {
      best_d = prev[lc.size()];
      best = c;
    }
  }
  return best;
}

}  // namespace gpuaas
