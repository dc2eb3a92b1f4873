// The cgi handler's logic on text and on a real directory: which program a path names (the
// path-traversal corpus), the meta-variables, and a program's output read as a response.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>

#include "cgi_logic.hpp"
#include "test_support.hpp"

using namespace kiwi::cgi;

namespace {

std::string split_error(std::string_view path) {
  auto s = split_target("/cgi/", path);
  return s.target ? "(split: " + s.target->name + " " + s.target->path_info + ")" : s.error;
}

// A program directory with every kind of file the resolver must tell apart, and a file outside.
struct ProgramDir {
  kiwi_test::TempDir tmp;
  std::string dir;
  ProgramDir() {
    namespace fs = std::filesystem;
    fs::create_directory(tmp.path / "cgi");
    fs::create_directory(tmp.path / "cgi" / "sub");
    char real[PATH_MAX];
    dir = ::realpath((tmp.path / "cgi").c_str(), real);
    write(dir + "/hello", "#!/bin/sh\necho hi\n", 0755);
    write(dir + "/sub/inner", "#!/bin/sh\n", 0755);
    write(dir + "/plain.txt", "text\n", 0644);
    write(dir + "/.hidden", "#!/bin/sh\n", 0755);
    write((tmp.path / "outside").string(), "#!/bin/sh\n", 0755);
    fs::create_symlink("/bin/sh", dir + "/shell");
    fs::create_symlink(tmp.path / "outside", dir + "/escape");
    fs::create_symlink("../cgi/hello", dir + "/alias");
    fs::create_symlink("sub/inner", dir + "/deep");
    fs::create_symlink("nowhere", dir + "/dangling");
  }
  static void write(const std::string& path, const std::string& text, mode_t mode) {
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
  }
};

bool has(const std::vector<std::string>& env, const std::string& var) {
  return std::find(env.begin(), env.end(), var) != env.end();
}
bool has_name(const std::vector<std::string>& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(),
                     [&](const std::string& v) { return v.starts_with(name + "="); });
}

}  // namespace

TEST_CASE("cgi: the first segment after the route names the program, the rest is PATH_INFO") {
  auto s = split_target("/cgi/", "/cgi/hello");
  REQUIRE(s.target);
  CHECK(s.target->name == "hello");
  CHECK(s.target->path_info == "");
  s = split_target("/cgi/", "/cgi/hello/a/b%2F/");
  REQUIRE(s.target);
  CHECK(s.target->name == "hello");
  CHECK(s.target->path_info == "/a/b%2F/");
  s = split_target("/cgi/", "/cgi/hello/");
  REQUIRE(s.target);
  CHECK(s.target->path_info == "/");
}

TEST_CASE("cgi: traversal corpus: paths that name no program, on decoded paths") {
  // The server decodes %2e%2e to .. and %2f to / before the handler sees the path.
  CHECK(split_error("/cgi/") == "no CGI program named: the path needs one after /cgi/");
  CHECK(split_error("/cgi//etc/passwd") == "no CGI program named: the path needs one after /cgi/");
  CHECK(split_error("/cgi/../etc/passwd") ==
        "no CGI program '..': names starting with '.' are refused");
  CHECK(split_error("/cgi/..") == "no CGI program '..': names starting with '.' are refused");
  CHECK(split_error("/cgi/.") == "no CGI program '.': names starting with '.' are refused");
  CHECK(split_error("/cgi/./hello") == "no CGI program '.': names starting with '.' are refused");
  CHECK(split_error("/cgi/.hidden") ==
        "no CGI program '.hidden': names starting with '.' are refused");
  // A backslash is an ordinary character on Linux: one name, looked up as such (and not found).
  CHECK(split_error("/cgi/..\\..\\etc\\passwd") ==
        "no CGI program '..\\..\\etc\\passwd': names starting with '.' are refused");
  CHECK(split_error("/cgi/x\\..\\..\\etc\\passwd") == "(split: x\\..\\..\\etc\\passwd )");
  CHECK(split_error("/cgi/a\\..") == "(split: a\\.. )");
}

