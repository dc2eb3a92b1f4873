#include "base/log.hpp"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <kiwi/io.hpp>

namespace kiwi::agent {

bool StderrLogger::stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  return ::fstat(2, &st) == 0 && static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

std::string format_log_time(std::int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::localtime_r(&secs, &tm);
  char date[32], zone[8];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  std::strftime(zone, sizeof zone, "%z", &tm);  // +0100
  char out[64];
  std::snprintf(out, sizeof out, "%s.%03d%.3s:%.2s", date, static_cast<int>(unix_ms % 1000), zone,
                zone + 3);
  return out;
}

void append_log_text(std::string& line, std::string_view message) {
  static constexpr char hex[] = "0123456789abcdef";
  const std::size_t size = message.size();
  if (size > kLogMessageMax) message = message.substr(0, kLogMessageMax);
  while (!message.empty()) {
    const auto c = static_cast<unsigned char>(message.front());
    const std::size_t n = c < 0x20 || c == 0x7f ? 0 : kiwi::utf8_sequence_length(message);
    if (n == 0) {
      line += "\\x";
      line.push_back(hex[c >> 4]);
      line.push_back(hex[c & 15]);
      message.remove_prefix(1);
    } else {
      line.append(message.substr(0, n));
      message.remove_prefix(n);
    }
  }
  if (size > kLogMessageMax) line += "...(" + std::to_string(size) + " bytes)";
}

void StderrLogger::log(LogLevel level, std::string_view message) {
  if (level > level_.load(std::memory_order_relaxed)) return;
  std::string line;
  if (timestamps_) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    line = format_log_time(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
    line += ' ';
  }
  line += "kiwi-agent: ";
  line += to_string(level);
  line += ": ";
  append_log_text(line, message);
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
