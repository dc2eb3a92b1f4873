#include "peer_path.hpp"

namespace kiwi_proxy {

std::string encode_path(std::string_view path) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size());
  for (char ch : path) {
    const auto c = static_cast<unsigned char>(ch);
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      std::string_view("-._~!$&'()*+,;=:@/").find(ch) != std::string_view::npos;
    if (keep) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::variant<Target, Redirect, Refused> resolve(std::string_view path, std::string_view prefix,
                                                std::string_view raw_query) {
  if (!path.starts_with(prefix))  // the router sends only its prefix; anything else is not ours
    return Refused{404, "not a /peer/<name>/ path"};
  std::string_view rest = path.substr(prefix.size());
  const auto slash = rest.find('/');
  const std::string_view name = rest.substr(0, slash);
  if (name.empty()) return Refused{404, "name a peer: /peer/<name>/"};
  if (slash == std::string_view::npos) return Redirect{std::string(name) + "/"};
  const std::string_view inner = rest.substr(slash);  // "/..." on the peer
  // Segment by segment: no "." or "..", which a server or a proxy between might resolve to a
  // path outside the peer's routes, and no control characters.
  std::size_t start = 1;
  while (start <= inner.size()) {
    const auto end = std::min(inner.find('/', start), inner.size());
    const std::string_view seg = inner.substr(start, end - start);
    if (seg == "." || seg == "..")
      return Refused{400, "a path with a \".\" or \"..\" segment is not passed to a peer"};
    start = end + 1;
  }
  for (char ch : inner)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      return Refused{400, "a control character in the path"};
  for (char ch : raw_query)
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f || ch == '#')
      return Refused{400, "the query holds a character a URL cannot carry"};
  Target t{std::string(name), encode_path(inner)};
  if (!raw_query.empty()) t.path_and_query += "?" + std::string(raw_query);
  return t;
}

}  // namespace kiwi_proxy
