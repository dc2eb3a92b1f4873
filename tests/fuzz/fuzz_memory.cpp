// The memory sensor's parser: /proc/meminfo, then the derived values (with and without the
// kernel's min_free_kbytes). Missing MemTotal throws std::invalid_argument; nothing else.
#include <stdexcept>

#include "fuzz_support.hpp"
#include "memory_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto meminfo = kiwi::memory::parse_meminfo(kiwi_fuzz::text(data, size));
  for (auto min_free : {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{67584}}) {
    try {
      (void)kiwi::memory::compute_memory(meminfo, min_free);
    } catch (const std::invalid_argument&) {
    }
  }
  return 0;
}
