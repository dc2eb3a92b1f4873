// Shared by the libFuzzer harnesses (tests/fuzz, tools/fuzz.sh): the fuzz input as text, and a
// check that fails the run the way a sanitizer does (abort, so libFuzzer saves the input).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace kiwi_fuzz {

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits the input at the first NUL byte: two independent texts from one input (e.g. the two
// /proc/stat readings a rate needs). Without a NUL the second is empty.
inline std::pair<std::string_view, std::string_view> halves(std::string_view in) {
  const auto nul = in.find('\0');
  if (nul == std::string_view::npos) return {in, {}};
  return {in.substr(0, nul), in.substr(nul + 1)};
}

#define KIWI_FUZZ_CHECK(cond)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

}  // namespace kiwi_fuzz
