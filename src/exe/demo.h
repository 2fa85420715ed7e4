// The demo of `gpuaas server --demo`: a rate card, a project with a pool in use and a request
// waiting, and an operator's and a member's token to try it with, kept in the store so that a
// restart on the same store keeps them working. Run once the control plane has observed the
// fleet; every step is idempotent.
#ifndef GPUAAS_EXE_DEMO_H_
#define GPUAAS_EXE_DEMO_H_

#include <ostream>
#include <string>

#include "api/auth.h"
#include "service/pools.h"
#include "store/cache.h"
#include "store/store.h"

namespace gpuaas::exe {

// Sets the demo up in `db` (through `pools`, as its users would), waiting for `cache` to show each
// step; with `auth` (null: the server runs without authentication) it prints the tokens, and
// where the CLI finds this server at `url`, on `out`. Failures are logged; none stops the server.
void SetUpDemo(store::Store& db, store::ObjectCache& cache, service::PoolService& pools, api::Authenticator* auth,
               const std::string& url, std::ostream& out);

}  // namespace gpuaas::exe

#endif  // GPUAAS_EXE_DEMO_H_
