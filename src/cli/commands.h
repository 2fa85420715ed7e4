// The client commands of the gpuaas binary: they talk to a gpuaas server over its REST API (or,
// for `catalog`, read the compiled catalogue) and print for people or scripts. Each returns the
// process exit code: 0 success, 1 error (printed to `err`).
#ifndef GPUAAS_CLI_COMMANDS_H_
#define GPUAAS_CLI_COMMANDS_H_

#include <ostream>
#include <string>

namespace gpuaas::cli {

struct ClientOptions {
  std::string server = "http://127.0.0.1:8080";
  std::string output = "table";
  std::string selector;  // -l
};

// gpuaas get clusters|nodes|gpus|specs [NAME]
int Get(const ClientOptions& o, const std::string& what, const std::string& name, std::ostream& out,
        std::ostream& err);
// gpuaas summary
int Summary(const ClientOptions& o, std::ostream& out, std::ostream& err);
// gpuaas catalog models
int CatalogModels(const std::string& output, std::ostream& out, std::ostream& err);
// gpuaas catalog layouts MODEL
int CatalogLayouts(const std::string& model, std::ostream& out, std::ostream& err);
// gpuaas version (client, and the server's when reachable)
int Version(const ClientOptions& o, const std::string& client_version, std::ostream& out,
            std::ostream& err);

}  // namespace gpuaas::cli

#endif  // GPUAAS_CLI_COMMANDS_H_
