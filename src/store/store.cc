#include "store/store.h"

#include "fmt/format.h"
#include "store/internal/errors.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace gpuaas::store {

std::string Key::ToString() const {
  return ns.empty() ? fmt::format("{} \"{}\"", kind, name) : fmt::format("{} \"{}/{}\"", kind, ns, name);
}

// The registry of backends, by URL scheme.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(std::string_view url) {
  if (url.starts_with("sqlite:")) {
    SqliteOptions o;
    o.path = std::string(url.substr(7));
    if (o.path.empty()) return absl::InvalidArgumentError("sqlite: URL needs a path: sqlite:PATH");
    return OpenSqliteStore(o);
  }
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    PostgresOptions o;
    o.conninfo = std::string(url);
    return OpenPostgresStore(o);
  }
  return absl::InvalidArgumentError(fmt::format(
      "unknown store URL \"{}\"; expected sqlite:PATH, sqlite::memory: or postgresql://USER@HOST:PORT/DB", url));
}

namespace internal {

absl::Status Conflict(const Key& key, int64_t expected, int64_t actual) {
  return absl::AbortedError(fmt::format(
      "{}: the object has been modified (resourceVersion {} expected, {} stored); read it again and retry",
      key.ToString(), expected, actual));
}

absl::Status Compacted(int64_t after, int64_t compacted) {
  return absl::OutOfRangeError(
      fmt::format("changes after revision {} were compacted (oldest kept is {})", after, compacted + 1));
}

absl::Status Fenced(std::string_view name, std::string_view holder, int64_t epoch, std::string_view actual_holder,
                    int64_t actual_epoch) {
  if (actual_holder == holder && actual_epoch == epoch) {
    return absl::FailedPreconditionError(fmt::format(
        "fenced: lease {} of {} (epoch {}) has expired; its write is refused", name, holder, epoch));
  }
  return absl::FailedPreconditionError(fmt::format(
      "fenced: lease {} is held by {} (epoch {}), not by {} (epoch {}); its write is refused", name,
      actual_holder.empty() ? "nobody" : actual_holder, actual_epoch, holder, epoch));
}

}  // namespace internal

std::string RedactedUrl(std::string_view url) {
  std::string out(url);
  // USER:PASSWORD@ in a URI.
  if (const size_t scheme = out.find("://"); scheme != std::string::npos) {
    const size_t at = out.find('@', scheme + 3);
    const size_t colon = out.find(':', scheme + 3);
    const size_t slash = out.find('/', scheme + 3);
    if (at != std::string::npos && colon != std::string::npos && colon < at && (slash == std::string::npos || at < slash)) {
      out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // password=... as a query parameter or a key=value pair.
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    const size_t from = p + 9;
    const size_t to = out.find_first_of("& ", from);
    out.replace(from, (to == std::string::npos ? out.size() : to) - from, "***");
  }
  return out;
}

}  // namespace gpuaas::store
