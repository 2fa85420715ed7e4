#include "model/labels.h"

#include <algorithm>

#include "common/strings.h"
#include "fmt/format.h"

namespace gpuaas::model {
namespace {

bool ValidToken(std::string_view s) {
  if (s.empty() || s.size() > 316) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == '/';
  });
}

// Splits on commas that are not inside parentheses.
absl::StatusOr<std::vector<std::string_view>> SplitTop(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t from = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      out.push_back(Trim(s.substr(from, i - from)));
      from = i + 1;
    } else if (s[i] == '(') {
      if (++depth > 1) return absl::InvalidArgumentError("labelSelector: nested parentheses");
    } else if (s[i] == ')') {
      if (--depth < 0) return absl::InvalidArgumentError("labelSelector: unbalanced ')'");
    }
  }
  if (depth != 0) return absl::InvalidArgumentError("labelSelector: unbalanced '('");
  return out;
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  absl::StatusOr<std::vector<std::string_view>> parts = SplitTop(text);
  if (!parts.ok()) return parts.status();
  for (std::string_view part : *parts) {
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(fmt::format("labelSelector: \"{}\": {}", part, why));
    };
    if (part.empty()) return bad("empty requirement");
    Requirement r;
    if (size_t p = part.find("!="); p != std::string_view::npos) {
      r = {std::string(Trim(part.substr(0, p))), Op::kNotEq, {std::string(Trim(part.substr(p + 2)))}};
    } else if (size_t q = part.find("=="); q != std::string_view::npos) {
      r = {std::string(Trim(part.substr(0, q))), Op::kEq, {std::string(Trim(part.substr(q + 2)))}};
    } else if (size_t e = part.find('='); e != std::string_view::npos) {
      r = {std::string(Trim(part.substr(0, e))), Op::kEq, {std::string(Trim(part.substr(e + 1)))}};
    } else if (size_t open = part.find('('); open != std::string_view::npos) {
      if (part.back() != ')') return bad("expected ')' at the end");
      std::vector<std::string_view> words = SplitAny(part.substr(0, open), " \t");
      if (words.size() != 2 || (words[1] != "in" && words[1] != "notin")) {
        return bad("expected 'key in (v1,v2)' or 'key notin (v1,v2)'");
      }
      r.key = std::string(words[0]);
      r.op = words[1] == "in" ? Op::kIn : Op::kNotIn;
      for (std::string_view v : Split(part.substr(open + 1, part.size() - open - 2), ',')) {
        v = Trim(v);
        if (!v.empty() && !ValidToken(v)) return bad(fmt::format("invalid value \"{}\"", v));
        r.values.emplace_back(v);
      }
    } else if (part.front() == '!') {
      r = {std::string(Trim(part.substr(1))), Op::kNotExists, {}};
    } else {
      r = {std::string(part), Op::kExists, {}};
    }
    if (!ValidToken(r.key)) return bad(fmt::format("invalid key \"{}\"", r.key));
    if ((r.op == Op::kEq || r.op == Op::kNotEq) && !r.values[0].empty() &&
        !ValidToken(r.values[0])) {
      return bad(fmt::format("invalid value \"{}\"", r.values[0]));
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const Requirement& r : reqs_) {
    auto it = labels.find(r.key);
    const bool has = it != labels.end();
    switch (r.op) {
      case Op::kEq:
        if (!has || it->second != r.values[0]) return false;
        break;
      case Op::kNotEq:
        if (has && it->second == r.values[0]) return false;
        break;
      case Op::kIn:
        if (!has || std::find(r.values.begin(), r.values.end(), it->second) == r.values.end())
          return false;
        break;
      case Op::kNotIn:
        if (has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end())
          return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

}  // namespace gpuaas::model
