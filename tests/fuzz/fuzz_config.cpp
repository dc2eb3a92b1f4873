// The config loader on any text: a Config or a ConfigError (the agent's exit 2), nothing else.
#include <exception>

#include "config/config.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kiwi::agent::Config cfg =
        kiwi::agent::load_config_text(kiwi_fuzz::text(data, size), "fuzz.toml", "/nonexistent");
    (void)cfg;
  } catch (const kiwi::agent::ConfigError&) {
  }
  return 0;
}
