#include "common/clock.h"

#include <ctime>

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
  int y, mo, d, h, mi, sec;
  char tail[32] = {0};
  std::string str(s.substr(0, 40));
  int n = std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%31s", &y, &mo, &d, &h, &mi, &sec, tail);
  if (n != 7) return std::nullopt;
  std::string_view rest(tail);
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
    rest.remove_prefix(i);
  }
  if (rest != "Z") return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  // Time counts nanoseconds in 64 bits, which ends in 2262: keep well inside it.
  if (y < 1970 || y > 2200) return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace gpuaas