TEST_CASE("cgi: traversal corpus: the resolver on a real directory") {
  ProgramDir p;
  CHECK(resolve_program(p.dir, "hello").path == p.dir + "/hello");
  CHECK(resolve_program(p.dir, "hello").error == "");
  // A symlink to a file inside is allowed, and runs the file it points to.
  CHECK(resolve_program(p.dir, "alias").path == p.dir + "/hello");
  CHECK(resolve_program(p.dir, "deep").path == p.dir + "/sub/inner");
  CHECK(resolve_program(p.dir, "shell").error ==
        "CGI program 'shell' links outside the program directory");
  CHECK(resolve_program(p.dir, "escape").error ==
        "CGI program 'escape' links outside the program directory");
  CHECK(resolve_program(p.dir, "dangling").error == "CGI program 'dangling' is a dangling symlink");
  CHECK(resolve_program(p.dir, "sub").error == "CGI program 'sub' is not a regular file");
  CHECK(resolve_program(p.dir, "plain.txt").error == "CGI program 'plain.txt' is not executable");
  CHECK(resolve_program(p.dir, "nosuch").error == "no CGI program 'nosuch' here");
  CHECK(resolve_program(p.dir, "..\\..\\etc\\passwd").error ==
        "no CGI program '..\\..\\etc\\passwd' here");
}

TEST_CASE("cgi: meta-variables of RFC 3875 from a request") {
  const kiwi::Param headers[] = {{"Host", "board.local:8095"},
                                 {"User-Agent", "curl/7.88"},
                                 {"Content-Type", "text/plain"},
                                 {"Content-Length", "5"},
                                 {"X-Thing", "a"},
                                 {"x-thing", "b"},
                                 {"Authorization", "Bearer s3cret"},
                                 {"Proxy-Authorization", "Basic eA=="},
                                 {"Proxy", "http://evil:1"},
                                 {"X_Forwarded_For", "1.2.3.4"},
                                 {"Accept.Bad", "z"}};
  kiwi::Request r;
  r.method = "POST";
  r.path = "/cgi/echo/a b";
  r.raw_query = "x=1+2&y=%2F";
  r.headers = headers;
  r.remote_address = "127.0.0.1";
  r.body = "hello";
  r.protocol = "HTTP/1.0";
  r.local_address = "127.0.0.1";
  r.local_port = 8095;
  Gateway gw{"/cgi/echo", "/a b", "kiwi-agent/9.9", false, ""};
  auto env = meta_variables(r, gw);
  CHECK(has(env, "GATEWAY_INTERFACE=CGI/1.1"));
  CHECK(has(env, "REQUEST_METHOD=POST"));
  CHECK(has(env, "SCRIPT_NAME=/cgi/echo"));
  CHECK(has(env, "PATH_INFO=/a b"));
  CHECK(has(env, "QUERY_STRING=x=1+2&y=%2F"));
  CHECK(has(env, "SERVER_PROTOCOL=HTTP/1.0"));
  CHECK(has(env, "SERVER_SOFTWARE=kiwi-agent/9.9"));
  CHECK(has(env, "SERVER_NAME=board.local"));
  CHECK(has(env, "SERVER_PORT=8095"));
  CHECK(has(env, "REMOTE_ADDR=127.0.0.1"));
  CHECK(has(env, "CONTENT_TYPE=text/plain"));
  CHECK(has(env, "CONTENT_LENGTH=5"));
  CHECK(has(env, "HTTP_HOST=board.local:8095"));
  CHECK(has(env, "HTTP_USER_AGENT=curl/7.88"));
  CHECK(has(env, "HTTP_X_THING=a, b"));
  CHECK_FALSE(has_name(env, "HTTP_CONTENT_TYPE"));
  CHECK_FALSE(has_name(env, "HTTP_CONTENT_LENGTH"));
  CHECK_FALSE(has_name(env, "HTTP_AUTHORIZATION"));
  CHECK_FALSE(has_name(env, "HTTP_PROXY_AUTHORIZATION"));
  CHECK_FALSE(has_name(env, "HTTP_PROXY"));  // httpoxy
  CHECK_FALSE(has_name(env, "HTTP_X_FORWARDED_FOR"));
  CHECK_FALSE(has_name(env, "HTTP_ACCEPT.BAD"));

  gw.pass_authorization = true;
  env = meta_variables(r, gw);
  CHECK(has(env, "HTTP_AUTHORIZATION=Bearer s3cret"));
  CHECK(has(env, "HTTP_PROXY_AUTHORIZATION=Basic eA=="));
  CHECK_FALSE(has_name(env, "HTTP_PROXY"));
}

