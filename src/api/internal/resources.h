// The gpuaas.io/v1 objects, served as kube-apiserver serves its resources, from the
// ObjectCache's snapshots (never the database):
//   GET /apis/gpuaas.io/v1/{plural}[/{name}]                          every project's, or the fleet's
//   GET /apis/gpuaas.io/v1/namespaces/{namespace}/{plural}[/{name}]   one project's
// Lists take label selectors, pages (`limit`, `continue`: pages.h) and `watch` (watch.h); lists,
// objects and watch events come as Tables when kubectl asks for them (tables.h). Discovery
// (/api, /apis, /apis/gpuaas.io, /apis/gpuaas.io/v1) lists the types of ResourceTypes
// (api/server.h). Members read their own project's objects (another project's answer 404) and
// the fleet inventory; node agents the inventory only; MigLayouts and Defragmentations are
// operators' (ResourceType::operators_only). Thread-safe.
#ifndef GPUAAS_API_INTERNAL_RESOURCES_H_
#define GPUAAS_API_INTERNAL_RESOURCES_H_

#include <chrono>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/auth.h"
#include "api/http.h"
#include "api/internal/pages.h"
#include "api/internal/watch.h"
#include "api/server.h"
#include "common/clock.h"
#include "store/cache.h"

namespace gpuaas::api::internal {

class ResourceApi {
 public:
  // How long the snapshot of a paged list is held after its last page was read.
  static constexpr std::chrono::seconds kPageTtl = std::chrono::minutes(5);

  // `bookmark_every`: how often a watch that allows bookmarks gets one.
  ResourceApi(store::ObjectCache& cache, const Clock& clock, std::chrono::milliseconds bookmark_every)
      : cache_(cache), clock_(clock), watches_(cache, bookmark_every) {}

  // The objects of `plural` (in project `ns` when not empty) the caller may see, as a list, a
  // page of one, or a watch.
  absl::StatusOr<HttpResponse> List(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                    const Principal& who);
  // One object; NotFound for one the caller may not see.
  absl::StatusOr<HttpResponse> Get(const HttpRequest& req, std::string_view plural, std::string_view ns,
                                   std::string_view name, const Principal& who);
  // Ends every open watch with its last chunk (the server stops).
  void CloseWatches() { watches_.CloseAll(); }

 private:
  store::ObjectCache& cache_;
  const Clock& clock_;
  WatchHub watches_;
  PageSnapshots pages_{64, kPageTtl};
};

// The type of `plural`, or nullptr.
const ResourceType* FindType(std::string_view plural);
// NotFound: no resource type of that name.
absl::Status UnknownResource(std::string_view plural);
// The resource type a path under /apis/gpuaas.io/v1 names ("gpupools" for
// .../namespaces/NS/gpupools/NAME/approval); nullopt for any other path and for the bare prefix.
std::optional<std::string_view> PluralOf(std::string_view path);
// A verb a resource type does not take (405, with the verbs it takes, as kube-apiserver
// answers), or an unknown type (404). `verb`: "created", "deleted".
absl::Status NotServed(std::string_view plural, std::string_view verb);

// Discovery as kubectl reads it (client-go's discovery client): /api (APIVersions: no legacy
// core group here), /apis (APIGroupList: one group), /apis/gpuaas.io (APIGroup) and
// /apis/gpuaas.io/v1 (APIResourceList: every resource, with its verbs, short names and the
// category "gpuaas", so `kubectl get gpuaas` lists them all).
HttpResponse ApiVersions();
HttpResponse ApiGroupList();
HttpResponse ApiGroup();
HttpResponse ApiResourceList();

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_RESOURCES_H_
