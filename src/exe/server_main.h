// Wiring of `gpuaas server`: store, cluster drivers, inventory controller, object cache, API.
#ifndef GPUAAS_EXE_SERVER_MAIN_H_
#define GPUAAS_EXE_SERVER_MAIN_H_

#include <string>

#include "exe/server_flags.h"

namespace gpuaas::exe {

// Runs the server until SIGINT or SIGTERM. Returns the exit code.
int RunServer(const ServerFlags& flags, const std::string& version);

}  // namespace gpuaas::exe

#endif  // GPUAAS_EXE_SERVER_MAIN_H_
