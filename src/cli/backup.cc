#include "cli/backup.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ostream>

#include "common/clock.h"
#include "common/files.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace gpuaas::cli {
namespace {

using json = nlohmann::json;

// Writes `text` to `path` whole or not at all: a temporary file beside it, flushed to disk,
// then renamed over it.
absl::Status WriteDurably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".partial";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      const int e = errno;
      close(fd);
      std::remove(tmp.c_str());
      return absl::UnavailableError(fmt::format("cannot write {}: {}", tmp, std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeBackup(const store::Snapshot& snap, const std::string& taken_rfc3339) {
  std::string out = json{{"gpuaasBackup", 1}, {"revision", snap.revision}, {"taken", taken_rfc3339}}.dump() + "\n";
  for (const store::Record& r : snap.records) {
    out += json{{"kind", r.key.kind},
                {"namespace", r.key.ns},
                {"name", r.key.name},
                {"uid", r.uid},
                {"resourceVersion", r.resource_version},
                {"data", r.data}}
               .dump() +
           "\n";
  }
  for (const store::RollupRecord& r : snap.rollups) {
    out += json{{"series", r.series}, {"step", r.step_s}, {"bucket", r.bucket}, {"mean", r.mean}, {"max", r.max}}.dump() +
           "\n";
  }
  out += json{{"end", true}, {"objects", snap.records.size()}, {"rollups", snap.rollups.size()}}.dump() + "\n";
  return out;
}

absl::StatusOr<store::Snapshot> DecodeBackup(std::string_view text) {
  store::Snapshot snap;
  bool header = false, end = false;
  size_t line_no = 0;
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("line {}: {}", line_no, why));
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.empty()) continue;
    if (end) return bad("text after the end of the backup");
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) return bad(header ? "not a JSON object" : "not a gpuaas backup (its first line is not JSON)");
    try {
      if (!header) {
        if (j.value("gpuaasBackup", 0) != 1) return bad("not a gpuaas backup (its first line has no \"gpuaasBackup\": 1)");
        snap.revision = j.at("revision").get<int64_t>();
        if (snap.revision < 0) return bad("a negative revision");
        header = true;
      } else if (j.contains("end")) {
        if (j.at("objects").get<size_t>() != snap.records.size() || j.at("rollups").get<size_t>() != snap.rollups.size()) {
          return bad(fmt::format("the backup says {} objects and {} rollups; the file holds {} and {}",
                                 j.at("objects").get<size_t>(), j.at("rollups").get<size_t>(), snap.records.size(),
                                 snap.rollups.size()));
        }
        end = true;
      } else if (j.contains("kind")) {
        store::Record r{{j.at("kind").get<std::string>(), j.at("namespace").get<std::string>(),
                         j.at("name").get<std::string>()},
                        j.at("uid").get<std::string>(),
                        j.at("resourceVersion").get<int64_t>(),
                        j.at("data").get<std::string>()};
        if (r.key.kind.empty() || r.key.name.empty()) return bad("an object without a kind or a name");
        if (r.resource_version <= 0 || r.resource_version > snap.revision) {
          return bad(fmt::format("{}: resourceVersion {} is not within the backup's revision {}", r.key.ToString(),
                                 r.resource_version, snap.revision));
        }
        snap.records.push_back(std::move(r));
      } else if (j.contains("series")) {
        snap.rollups.push_back({j.at("series").get<std::string>(), j.at("step").get<int32_t>(), j.at("bucket").get<int64_t>(),
                                j.at("mean").get<double>(), j.at("max").get<double>()});
      } else {
        return bad("neither an object, a rollup nor the end");
      }
    } catch (const json::exception& e) {
      return bad(fmt::format("a field is missing or of the wrong type ({})", e.what()));
    }
  }
  if (!header) return absl::InvalidArgumentError("empty: not a gpuaas backup");
  if (!end) return absl::InvalidArgumentError(fmt::format("cut short after line {}: the end of the backup is missing", line_no));
  return snap;
}

int Backup(const std::string& db_url, const std::string& file, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(db_url);
  if (!db.ok()) {
    err << "cannot open store " << store::RedactedUrl(db_url) << ": " << db.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<store::Snapshot> snap = (*db)->ReadSnapshot();
  if (!snap.ok()) {
    err << "cannot read " << store::RedactedUrl(db_url) << ": " << snap.status().message() << "\n";
    return 1;
  }
  if (absl::Status s = WriteDurably(file, EncodeBackup(*snap, FormatTime(RealClock::Get().Now()))); !s.ok()) {
    err << s.message() << "\n";
    return 1;
  }
  out << "backed up " << snap->records.size() << " objects and " << snap->rollups.size() << " rollups at revision "
      << snap->revision << " to " << file << "\n";
  return 0;
}

int Restore(const std::string& db_url, const std::string& file, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> text = ReadWholeFile(file);
  if (!text.ok()) {
    err << text.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<store::Snapshot> snap = DecodeBackup(*text);
  if (!snap.ok()) {
    err << file << ": " << snap.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<store::Store>> db = store::OpenStore(db_url);
  if (!db.ok()) {
    err << "cannot open store " << store::RedactedUrl(db_url) << ": " << db.status().message() << "\n";
    return 1;
  }
  if (absl::Status s = (*db)->LoadSnapshot(*snap); !s.ok()) {
    err << "cannot restore into " << store::RedactedUrl(db_url) << ": " << s.message() << "\n";
    return 1;
  }
  out << "restored " << snap->records.size() << " objects and " << snap->rollups.size() << " rollups at revision "
      << snap->revision << " into " << store::RedactedUrl(db_url) << "\n";
  return 0;
}

}  // namespace gpuaas::cli
