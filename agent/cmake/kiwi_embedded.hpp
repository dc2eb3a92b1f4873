// Files embedded at build time by kiwi_embed() (agent/cmake/embed.cmake).
#pragma once
#include <cstddef>
#include <string_view>

namespace kiwi_embedded {
struct File {
  std::string_view path;  // relative to the embed base directory
  std::string_view data;  // the file, or a gzip stream of it (kiwi_embed(... GZIP ...))
};
}  // namespace kiwi_embedded
