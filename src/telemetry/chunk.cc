#include "telemetry/chunk.h"

#include <algorithm>
#include <bit>

namespace gpuaas::telemetry {
namespace {

uint64_t AsBits(double v) { return std::bit_cast<uint64_t>(v); }
double AsDouble(uint64_t b) { return std::bit_cast<double>(b); }

// Delta-of-delta buckets: a prefix of ones ended by a zero, then a signed value of the bucket's
// width; the last bucket (four ones) takes the whole 64 bits.
struct DodBucket {
  int prefix_ones;
  int width;
};
constexpr DodBucket kDodBuckets[] = {{1, 14}, {2, 17}, {3, 20}};

bool FitsSigned(int64_t x, int width) {
  const int64_t lim = int64_t{1} << (width - 1);
  return x >= -lim && x < lim;
}

}  // namespace

void XorChunk::Put(uint64_t bits, int n) {
  // A byte at a time: the low `n` bits of `bits`, most significant first.
  while (n > 0) {
    const int used = static_cast<int>(bit_len_ % 8u);
    if (used == 0) bits_.push_back(0);
    const int room = 8 - used;
    const int take = std::min(room, n);
    const uint64_t part = (bits >> (n - take)) & ((uint64_t{1} << take) - 1);
    bits_.back() |= static_cast<uint8_t>(part << (room - take));
    bit_len_ += static_cast<uint32_t>(take);
    n -= take;
  }
}

void XorChunk::Append(int64_t t_ms, double v) {
  const uint64_t vb = AsBits(v);
  if (count_ == 0) {
    Put(static_cast<uint64_t>(t_ms), 64);
    Put(vb, 64);
    first_t_ = last_t_ = t_ms;
    last_v_ = vb;
    count_ = 1;
    return;
  }
  const int64_t delta = t_ms - last_t_;
  const int64_t dod = delta - last_delta_;
  if (dod == 0) {
    PutBit(false);
  } else {
    bool done = false;
    for (const DodBucket& b : kDodBuckets) {
      if (!FitsSigned(dod, b.width)) continue;
      Put((uint64_t{1} << (b.prefix_ones + 1)) - 2, b.prefix_ones + 1);  // ones, then a zero
      Put(static_cast<uint64_t>(dod) & ((uint64_t{1} << b.width) - 1), b.width);
      done = true;
      break;
    }
    if (!done) {
      Put(0xF, 4);
      Put(static_cast<uint64_t>(dod), 64);
    }
  }
  const uint64_t x = vb ^ last_v_;
  if (x == 0) {
    PutBit(false);
  } else {
    PutBit(true);
    const int lz = std::min(std::countl_zero(x), 31);
    const int tz = std::countr_zero(x);
    if (leading_ >= 0 && lz >= leading_ && tz >= 64 - leading_ - meaningful_) {
      // Inside the previous window: its meaningful bits alone.
      PutBit(false);
      Put(x >> (64 - leading_ - meaningful_), meaningful_);
    } else {
      const int meaningful = 64 - lz - tz;
      PutBit(true);
      Put(static_cast<uint64_t>(lz), 5);
      Put(static_cast<uint64_t>(meaningful & 63), 6);  // 64 is written as 0
      Put(x >> tz, meaningful);
      leading_ = static_cast<int8_t>(lz);
      meaningful_ = static_cast<int8_t>(meaningful);
    }
  }
  last_delta_ = delta;
  last_t_ = t_ms;
  last_v_ = vb;
  ++count_;
}

uint64_t XorChunk::Reader::Bits(int n) {
  uint64_t out = 0;
  while (n > 0) {
    const int used = static_cast<int>(pos_ % 8);
    const int room = 8 - used;
    const int take = std::min(room, n);
    const uint64_t byte = c_.bits_[pos_ / 8];
    out = (out << take) | ((byte >> (room - take)) & ((uint64_t{1} << take) - 1));
    pos_ += static_cast<size_t>(take);
    n -= take;
  }
  return out;
}

bool XorChunk::Reader::Next(int64_t& t_ms, double& v) {
  if (read_ >= c_.count_) return false;
  if (read_ == 0) {
    t_ = static_cast<int64_t>(Bits(64));
    v_ = Bits(64);
  } else {
    int ones = 0;
    while (ones < 4 && Bit()) ++ones;
    int64_t dod = 0;
    if (ones == 4) {
      dod = static_cast<int64_t>(Bits(64));
    } else if (ones > 0) {
      const int width = kDodBuckets[ones - 1].width;
      const uint64_t raw = Bits(width);
      // Sign-extend from `width` bits.
      dod = static_cast<int64_t>(raw << (64 - width)) >> (64 - width);
    }
    delta_ += dod;
    t_ += delta_;
    if (Bit()) {
      if (Bit()) {
        leading_ = static_cast<int>(Bits(5));
        meaningful_ = static_cast<int>(Bits(6));
        if (meaningful_ == 0) meaningful_ = 64;
      }
      const int shift = 64 - leading_ - meaningful_;
      v_ ^= Bits(meaningful_) << shift;
    }
  }
  ++read_;
  t_ms = t_;
  v = AsDouble(v_);
  return true;
}

}  // namespace gpuaas::telemetry
