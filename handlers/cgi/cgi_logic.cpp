#include "cgi_logic.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace kiwi::cgi {

namespace {

char upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}

bool equals_ci(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (upper(a[i]) != upper(b[i])) return false;
  return true;
}

std::string quoted(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "'";
}

// RFC 9110 token characters, for header field names.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c >= '0' && c <= '9') continue;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') continue;
    if (!std::strchr("!#$%&'*+-.^_`|~", c) || c == 0) return false;
  }
  return true;
}

// Only letters, digits and '-': what maps one-to-one onto an HTTP_ variable name.
bool maps_cleanly(std::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (!((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '-'))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Headers the server owns (RFC 9110 section 7.6.1 hop-by-hop ones, and the framing), and Date and
// Server, which are the server's to say (as Apache overrides a program's).
bool server_owned(std::string_view name) {
  for (std::string_view h : {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
                             "Transfer-Encoding", "Upgrade", "Content-Length", "Date", "Server"})
    if (equals_ci(name, h)) return true;
  return false;
}

}  // namespace

Split split_target(std::string_view prefix, std::string_view path) {
  Split out;
  std::string_view rest = path.substr(std::min(prefix.size(), path.size()));
  const std::size_t slash = rest.find('/');
  const std::string_view name = rest.substr(0, slash);
  if (name.empty()) {
    out.error = "no CGI program named: the path needs one after " + std::string(prefix);
    return out;
  }
  if (name.front() == '.') {
    out.error = "no CGI program " + quoted(name) + ": names starting with '.' are refused";
    return out;
  }
  out.target =
      Target{std::string(name),
             slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash))};
  return out;
}

Program resolve_program(const std::string& directory, const std::string& name) {
  Program out;
  const std::string where = "CGI program " + quoted(name);
  // The name is one path segment (split_target), so the file is directly in the directory; a
  // symlink there may point elsewhere, which realpath shows.
  const std::string file = directory + "/" + name;
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) {
    out.error = errno == ENOENT || errno == ENOTDIR ? "no " + where + " here"
                                                    : where + ": " + std::strerror(errno);
    return out;
  }
  char real[PATH_MAX];
  if (!::realpath(file.c_str(), real)) {
    out.error =
        errno == ENOENT ? where + " is a dangling symlink" : where + ": " + std::strerror(errno);
    return out;
  }
  const std::string_view resolved = real;
  if (!resolved.starts_with(directory + "/")) {
    out.error = where + " links outside the program directory";
    return out;
  }
  if (::stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
    out.error = where + " is not a regular file";
    return out;
  }
  if (::access(real, X_OK) != 0) {
    out.error = where + " is not executable";
    return out;
  }
  out.path = real;
  return out;
}

std::vector<std::string> meta_variables(const Request& request, const Gateway& gw) {
  std::vector<std::string> env;
  auto set = [&](std::string_view name, std::string_view value) {
    env.push_back(std::string(name) + "=" + std::string(value));
  };
  set("GATEWAY_INTERFACE", "CGI/1.1");
  set("REQUEST_METHOD", request.method);
  set("SCRIPT_NAME", gw.script_name);
  set("PATH_INFO", gw.path_info);
  set("QUERY_STRING", request.raw_query);
  set("SERVER_PROTOCOL", request.protocol.empty() ? "HTTP/1.1" : request.protocol);
  set("SERVER_SOFTWARE", gw.server_software);
  set("SERVER_PORT", std::to_string(request.local_port));
  set("REMOTE_ADDR", request.remote_address);
  // RFC 3875 4.1.1 and 4.1.11: the scheme and the user the server checked. A bearer token names
  // no user: REMOTE_USER is then set, and empty.
  if (!request.auth_type.empty()) {
    set("AUTH_TYPE", request.auth_type);
    set("REMOTE_USER", request.remote_user);
  }
  // RFC 3875 4.1.6: PATH_INFO mapped onto the document tree, as Apache and lighttpd do
  // (DocumentRoot + PATH_INFO); "if PATH_INFO is NULL, PATH_TRANSLATED MUST be unset". PATH_INFO
  // never has a dot segment (the server answers 400), so it cannot climb out of the root.
  if (!gw.document_root.empty()) {
    set("DOCUMENT_ROOT", gw.document_root);
    if (!gw.path_info.empty())
      set("PATH_TRANSLATED", std::string(gw.document_root) + std::string(gw.path_info));
  }
  // The Host header's host (RFC 3875 4.1.14), else the address the request came in on; an IPv6
  // address in brackets, as a URL has it.
  std::string server_name;
  if (auto host = request.header("Host"); host && !trim(*host).empty()) {
    std::string_view h = trim(*host);
    if (h.front() == '[')
      h = h.substr(0, h.find(']') == std::string_view::npos ? h.size() : h.find(']') + 1);
    else
      h = h.substr(0, h.find(':'));
    server_name = h;
  } else if (request.local_address.find(':') != std::string_view::npos) {
    server_name = "[" + std::string(request.local_address) + "]";
  } else {
    server_name = request.local_address;
  }
  set("SERVER_NAME", server_name);
  if (auto type = request.header("Content-Type")) set("CONTENT_TYPE", *type);
  if (!request.body.empty() || request.header("Content-Length"))
    set("CONTENT_LENGTH", std::to_string(request.body.size()));

  // HTTP_*: in the order the headers came, repeated ones joined (RFC 3875 4.1.18).
  std::vector<std::pair<std::string, std::string>> http;
  for (const auto& h : request.headers) {
    if (!maps_cleanly(h.name) || equals_ci(h.name, "Content-Type") ||
        equals_ci(h.name, "Content-Length") || equals_ci(h.name, "Proxy"))
      continue;
    if (!gw.pass_authorization &&
        (equals_ci(h.name, "Authorization") || equals_ci(h.name, "Proxy-Authorization")))
      continue;
    std::string name = "HTTP_";
    for (char c : h.name) name.push_back(c == '-' ? '_' : upper(c));
    bool joined = false;
    for (auto& [n, v] : http)
      if (n == name) {
        v += ", " + std::string(h.value);
        joined = true;
      }
    if (!joined) http.emplace_back(std::move(name), std::string(h.value));
  }
  for (auto& [n, v] : http) set(n, v);
  return env;
}

