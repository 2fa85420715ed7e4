// Clocks: the real one, and a fake one that tests advance by hand. Timestamps are UTC wall time.
#ifndef GPUAAS_COMMON_CLOCK_H_
#define GPUAAS_COMMON_CLOCK_H_

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace gpuaas {

using Time = std::chrono::system_clock::time_point;
using Duration = std::chrono::system_clock::duration;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
};

// The system clock. Thread-safe; RealClock::Get() lives for the whole program.
class RealClock final : public Clock {
 public:
  Time Now() const override { return std::chrono::system_clock::now(); }
  static RealClock& Get();
};

// A clock that moves only when told. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Time start) : now_(start.time_since_epoch().count()) {}
  Time Now() const override { return Time(Duration(now_.load())); }
  void Advance(Duration d) { now_.fetch_add(d.count()); }

 private:
  std::atomic<Duration::rep> now_;
};

// RFC 3339 in UTC with second precision, as Kubernetes writes timestamps: 2026-12-02T15:04:05Z.
std::string FormatTime(Time t);
// Parses what FormatTime writes (an optional fraction is accepted and dropped). nullopt on junk
// and on years outside 1970..2200, which Time cannot hold safely.
std::optional<Time> ParseTime(std::string_view s);

}  // namespace gpuaas

#endif  // GPUAAS_COMMON_CLOCK_H_
