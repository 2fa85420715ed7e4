#include "common/ids.h"

#include <cstdint>
#include <mutex>
#include <random>

#include "fmt/format.h"

namespace gpuaas {
namespace {

std::string FormatUuid(uint64_t hi, uint64_t lo) {
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                     hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

}  // namespace

uint64_t StableHash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string NewUid() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi, lo;
  {
    std::lock_guard<std::mutex> lock(mu);
    hi = rng();
    lo = rng();
  }
  hi = (hi & ~0xf000ULL) | 0x4000ULL;                 // version 4
  lo = (lo & ~(0xc000ULL << 48)) | (0x8000ULL << 48);  // RFC 4122 variant
  return FormatUuid(hi, lo);
}

std::string StableUuid(std::string_view seed) {
  uint64_t hi = StableHash(seed);
  uint64_t lo = StableHash(fmt::format("{}#{}", seed, hi));
  return FormatUuid(hi, lo);
}

}  // namespace gpuaas
