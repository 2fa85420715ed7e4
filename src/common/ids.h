// Identifiers: random UIDs for objects, and stable name-derived UUIDs for simulated hardware.
#ifndef GPUAAS_COMMON_IDS_H_
#define GPUAAS_COMMON_IDS_H_

#include <string>
#include <string_view>

namespace gpuaas {

// A random RFC 4122 version-4 UUID, lower case. Thread-safe.
std::string NewUid();

// A UUID-shaped string derived only from `seed` (same seed, same result), lower case hex.
std::string StableUuid(std::string_view seed);

// 64-bit FNV-1a of `s`; stable across runs and platforms.
uint64_t StableHash(std::string_view s);

}  // namespace gpuaas

#endif  // GPUAAS_COMMON_IDS_H_
