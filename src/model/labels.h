// Kubernetes label selectors: equality (a=b, a==b, a!=b), set (a in (x,y), a notin (x)) and
// existence (a, !a) requirements, comma-separated and ANDed, as kubectl -l takes them.
#ifndef GPUAAS_MODEL_LABELS_H_
#define GPUAAS_MODEL_LABELS_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuaas::model {

class LabelSelector {
 public:
  // Parses a selector; the empty string selects everything. InvalidArgument names the bad part.
  static absl::StatusOr<LabelSelector> Parse(std::string_view text);

  bool Matches(const std::map<std::string, std::string>& labels) const;
  bool Empty() const { return reqs_.empty(); }

 private:
  enum class Op { kEq, kNotEq, kIn, kNotIn, kExists, kNotExists };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Requirement> reqs_;
};

}  // namespace gpuaas::model

#endif  // GPUAAS_MODEL_LABELS_H_
