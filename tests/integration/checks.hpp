// Catch2 helpers shared by the integration tests.
#pragma once

#include <rapidjson/document.h>

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <kiwi/plugin.hpp>

#include "harness.hpp"
#include "test_support.hpp"

namespace kiwi_test {

inline rapidjson::Document parse_json(const std::string& body) {
  rapidjson::Document d;
  d.Parse(body.c_str(), body.size());
  INFO(body);
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

// The agent's current sample sequence, from /api/current; 0 before the first sample (503).
inline std::uint64_t sequence_of(HttpClient& c) {
  auto r = c.get("/api/current");
  if (r.status == 503) return 0;
  return parse_json(r.body)["sequence"].GetUint64();
}

// Runs a command, returns its exit code and output (stdout and stderr together).
inline std::pair<int, std::string> run_shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The SHA-256 of `s` in hex, as a bearer_tokens_file line holds it.
inline std::string sha256_hex(const std::string& s) {
  auto [code, out] = run_shell("printf %s '" + s + "' | sha256sum");
  REQUIRE(code == 0);
  return out.substr(0, 64);
}

// The value of one series of /metrics ("" if absent).
inline std::string metric(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return "";
  at += series.size() + 2;
  return text.substr(at, text.find('\n', at) - at);
}

// The ticks the agent counts as missed, from /metrics: grid points it skipped because it was a
// whole interval or more behind (a busy machine), each of which widens a step between samples by
// an interval. Counted as each step is decided, so it covers every step up to the newest sample.
inline double missed_ticks(HttpClient& c) {
  const std::string m = c.get("/metrics").body;
  const std::string name = "\nkiwi_collector_missed_ticks_total ";
  const auto at = m.find(name);
  REQUIRE(at != std::string::npos);
  return std::stod(m.substr(at + name.size()));
}

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kiwi_test
