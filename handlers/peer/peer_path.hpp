// Which peer and which of its paths a /peer/<name>/... request asks for. Pure: unit-tested
// (tests/unit/handlers/test_fleet.cpp).
#pragma once

#include <string>
#include <string_view>
#include <variant>

namespace kiwi_proxy {

struct Target {
  std::string name;            // the peer's name
  std::string path_and_query;  // what to ask it for: "/" or "/api/current?x=1", re-encoded
};
struct Redirect {
  std::string location;  // "/peer/barn" -> "barn/" (relative: the page's own links then work)
};
struct Refused {
  int status;  // 400 or 404
  std::string message;
};

// `path`: the request's decoded path; `prefix`: the route's, with its '/' ("/peer/");
// `raw_query`: the query as the client sent it (passed on as it is, once checked). A path with a
// "." or ".." segment, or a control character, is refused: nothing leaves the peer's own routes.
std::variant<Target, Redirect, Refused> resolve(std::string_view path, std::string_view prefix,
                                                std::string_view raw_query);

// `segment` percent-encoded for a URL path (RFC 3986 unreserved and sub-delims stay; '/' too).
std::string encode_path(std::string_view path);

}  // namespace kiwi_proxy
