// Logging: levelled, one line per event, to stderr. Thread-safe. Backed by spdlog, kept out of
// this header so that it is not compiled into every file.
#ifndef GPUAAS_COMMON_LOG_H_
#define GPUAAS_COMMON_LOG_H_

#include <string_view>

#include "fmt/format.h"

namespace gpuaas::log {

enum class Level { kDebug, kInfo, kWarn, kError, kOff };

void SetLevel(Level level);
// Parses debug|info|warn|error|off; false on anything else.
bool ParseLevel(std::string_view name, Level* out);
void Write(Level level, std::string_view message);

template <typename... Args>
void Info(fmt::format_string<Args...> f, Args&&... args) {
  Write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void Warn(fmt::format_string<Args...> f, Args&&... args) {
  Write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void Error(fmt::format_string<Args...> f, Args&&... args) {
  Write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void Debug(fmt::format_string<Args...> f, Args&&... args) {
  Write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace gpuaas::log

#endif  // GPUAAS_COMMON_LOG_H_