TEST_CASE(
    "cgi: SERVER_NAME without a Host header is the local address, GET has no body variables") {
  kiwi::Request r;
  r.method = "GET";
  r.local_address = "::1";
  r.local_port = 9;
  auto env = meta_variables(r, {"/cgi/x", "", "kiwi-agent/1", false, ""});
  CHECK(has(env, "SERVER_NAME=[::1]"));
  CHECK(has(env, "QUERY_STRING="));
  CHECK(has(env, "SERVER_PROTOCOL=HTTP/1.1"));
  CHECK_FALSE(has_name(env, "CONTENT_LENGTH"));
  CHECK_FALSE(has_name(env, "CONTENT_TYPE"));
  const kiwi::Param v6[] = {{"Host", "[fe80::1]:8095"}};
  r.headers = v6;
  CHECK(has(meta_variables(r, {"/cgi/x", "", "k", false, ""}), "SERVER_NAME=[fe80::1]"));
}

TEST_CASE("cgi: AUTH_TYPE and REMOTE_USER name who http.auth let in, and only then") {
  kiwi::Request r;
  r.method = "GET";
  const Gateway gw{"/cgi/x", "/p", "k", false, ""};
  auto env = meta_variables(r, gw);
  CHECK_FALSE(has_name(env, "AUTH_TYPE"));  // not authenticated: neither is set
  CHECK_FALSE(has_name(env, "REMOTE_USER"));
  r.auth_type = "Basic";
  r.remote_user = "prometheus";
  env = meta_variables(r, gw);
  CHECK(has(env, "AUTH_TYPE=Basic"));
  CHECK(has(env, "REMOTE_USER=prometheus"));
  r.auth_type = "Bearer";
  r.remote_user = "";
  env = meta_variables(r, gw);
  CHECK(has(env, "AUTH_TYPE=Bearer"));
  CHECK(has(env, "REMOTE_USER="));  // a token names no user
}

TEST_CASE("cgi: PATH_TRANSLATED is document_root + PATH_INFO, unset without either") {
  kiwi::Request r;
  r.method = "GET";
  auto env = meta_variables(r, {"/cgi/man", "/man1/ls.1", "k", false, ""});
  CHECK_FALSE(has_name(env, "PATH_TRANSLATED"));  // no document tree: not set
  CHECK_FALSE(has_name(env, "DOCUMENT_ROOT"));
  env = meta_variables(r, {"/cgi/man", "/man1/ls.1", "k", false, "/usr/share/man"});
  CHECK(has(env, "PATH_TRANSLATED=/usr/share/man/man1/ls.1"));
  CHECK(has(env, "DOCUMENT_ROOT=/usr/share/man"));
  env = meta_variables(r, {"/cgi/man", "", "k", false, "/usr/share/man"});
  CHECK_FALSE(has_name(env, "PATH_TRANSLATED"));  // RFC 3875 4.1.6: no PATH_INFO, none
  CHECK(has(env, "DOCUMENT_ROOT=/usr/share/man"));
}

