// The HTTP client every `gpuaas` verb shares: requests to a gpuaas server's REST API (the
// address and token from ClientOptions), the long-poll watch reader behind `get -w`, error
// answers turned back into the Status they stand for (common/problem.h), and the printing the
// verbs have in common. It sits below the verb files (get.cc, pool.cc, bill.cc, ...) and above
// cli/output.h; it is internal to the cli module: src/exe/main.cc uses cli/commands.h only.
// Nothing here keeps state between calls: the functions are as thread-safe as the streams
// handed to them.
#ifndef GPUAAS_CLI_CLIENT_H_
#define GPUAAS_CLI_CLIENT_H_

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "nlohmann/json_fwd.hpp"

namespace gpuaas::cli::internal {

// `s` percent-encoded for a URL path segment or query value: every byte but A-Z a-z 0-9 - _ . ~
// as %XX. Never fails.
std::string Escape(const std::string& s);

// The server's base URL as --server or GPUAAS_SERVER gives it, trailing slashes dropped;
// InvalidArgument, saying the form expected, for anything but http(s)://HOST[:PORT].
absl::StatusOr<std::string> BaseUrl(const std::string& given);

// Sends `method` (GET, POST, PUT or DELETE; POST and PUT with `body` as application/json) to
// `path` on o.server with o.token, printing the answer's Warning headers to o.warnings. The
// answer's body for a 2xx; InvalidArgument for a bad --server, Unavailable when the server cannot
// be reached (or its certificate is not trusted), Unauthenticated for a 401, and ServerError's
// Status for any other answer.
absl::StatusOr<std::string> Send(const ClientOptions& o, const std::string& method,
                                 const std::string& path, const std::string& body);

// GETs `path` from the server; non-2xx answers become errors carrying the server's reason.
absl::StatusOr<std::string> Fetch(const ClientOptions& o, const std::string& path);

// An error answer as the Status it stands for (common/problem.h), worded as kubectl words it, so
// that the code keeps its meaning: a 409 Conflict is Aborted (the object changed meanwhile: run
// it again), a 503 Unavailable (wait and retry), a 403 QuotaExceeded ResourceExhausted.
absl::Status ServerError(int http_status, const std::string& body);

// Follows a list route's watch from `revision`, calling `on_event` for each ADDED, MODIFIED or
// DELETED event, and resuming after the server ends a watch. Returns only on an error:
// InvalidArgument for a bad --server, OutOfRange when the watch fell too far behind (410),
// Unavailable when the server cannot be reached, ServerError's Status for another error answer.
absl::Status Watch(const ClientOptions& o, const std::string& base, std::string revision,
                   const std::function<void(const nlohmann::json&)>& on_event);

// Prints `s`'s message on `err`; returns 1, the exit code of a failed command.
int Fail(std::ostream& err, const absl::Status& s);

// Prints the JSON document `body` as `f` (JSON or YAML). InvalidArgument, printing nothing, when
// `body` is not JSON.
absl::Status PrintDoc(const std::string& body, Format f, std::ostream& out);

// With -o json or -o yaml, prints `body` (a JSON document) so and returns the command's exit
// code; nullopt for the other outputs, which the caller prints in its own way.
std::optional<int> PrintStructured(const ClientOptions& o, const std::string& body, std::ostream& out,
                                   std::ostream& err);

// The kind's columns (model/columns.h, the same the API's Tables carry), aligned. Items that are
// not objects are left out.
void PrintTable(const std::string& plural, const std::vector<nlohmann::json>& items,
                std::ostream& out);

// What a write answered: with -o json|yaml the object, else "PLURAL/NAME VERB". Returns the exit
// code: 0, or 1 with the error on `err` when `body` is an error.
int PrintWritten(const ClientOptions& o, const absl::StatusOr<std::string>& body,
                 const std::string& verb, std::ostream& out, std::ostream& err);

}  // namespace gpuaas::cli::internal

#endif  // GPUAAS_CLI_CLIENT_H_
