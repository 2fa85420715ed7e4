#include "common/clock.h"

#include <ctime>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"

#include "fmt/format.h"

namespace gpuaas {

RealClock& RealClock::Get() {
  static RealClock clock;
  return clock;
}

std::string FormatTime(Time t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(
      std::chrono::floor<std::chrono::seconds>(t));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::optional<Time> ParseTime(std::string_view s) {
  // Abseil's parser (CCTZ) refuses a date that would roll over (2027-02-31 is not March 3rd),
  // which timegm would have accepted.
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", absl::string_view(s.data(), s.size()), absl::UTCTimeZone(), &t, &err)) {
    return std::nullopt;
  }
  // Time counts nanoseconds in 64 bits, which ends in 2262: keep well inside it.
  const int64_t year = absl::ToCivilYear(t, absl::UTCTimeZone()).year();
  if (year < 1970 || year > 2200) return std::nullopt;
  // Whole seconds, as FormatTime writes them: a fraction is dropped.
  return std::chrono::system_clock::from_time_t(absl::ToTimeT(t));
}

}  // namespace gpuaas
