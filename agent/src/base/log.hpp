// The host logger: one line per message on stderr ("kiwi-agent: warn: ..."), filtered by level.
#pragma once

#include <atomic>
#include <kiwi/plugin.hpp>
#include <mutex>
#include <optional>
#include <string>

namespace kiwi::agent {

// Each line starts with the local time ("2026-12-01T10:15:03.123+01:00 kiwi-agent: info: ...")
// unless stderr is journald's stream (systemd sets JOURNAL_STREAM to its device:inode), which
// stamps every line itself.
class StderrLogger final : public Logger {
 public:
  explicit StderrLogger(LogLevel level = LogLevel::info)
      : level_(level), timestamps_(!stderr_is_journal()) {}
  void set_level(LogLevel level) { level_ = level; }
  void log(LogLevel level, std::string_view message) override;
  bool timestamps() const { return timestamps_; }

  // Whether fd 2 is the stream JOURNAL_STREAM names (a variable inherited by a child whose
  // stderr was redirected elsewhere does not count).
  static bool stderr_is_journal();

 private:
  std::atomic<LogLevel> level_;
  const bool timestamps_;
  std::mutex mutex_;
};

// The most of one message a log line carries; the rest is cut, its size said ("...(N bytes)").
inline constexpr std::size_t kLogMessageMax = 16 * 1024;

// Appends `message` to a log line as StderrLogger writes it: one line, whatever the message
// holds. Control bytes (a newline, ESC, a tab) and bytes that are not valid UTF-8 are written as
// \xNN, valid UTF-8 as it is (journald keeps a line that is not UTF-8 only as a blob), and a
// message over kLogMessageMax is cut. The last line of defence: messages that quote untrusted
// text already escape it (kiwi::quote_excerpt).
void append_log_text(std::string& line, std::string_view message);

// "2026-12-01T10:15:03.123+01:00" for a time in unix milliseconds, in local time.
std::string format_log_time(std::int64_t unix_ms);

// A logger that prefixes every line with a plugin instance ("sensor cpu: ...").
class PrefixLogger final : public Logger {
 public:
  PrefixLogger(Logger& out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}
  void log(LogLevel level, std::string_view message) override;

 private:
  Logger& out_;
  std::string prefix_;
};

std::optional<LogLevel> parse_log_level(std::string_view text);
std::string_view to_string(LogLevel level);

}  // namespace kiwi::agent
