// Pure part of /api/health: the verdict and its JSON from the latest sample and the agent's
// counters.
#pragma once

#include <kiwi/handler.hpp>
#include <string>

namespace kiwi_health {

struct Health {
  int status = 200;  // 200 ok or degraded, 503 failing
  std::string body;
};

// The answer at `now` (unix seconds) for the latest sample `snap` and the counters `stats`
// (README: what fails, what degrades, and every member of the body).
Health check(const kiwi::Snapshot& snap, const kiwi::AgentStats& stats, double now);

}  // namespace kiwi_health
