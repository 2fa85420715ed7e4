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
  // FNV-1a spreads similar seeds poorly ("node/0" vs "node/1" share most bits), so finish each
  // half with the splitmix64 mixer to make the result look as random as a real UUID.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const uint64_t h = StableHash(seed);
  return FormatUuid(mix(h), mix(h ^ 0x9e3779b97f4a7c15ULL));
}

}  // namespace gpuaas
