// `gpuaas backup --db URL FILE` and `gpuaas restore --db URL FILE`: a store's every object at one
// revision (and its telemetry rollups) to a file, and back into an empty store of either backend,
// so that a SQLite installation moves to PostgreSQL. A backup reads one consistent snapshot
// while servers go on writing; a restore fills an empty store only.
//
// The file is JSON lines: a header {"gpuaasBackup": 1, "revision": R, "taken": TIME}, then one
// line per object {"kind", "namespace", "name", "uid", "resourceVersion", "data"} (data: the
// object's JSON, as text), one per rollup {"series", "step", "bucket", "mean", "max"}, and a
// trailer {"end": true, "objects": N, "rollups": M} that tells a whole file from a cut one.
#ifndef GPUAAS_CLI_BACKUP_H_
#define GPUAAS_CLI_BACKUP_H_

#include <iosfwd>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace gpuaas::cli {

// The file's text for `snap` (taken at `taken_rfc3339`), and a snapshot back from it:
// InvalidArgument naming the line when the text is not a whole backup.
std::string EncodeBackup(const store::Snapshot& snap, const std::string& taken_rfc3339);
absl::StatusOr<store::Snapshot> DecodeBackup(std::string_view text);

// The commands: exit codes 0 (done), 1 (failed; the message on `err`).
int Backup(const std::string& db_url, const std::string& file, std::ostream& out, std::ostream& err);
int Restore(const std::string& db_url, const std::string& file, std::ostream& out, std::ostream& err);

}  // namespace gpuaas::cli

#endif  // GPUAAS_CLI_BACKUP_H_
