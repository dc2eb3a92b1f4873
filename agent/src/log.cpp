#include "log.hpp"

#include <cstdio>

namespace kiwi::agent {

void StderrLogger::log(LogLevel level, std::string_view message) {
  if (level > level_.load(std::memory_order_relaxed)) return;
  std::string line = "kiwi-agent: ";
  line += to_string(level);
  line += ": ";
  line += message;
  line += '\n';
  std::lock_guard lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void PrefixLogger::log(LogLevel level, std::string_view message) {
  std::string line = prefix_;
  line += ": ";
  line += message;
  out_.log(level, line);
}

static constexpr std::string_view kLevelNames[] = {"error", "warn", "info", "debug"};

std::optional<LogLevel> parse_log_level(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kLevelNames); ++i)
    if (kLevelNames[i] == text) return static_cast<LogLevel>(i);
  return std::nullopt;
}

std::string_view to_string(LogLevel level) {
  auto i = static_cast<std::size_t>(level);
  return i < std::size(kLevelNames) ? kLevelNames[i] : "?";
}

}  // namespace kiwi::agent
