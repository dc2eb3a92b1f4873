#include <fstream>
#include <stdexcept>

#include "http_post.hpp"

// The texts shared by plugins/common's HTTP clients (POST and peer GET): secrets read from files,
// and kept out of reasons. No libcurl here: the peer client loads it only when needed.
namespace kiwi_http {

std::string read_secret(const std::string& file, std::string_view option) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(std::string(option) + ": cannot read " + file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  return line;
}

std::string url_origin(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return {};
  const auto start = scheme + 3;
  const auto end = std::min(url.find_first_of("/?#", start), url.size());
  std::string_view authority = url.substr(start, end - start);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos)
    authority.remove_prefix(at + 1);
  return std::string(url.substr(0, start)) + std::string(authority);
}

std::string redact(std::string text, std::span<const std::string> secrets) {
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (auto at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + std::string_view("<secret>").size()))
      text.replace(at, secret.size(), "<secret>");
  }
  return text;
}

}  // namespace kiwi_http
