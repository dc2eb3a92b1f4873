#include "app/agent_data.hpp"

#include <chrono>

namespace kiwi::agent {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kiwi::agent
