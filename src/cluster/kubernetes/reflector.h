// The list-and-watch loop of one collection, as client-go's reflector runs it: list, then watch
// from the list's resourceVersion (with bookmarks, which move it on), and again from the last
// version each time the server ends a watch. A 410 (the version is too old) lists afresh; other
// errors back off exponentially (with jitter, 200 ms doubling to 30 s) and on a 429 wait at least
// the server's Retry-After. A dropped connection watches again from the last version seen, so no
// event is lost and none is delivered twice.
//
// The reflector keeps no objects: it hands each list to `replace` and each event to `apply`, on
// its own thread, one call at a time, and calls `on_state` after each list (stats() shows it
// synced by then), when it starts failing, when it fails otherwise (another status code) and
// when it recovers (stats() tells which).
#ifndef GPUAAS_CLUSTER_KUBERNETES_REFLECTOR_H_
#define GPUAAS_CLUSTER_KUBERNETES_REFLECTOR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "cluster/kubernetes/client.h"

namespace gpuaas::cluster::kubernetes {

struct ReflectorStats {
  int64_t lists = 0;     // full lists (the first, and each after a 410)
  int64_t watches = 0;   // watches opened
  int64_t events = 0;    // ADDED, MODIFIED, DELETED delivered
  int64_t errors = 0;    // failed lists and watches
  std::string resource_version;  // the last one seen
  std::string last_error;        // empty once a list or watch succeeds again
  absl::StatusCode last_code = absl::StatusCode::kOk;  // the code of last_error
  bool synced = false;           // a list has been delivered
};

struct Backoff {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{30'000};
};

class Reflector {
 public:
  // `client` must outlive the reflector. `path` is the collection ("/api/v1/nodes").
  Reflector(Client& client, std::string path, std::function<void(const ListResult&)> replace,
            std::function<void(const WatchEvent&)> apply, std::function<void()> on_state = nullptr,
            Backoff backoff = {});
  ~Reflector();  // stops

  void Start();
  // Ends the loop and waits for its thread. The client is stopped too (its watch ends at once).
  void Stop();

  // Blocks until the first list was delivered or `timeout` passed; true when synced.
  bool WaitSynced(std::chrono::milliseconds timeout);
  ReflectorStats stats() const;

 private:
  void Run();
  // Waits `d` unless stopped first; false when stopped.
  bool Sleep(std::chrono::milliseconds d);

  Client& client_;
  const std::string path_;
  std::function<void(const ListResult&)> replace_;
  std::function<void(const WatchEvent&)> apply_;
  std::function<void()> on_state_;
  const Backoff backoff_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  ReflectorStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gpuaas::cluster::kubernetes

#endif  // GPUAAS_CLUSTER_KUBERNETES_REFLECTOR_H_