Parsed parse_response(std::string_view output) {
  Parsed out;
  auto fail = [&](const std::string& why) {
    out.error = "malformed CGI response: " + why;
    return out;
  };
  if (output.empty()) return fail("the program printed nothing");
  CgiResponse res;
  bool have_status = false, have_type = false, have_location = false;
  std::size_t at = 0;
  for (int line_no = 1;; ++line_no) {
    const std::size_t nl = output.find('\n', at);
    if (nl == std::string_view::npos)
      return fail(line_no == 1 ? "no header block (no line ends in its output)"
                               : "the header block does not end with an empty line");
    std::string_view line = output.substr(at, nl - at);
    at = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (line_no == 1) return fail("no header before the empty line");
      break;
    }
    const std::size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || !is_token(name))
      return fail("header line " + std::to_string(line_no) +
                  " is not 'Name: value': " + quoted(line.substr(0, 80)));
    const std::string_view value = trim(line.substr(colon + 1));
    for (unsigned char c : value)
      if ((c < 0x20 && c != '\t') || c == 0x7f)
        return fail("header " + std::string(name) + " has a control character in its value");
    if (equals_ci(name, "Status")) {
      if (have_status) return fail("Status given twice");
      have_status = true;
      const bool digits = value.size() >= 3 && value[0] >= '1' && value[0] <= '9' &&
                          value[1] >= '0' && value[1] <= '9' && value[2] >= '0' &&
                          value[2] <= '9' && (value.size() == 3 || value[3] == ' ');
      const int code =
          digits ? (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0') : 0;
      if (code < 200 || code > 599)
        return fail("Status " + quoted(value) + " is not a status code from 200 to 599");
      res.status = code;
    } else if (equals_ci(name, "Content-Type")) {
      if (have_type) return fail("Content-Type given twice");
      have_type = true;
      res.content_type = value;
    } else if (equals_ci(name, "Location")) {
      if (have_location) return fail("Location given twice");
      have_location = true;
      // A local path or an absolute URL (scheme ":"), RFC 3875 6.2.3 and 6.2.4.
      const std::size_t scheme = value.find(':');
      bool absolute = scheme != std::string_view::npos && scheme > 0;
      for (std::size_t i = 0; absolute && i < scheme; ++i) {
        const unsigned char c = static_cast<unsigned char>(value[i]);
        absolute = ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
                   (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
      }
      if (!absolute && !value.starts_with('/'))
        return fail("Location " + quoted(value) + " is neither a local path nor an absolute URL");
      res.headers.push_back({"Location", std::string(value)});
    } else if (!server_owned(name)) {
      res.headers.push_back({std::string(name), std::string(value)});
    }
  }
  res.body = output.substr(at);
  if (have_location && !have_status) res.status = 302;
  if (!have_type && !res.body.empty()) return fail("a body without a Content-Type header");
  out.response = std::move(res);
  return out;
}

}  // namespace kiwi::cgi
