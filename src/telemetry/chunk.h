// A compressed run of one series' samples, in the Gorilla scheme (Pelkonen et al., VLDB 2015)
// that Prometheus' XOR chunks also use: timestamps as delta-of-delta in variable-width buckets,
// values as the XOR with the previous value, stored as the meaningful bits only (or one bit when
// nothing changed). A flat series costs about 2 bits a point, a slowly moving gauge a few bytes.
// Appends go to the end; reads decode from the start. Not thread-safe (the series store locks);
// no I/O.
#ifndef GPUAAS_TELEMETRY_CHUNK_H_
#define GPUAAS_TELEMETRY_CHUNK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuaas::telemetry {

class XorChunk {
 public:
  // The most samples a chunk takes (its count is 16 bits).
  static constexpr size_t kMaxSamples = 65535;

  // Appends a sample; timestamps must rise (the series store drops the rest before), and a
  // chunk takes at most kMaxSamples.
  void Append(int64_t t_ms, double v);

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  int64_t first_t() const { return first_t_; }
  int64_t last_t() const { return last_t_; }
  // Bytes held: the encoded bits as allocated, and the chunk itself.
  size_t bytes() const { return sizeof(*this) + bits_.capacity(); }
  // Releases the slack of the encoding buffer (a chunk that is full takes no more samples).
  void Seal() { bits_.shrink_to_fit(); }

  // Reads the samples in order.
  class Reader {
   public:
    explicit Reader(const XorChunk& c) : c_(c) {}
    // The next sample; false after the last.
    bool Next(int64_t& t_ms, double& v);

   private:
    uint64_t Bits(int n);
    bool Bit() { return Bits(1) != 0; }
    const XorChunk& c_;
    size_t pos_ = 0;  // in bits
    size_t read_ = 0;
    int64_t t_ = 0;
    int64_t delta_ = 0;
    uint64_t v_ = 0;
    int leading_ = 0;
    int meaningful_ = 0;
  };
  Reader Read() const { return Reader(*this); }

 private:
  void Put(uint64_t bits, int n);
  void PutBit(bool b) { Put(b ? 1 : 0, 1); }

  std::vector<uint8_t> bits_;
  uint32_t bit_len_ = 0;
  uint16_t count_ = 0;
  // The window of the last value written in full: leading zeros and meaningful bits.
  int8_t leading_ = -1;
  int8_t meaningful_ = 0;
  int64_t first_t_ = 0;
  int64_t last_t_ = 0;
  int64_t last_delta_ = 0;
  uint64_t last_v_ = 0;
};

}  // namespace gpuaas::telemetry

#endif  // GPUAAS_TELEMETRY_CHUNK_H_
