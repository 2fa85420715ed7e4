// The API's OpenAPI documents, as kube-apiserver serves them and kubectl reads them:
//   GET /openapi/v3                      the index: {"paths":{"apis/gpuaas.io/v1":{"serverRelativeURL":...}}}
//   GET /openapi/v3/apis/gpuaas.io/v1    OpenAPI 3.0 of every kind: its schema, its paths and verbs
//   GET /openapi/v2                      the same as Swagger 2.0 (JSON; not the protobuf form)
// Each kind's schema is model::SchemaOf<T>, described by the decoder of the kind itself, so that
// the documents say what the server accepts. Operations carry x-kubernetes-group-version-kind and
// x-kubernetes-action, and PATCH lists the fieldValidation, dryRun, fieldManager and force
// parameters: kubectl then validates on the server (`kubectl create`/`apply` without
// --validate=false) and `kubectl explain` finds the fields. Built once; thread-safe.
#ifndef GPUAAS_API_INTERNAL_OPENAPI_H_
#define GPUAAS_API_INTERNAL_OPENAPI_H_

#include "absl/status/statusor.h"
#include "api/http.h"

namespace gpuaas::api::internal {

HttpResponse OpenApiV3Index();
// `req`'s If-None-Match against the document's ETag: 304 when it matches.
HttpResponse OpenApiV3GroupVersion(const HttpRequest& req);
// 406 for a client that takes only the protobuf form.
absl::StatusOr<HttpResponse> OpenApiV2(const HttpRequest& req);

}  // namespace gpuaas::api::internal

#endif  // GPUAAS_API_INTERNAL_OPENAPI_H_
