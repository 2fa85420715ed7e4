// A fake Kubernetes API server for tests (no real one runs on these machines): it serves
// collections of objects that tests give it (recorded real payloads) with the semantics clients
// rely on: one resourceVersion counter for all objects, list with limit and continue, watch from
// a resourceVersion (the events after it, then live ones, with BOOKMARKs when asked, ended after
// timeoutSeconds), an ERROR event with 410 for a version older than what it keeps, and bearer
// token checks. Faults are injected on purpose: answers with a status (409, 410, 429 with
// Retry-After, 500) for the next requests, dropped watch connections, and the whole server going
// away and coming back on the same port. Writes: objects are created (POST, 409 when they
// exist), replaced (PUT, 409 when the body's resourceVersion is not the stored one) and merge-
// patched (PATCH), and DeviceTaintRules and pods deleted (DELETE; one with finalizers stays,
// marked with deletionTimestamp and the grace period asked for); each is logged.
#ifndef GPUAAS_TEST_FAKE_KUBE_APISERVER_H_
#define GPUAAS_TEST_FAKE_KUBE_APISERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpuaas::testing {

class FakeKubeApiServer {
 public:
  struct Request {
    std::string method;
    std::string path;   // with the query
    bool watch = false;
  };

  // `token`: the bearer token every request must carry (empty: none needed).
  explicit FakeKubeApiServer(std::string token = "");
  ~FakeKubeApiServer();

  // Serves HTTPS with this certificate and key (PEM) from the next Start; with `client_ca_pem`,
  // only to clients whose certificate that CA signed.
  void UseTls(const std::string& cert_pem, const std::string& key_pem, const std::string& client_ca_pem = "");

  // Serves `resource.k8s.io/v1` ResourceSlices and ResourceClaims at these paths (Put them
  // there); off, they answer 404 as an API server before 1.34 does.
  static constexpr std::string_view kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
  static constexpr std::string_view kResourceClaimsPath = "/apis/resource.k8s.io/v1/resourceclaims";
  // And DeviceTaintRules (v1beta2), which may also be created and deleted.
  static constexpr std::string_view kDeviceTaintRulesPath = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
  void ServeDra(bool on);

  // The bearer token requests must carry from now on (a rotated service account token).
  void SetToken(const std::string& token);

  // Listens on 127.0.0.1: port 0 picks one (the first start); Start again after Stop reuses it.
  void Start();
  // Stops listening and cuts every connection (the API server is down).
  void Stop();
  int port() const;
  std::string url() const;

  // Objects of collection `path` ("/api/v1/nodes"; items of kind `kind`, "Node"). Each change is
  // an event at a new resourceVersion. The object is JSON text; its metadata.resourceVersion is
  // set by the server.
  void Put(const std::string& path, const std::string& kind, const std::string& object_json);
  void Delete(const std::string& path, const std::string& name);
  // Forgets events up to the current version: watches from older versions get 410.
  void Compact();
  std::string resource_version() const;

  // The next `count` requests (of collection `path`, or any when empty) are answered with
  // `status` (a Status body; 429 carries Retry-After: `retry_after_s`).
  void FailNext(int status, int count = 1, int retry_after_s = 0, const std::string& path = "");
  // Likewise, for the next `count` requests of a list's later pages (with a continue token).
  void FailNextPage(int status, int count = 1);
  // Running watches deliver nothing until DropWatches (so that they miss what happens meanwhile).
  void HoldWatches();
  // Cuts the running watches mid-stream (no last chunk); later watches deliver again.
  void DropWatches();
  // BOOKMARK events every `ms` on watches that ask for them (0: none).
  void SetBookmarkInterval(int ms);

  // A write it took (POST, PUT, PATCH, DELETE), in order.
  struct Write {
    std::string method;
    std::string path;
    std::string body;
  };
  std::vector<Write> writes() const;
  // The object `name` of collection `path` as stored (JSON), or "" when there is none.
  std::string Get(const std::string& path, const std::string& name) const;

  std::vector<Request> requests() const;
  int running_watches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuaas::testing

#endif  // GPUAAS_TEST_FAKE_KUBE_APISERVER_H_
