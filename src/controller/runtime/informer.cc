#include "controller/runtime/informer.h"

namespace gpuaas::controller::runtime {

std::string ObjectKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string k;
  k.reserve(ns.size() + 1 + name.size());
  k.append(ns).append("/").append(name);
  return k;
}

std::pair<std::string, std::string> SplitKey(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

InformerSet::~InformerSet() { Stop(); }

void InformerSet::Stop() {
  if (listener_) cache_.RemoveListener(*listener_);
  listener_.reset();
}

void InformerSet::Start() {
  listener_ = cache_.AddListener([this](const std::vector<store::CacheEvent>& events, int64_t revision) {
    OnBatch(events, revision);
  });
}

void InformerSet::OnBatch(const std::vector<store::CacheEvent>& events, int64_t revision) {
  std::map<std::string_view, std::vector<const store::CacheEvent*>> by_kind;
  for (const auto& [kind, inf] : informers_) by_kind[kind];
  for (const store::CacheEvent& e : events) {
    if (auto it = by_kind.find(e.kind); it != by_kind.end()) it->second.push_back(&e);
  }
  // Every informer applies the whole batch before any handler runs, so that a handler that
  // looks at another kind sees it at the same revision.
  std::vector<std::function<void()>> calls;
  for (auto& [kind, inf] : informers_) {
    std::vector<std::function<void()>> c = inf->Apply(by_kind[kind], revision);
    calls.insert(calls.end(), std::make_move_iterator(c.begin()), std::make_move_iterator(c.end()));
  }
  for (const std::function<void()>& call : calls) call();
}

}  // namespace gpuaas::controller::runtime
