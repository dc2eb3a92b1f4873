// The host logger: one line per message on stderr ("kiwi-agent: warn: ..."), filtered by level.
#pragma once

#include <atomic>
#include <kiwi/plugin.hpp>
#include <mutex>
#include <optional>
#include <string>

namespace kiwi::agent {

class StderrLogger final : public Logger {
 public:
  explicit StderrLogger(LogLevel level = LogLevel::info) : level_(level) {}
  void set_level(LogLevel level) { level_ = level; }
  void log(LogLevel level, std::string_view message) override;

 private:
  std::atomic<LogLevel> level_;
  std::mutex mutex_;
};

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