TEST_CASE("cgi: a document response, LF or CRLF") {
  for (std::string_view out :
       {"Content-Type: text/plain\n\nhi\n", "Content-Type: text/plain\r\n\r\nhi\n"}) {
    auto p = parse_response(out);
    REQUIRE(p.response);
    CHECK(p.response->status == 200);
    CHECK(p.response->content_type == "text/plain");
    CHECK(p.response->body == "hi\n");
    CHECK(p.response->headers.empty());
  }
}

TEST_CASE("cgi: Status, Location and other headers") {
  auto p = parse_response("Status: 404 Not Found\nContent-Type: text/plain\nX-A:  1 \n\ngone");
  REQUIRE(p.response);
  CHECK(p.response->status == 404);
  CHECK(p.response->body == "gone");
  REQUIRE(p.response->headers.size() == 1);
  CHECK(p.response->headers[0].name == "X-A");
  CHECK(p.response->headers[0].value == "1");

  p = parse_response("Location: /api/health\n\n");
  REQUIRE(p.response);
  CHECK(p.response->status == 302);
  CHECK(p.response->headers[0].name == "Location");
  CHECK(p.response->headers[0].value == "/api/health");
  p = parse_response("Location: https://example.org/x?y=1\nStatus: 301 Moved\n\n");
  REQUIRE(p.response);
  CHECK(p.response->status == 301);

  // Framing and hop-by-hop headers are the server's, and so are Date and Server.
  p = parse_response(
      "Content-Type: text/plain\nContent-Length: 99\nConnection: close\nTransfer-Encoding: "
      "chunked\nKeep-Alive: 5\nUpgrade: h2c\nDate: Thu, 01 Jan 1970 00:00:00 GMT\n"
      "server: Apache/1.3\nCache-Control: no-store\n\nx");
  REQUIRE(p.response);
  REQUIRE(p.response->headers.size() == 1);
  CHECK(p.response->headers[0].name == "Cache-Control");

  // No body: no Content-Type needed.
  p = parse_response("Status: 204 No Content\n\n");
  REQUIRE(p.response);
  CHECK(p.response->status == 204);
  CHECK(p.response->content_type.empty());
}

TEST_CASE("cgi: malformed responses are named") {
  auto error = [](std::string_view out) {
    auto p = parse_response(out);
    return p.response ? std::string("(parsed)") : p.error;
  };
  CHECK(error("") == "malformed CGI response: the program printed nothing");
  CHECK(error("hello") == "malformed CGI response: no header block (no line ends in its output)");
  CHECK(error("Content-Type: text/plain\nhello") ==
        "malformed CGI response: the header block does not end with an empty line");
  CHECK(error("\nbody") == "malformed CGI response: no header before the empty line");
  CHECK(error("hello world\n\n") ==
        "malformed CGI response: header line 1 is not 'Name: value': 'hello world'");
  CHECK(error("Content-Type: text/plain\n continued\n\n") ==
        "malformed CGI response: header line 2 is not 'Name: value': ' continued'");
  CHECK(error("X-A: 1\n\nbody") == "malformed CGI response: a body without a Content-Type header");
  CHECK(error("Status: 99 Low\n\n") ==
        "malformed CGI response: Status '99 Low' is not a status code from 200 to 599");
  CHECK(error("Status: 600\n\n") ==
        "malformed CGI response: Status '600' is not a status code from 200 to 599");
  CHECK(error("Status: 101 Switching\n\n") ==
        "malformed CGI response: Status '101 Switching' is not a status code from 200 to 599");
  CHECK(error("Status: 2000\n\n") ==
        "malformed CGI response: Status '2000' is not a status code from 200 to 599");
  CHECK(error("Status: 200\nStatus: 200\n\n") == "malformed CGI response: Status given twice");
  CHECK(error("Location: elsewhere\n\n") ==
        "malformed CGI response: Location 'elsewhere' is neither a local path nor an absolute URL");
  CHECK(error("X-A: a\rb\nContent-Type: t\n\n") ==
        "malformed CGI response: header X-A has a control character in its value");
  CHECK(error(std::string_view("X-A: a\0b\n\n", 10)) ==
        "malformed CGI response: header X-A has a control character in its value");
}
