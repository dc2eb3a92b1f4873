// The cgi handler's logic (RFC 3875, CGI/1.1), apart from running the program: which program a
// path names, the meta-variables a program gets, and what its output means as an HTTP response.
#pragma once

#include <kiwi/handler.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::cgi {

// A request path split after the route's prefix ("/cgi/" of "/cgi/*"): the first segment names
// the program, the rest (from its '/') is PATH_INFO.
struct Target {
  std::string name;       // "hello"
  std::string path_info;  // "/a/b", or ""
};

// The split, or why the path names no program (the 404 message): no name, or a name that is
// ".", ".." or starts with '.' (dotfiles are never programs, so nothing can climb out or reach
// a hidden file). `path` is decoded and starts with `prefix`.
struct Split {
  std::optional<Target> target;
  std::string error;
};
Split split_target(std::string_view prefix, std::string_view path);

// The program file `name` in `directory` (its realpath, without a trailing '/'): its real path,
// or why it cannot be run (the 404 message). Refused: a name that does not exist, a symlink
// whose target lies outside `directory`, anything but a regular file, a file without execute
// permission for the agent.
struct Program {
  std::string path;   // the file to execute (symlinks resolved)
  std::string error;  // "" when `path` is good
};
Program resolve_program(const std::string& directory, const std::string& name);

// What the meta-variables are made of besides the request.
struct Gateway {
  std::string_view script_name;  // the route prefix and the program name: "/cgi/hello"
  std::string_view path_info;
  std::string_view server_software;  // "kiwi-agent/0.2.0"
  bool pass_authorization = false;   // HTTP_AUTHORIZATION and HTTP_PROXY_AUTHORIZATION too
  // The tree PATH_INFO names a place in (the option document_root, a realpath), or "": then
  // PATH_TRANSLATED and DOCUMENT_ROOT are not set (the agent has no document tree of its own).
  std::string_view document_root;
};

// The meta-variables of RFC 3875 section 4.1 for `request`, as "NAME=value" strings: every
// request header as HTTP_<NAME> but Content-Type and Content-Length (given as CONTENT_TYPE and
// CONTENT_LENGTH), Authorization and Proxy-Authorization (unless gw.pass_authorization), Proxy
// (httpoxy: it would become HTTP_PROXY, which HTTP libraries read as their proxy) and names with
// characters other than letters, digits and '-' ("X_Forwarded" would alias "X-Forwarded").
// Repeated headers are joined with ", ". AUTH_TYPE and REMOTE_USER when [http.auth] let the request
// in (request.auth_type); PATH_TRANSLATED (document_root + PATH_INFO) when both are non-empty.
std::vector<std::string> meta_variables(const Request& request, const Gateway& gw);

// A program's output read as a CGI response (RFC 3875 section 6).
struct CgiResponse {
  int status = 200;
  std::string content_type;
  std::vector<Header> headers;  // passed on to the client
  std::string_view body;        // into the output given to parse_response
};

// The response, or why the output is not one ("malformed CGI response: ..."). Header lines end
// with LF or CRLF, up to an empty line. Status: NNN (200-599) and a reason; Location alone gives
// 302; a body needs a Content-Type. Hop-by-hop headers, Content-Length, Transfer-Encoding, Date
// and Server are the server's and dropped.
struct Parsed {
  std::optional<CgiResponse> response;
  std::string error;
};
Parsed parse_response(std::string_view output);

}  // namespace kiwi::cgi
