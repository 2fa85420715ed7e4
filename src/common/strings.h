// Small string helpers over std::string_view. Debian's Abseil is built in C++14 mode, where
// absl::string_view is not std::string_view, so gpuaas uses these and fmt instead of absl/strings.
#ifndef GPUAAS_COMMON_STRINGS_H_
#define GPUAAS_COMMON_STRINGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuaas {

// Splits on any of `seps`, dropping empty pieces. Views point into `s`.
std::vector<std::string_view> SplitAny(std::string_view s, std::string_view seps);
// Splits on `sep`, keeping empty pieces ("a,,b" -> {"a", "", "b"}).
std::vector<std::string_view> Split(std::string_view s, char sep);

std::string_view Trim(std::string_view s);
std::string ToLower(std::string_view s);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix);
bool EndsWithIgnoreCase(std::string_view s, std::string_view suffix);

// Whole-string integer parse; nullopt on any junk, sign where not allowed, or overflow.
std::optional<int64_t> ParseInt(std::string_view s);

// Millionths as a decimal with six places: 1234500000 -> "1234.500000", -5 -> "-0.000005".
std::string FixedMicros(int64_t micros);

// Well-formed UTF-8 (RFC 3629): no overlong forms, surrogates, or code points past U+10FFFF.
bool IsValidUtf8(std::string_view s);

// The candidate closest to `word` (a mistyped command): by edit distance (Levenshtein, case
// ignored), or one that starts with `word`; "" when none is near enough to be what was meant
// (more than a third of the word's letters, and at least two, would have to change).
std::string ClosestWord(std::string_view word, const std::vector<std::string>& candidates);

// URL-safe base64 without padding (RFC 4648 section 5), Abseil's; decode returns nullopt on bad
// input.
std::string Base64UrlEncode(std::string_view data);
std::optional<std::string> Base64UrlDecode(std::string_view text);

}  // namespace gpuaas

#endif  // GPUAAS_COMMON_STRINGS_H_
