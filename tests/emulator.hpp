// How a test starts a binary of this build (the agent, or the test binary itself). In a cross build
// ctest runs the tests under an emulator (qemu-user, CMAKE_CROSSCOMPILING_EMULATOR; see
// cmake/debian-cross.cmake), and tests/CMakeLists.txt puts the same command in KIWI_TEST_EMULATOR
// (words separated by spaces): a binary a test starts runs under it too, as the kernel would refuse
// to execute a foreign binary (ENOEXEC) unless binfmt_misc had been told about it. Unset or empty
// (a native build, or cross-built tests run by hand on the board itself), binaries start directly.
#pragma once

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace kiwi_test {

// The emulator command, one word each; empty when binaries run directly.
inline std::vector<std::string> emulator() {
  std::vector<std::string> words;
  if (const char* command = std::getenv("KIWI_TEST_EMULATOR")) {
    std::istringstream in(command);
    for (std::string word; in >> word;) words.push_back(word);
  }
  return words;
}

// `argv`, whose first word is a binary of this build, as a test starts it here.
inline std::vector<std::string> emulated(std::vector<std::string> argv) {
  const auto words = emulator();
  argv.insert(argv.begin(), words.begin(), words.end());
  return argv;
}

// The same for a shell command line: the emulator command and a space, or "".
inline std::string emulated_shell_prefix() {
  std::string prefix;
  for (const auto& word : emulator()) prefix += word + " ";
  return prefix;
}

}  // namespace kiwi_test
