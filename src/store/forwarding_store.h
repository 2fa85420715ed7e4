// ForwardingStore: a Store that passes every call to another, for adapters that change only how
// writes are made (store/fenced_store.h: the leader's fenced writes; store/dry_run_store.h: writes
// rolled back). A subclass gives Transact; everything else reaches `inner` as it is.
#ifndef GPUAAS_STORE_FORWARDING_STORE_H_
#define GPUAAS_STORE_FORWARDING_STORE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace gpuaas::store {

class ForwardingStore : public Store {
 public:
  absl::StatusOr<std::optional<Record>> Get(const Key& key) override { return inner_.Get(key); }
  absl::StatusOr<std::vector<Record>> List(std::string_view kind, std::string_view ns) override {
    return inner_.List(kind, ns);
  }
  absl::StatusOr<std::vector<Record>> ListPage(std::string_view kind, std::string_view ns, std::string_view after_name,
                                               size_t limit) override {
    return inner_.ListPage(kind, ns, after_name, limit);
  }
  int64_t Revision() override { return inner_.Revision(); }
  absl::StatusOr<std::vector<Change>> Changes(int64_t after, size_t limit) override { return inner_.Changes(after, limit); }
  bool WaitForChange(int64_t after, std::chrono::milliseconds timeout) override {
    return inner_.WaitForChange(after, timeout);
  }
  int SchemaVersion() override { return inner_.SchemaVersion(); }
  absl::Status AppendRollups(const std::vector<RollupRecord>& rows) override { return inner_.AppendRollups(rows); }
  absl::StatusOr<std::vector<RollupRecord>> LoadRollups(int64_t since_unix_s) override {
    return inner_.LoadRollups(since_unix_s);
  }
  absl::Status PruneRollups(int32_t step_s, int64_t before_unix_s) override {
    return inner_.PruneRollups(step_s, before_unix_s);
  }
  absl::StatusOr<Lease> TryAcquireLease(std::string_view name, std::string_view holder, std::string_view address,
                                        std::chrono::milliseconds duration) override {
    return inner_.TryAcquireLease(name, holder, address, duration);
  }
  absl::Status ReleaseLease(std::string_view name, std::string_view holder) override {
    return inner_.ReleaseLease(name, holder);
  }
  absl::StatusOr<Lease> GetLease(std::string_view name) override { return inner_.GetLease(name); }
  absl::StatusOr<Snapshot> ReadSnapshot() override { return inner_.ReadSnapshot(); }
  absl::Status LoadSnapshot(const Snapshot& snapshot) override { return inner_.LoadSnapshot(snapshot); }

 protected:
  // `inner` is not owned and must outlive this store.
  explicit ForwardingStore(Store& inner) : inner_(inner) {}
  Store& inner_;
};

}  // namespace gpuaas::store

#endif  // GPUAAS_STORE_FORWARDING_STORE_H_
