// The request gates (agent/src/http/gates.hpp) without a server: the order of the list, what each
// gate answers and what it lets through, the response filters, and whose answer a request counts
// as. The server's own tests (test_http_server.cpp) and the integration tests send the same
// requests over a socket.
#include <catch2/catch.hpp>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "http/auth.hpp"
#include "http/gates.hpp"
#include "http/http_server.hpp"
#include "http/router.hpp"

using namespace kiwi;
using namespace kiwi::agent;
using namespace kiwi::agent::http;

namespace {

// Answers "A" with an ETag; takes the methods it is given.
class TextHandler final : public Handler {
 public:
  explicit TextHandler(std::string methods = "GET, HEAD") : methods_(std::move(methods)) {}
  Response handle(const Request&) override {
    Response r;
    r.content_type = "text/plain";
    r.headers = {{"ETag", "\"1\""}};
    r.body = std::make_shared<const std::string>("A");
    return r;
  }
  std::string_view methods() const override { return methods_; }

 private:
  std::string methods_;
};

Route route(const std::string& path, std::string methods = "GET, HEAD") {
  auto instance = std::make_shared<PluginInstance<Handler>>();
  instance->object = std::make_unique<TextHandler>(std::move(methods));
  return {path, std::move(instance)};
}

// What the gates read, and a request to send through them.
struct World {
  Published published;
  AuthLimiter limiter;
  AuthCounters counters;
  std::vector<Param> headers, query;
  Request request;
  std::string raw_path;
  bool body_too_large = false;

  World() {
    published.router = std::make_shared<const Router>(
        std::vector<Route>{route("/a"), route("/form", "GET, HEAD, POST")});
    published.cors_origins = {"http://ok.test"};
    get("/a");
  }
  // A GET of `path` with no headers, query or body.
  void get(const std::string& path) {
    raw_path = path;
    headers.clear();
    query.clear();
    request = Request{};
    request.method = "GET";
    request.path = raw_path;
    request.remote_address = "192.0.2.7";
    sync();
  }
  void header(std::string name, std::string value) {
    names.push_back(std::move(name));
    values.push_back(std::move(value));
    headers.push_back({names.back(), values.back()});
    sync();
  }
  void sync() {
    request.headers = headers;
    request.query = query;
  }
  void require_bearer_token() {
    HttpAuth a;
    a.bearer_tokens_file = "tokens";
    a.bearer_token_hashes = {to_hex(sha256("tok-1"))};
    a.public_paths = {"/form"};
    published.auth = std::make_shared<const Authenticator>(a);
  }
  GateInput input() {
    return {request, raw_path, body_too_large, published, published.router->route_of(request.path),
            limiter, counters};
  }
  std::list<std::string> names, values;  // what `headers` views: a list never moves them
};

const RequestGate& gate(std::string_view name) {
  for (const RequestGate& g : request_gates())
    if (g.name == name) return g;
  FAIL("no gate " << name);
  return request_gates().front();
}

const ResponseFilter& filter(std::string_view name) {
  for (const ResponseFilter& f : response_filters())
    if (f.name == name) return f;
  FAIL("no filter " << name);
  return response_filters().front();
}

// The gate's answer to `w`'s request: its status, or 0 when it lets the request through (and
// then `out` must be as it was).
int status_from(std::string_view name, World& w, Response& out) {
  out = Response{};
  out.status = -1;
  if (gate(name).answer(w.input(), out)) return out.status;
  CHECK(out.status == -1);
  return 0;
}

std::string header_of(const Response& r, std::string_view name) {
  std::string all;
  for (auto& h : r.headers)
    if (h.name == name) all += (all.empty() ? "" : " | ") + h.value;
  return all;
}

}  // namespace

TEST_CASE("gates: the request gates run in this order, the route's handler last") {
  std::vector<std::string> names;
  for (auto& g : request_gates()) names.emplace_back(g.name);
  CHECK(names == std::vector<std::string>{"uri-size", "header-size", "content-length",
                                          "encoded-nul", "path-segments", "host", "body-size",
                                          "cors-preflight", "auth", "no-route", "method",
                                          "handler"});
  std::vector<std::string> filters;
  for (auto& f : response_filters()) filters.emplace_back(f.name);
  CHECK(filters == std::vector<std::string>{"conditional-get", "cors-headers"});
  // Whose answer it is in /metrics: the limits, the preflight and a 404 are "unmatched"; the rest
  // the route's.
  std::vector<std::string> counted;
  for (auto& g : request_gates())
    if (g.counts_as_route) counted.emplace_back(g.name);
  CHECK(counted == std::vector<std::string>{"auth", "method", "handler"});
}

TEST_CASE("gates: the request limits answer with the JSON error of each") {
  World w;
  Response out;
  SECTION("uri-size: 2,048 bytes of path and query pass, one more is a 414") {
    w.get("/" + std::string(2047, 'a'));
    CHECK(status_from("uri-size", w, out) == 0);
    w.get("/" + std::string(2048, 'a'));
    CHECK(status_from("uri-size", w, out) == 414);
    CHECK(*out.body ==
          R"({"error":{"status":414,"message":"request URI longer than 2048 bytes"}})");
    // The query counts, with a '=' and a '&' for each parameter.
    w.get("/a");
    static const std::string value(2043, 'v');
    w.query = {{"x", value}};
    w.sync();
    CHECK(status_from("uri-size", w, out) == 0);  // 2 + 1 + 2043 + 2
    static const std::string longer(2044, 'v');
    w.query = {{"x", longer}};
    w.sync();
    CHECK(status_from("uri-size", w, out) == 414);
  }
  SECTION("header-size: a header block over 8 KiB is a 431") {
    w.header("X-Big", std::string(8192 - 9, 'h'));  // name + value + ": " and CRLF: 8,192
    CHECK(status_from("header-size", w, out) == 0);
    w.header("X", "");
    CHECK(status_from("header-size", w, out) == 431);
    CHECK(*out.body ==
          R"({"error":{"status":431,"message":"request headers larger than 8192 bytes"}})");
  }
  SECTION("content-length: two that disagree are a 400 that closes the connection") {
    w.header("Content-Length", "5");
    w.header("content-length", "5");
    CHECK(status_from("content-length", w, out) == 0);  // the same twice: no doubt where it ends
    w.header("CONTENT-LENGTH", "6");
    CHECK(status_from("content-length", w, out) == 400);
    CHECK(*out.body ==
          R"({"error":{"status":400,"message":"conflicting Content-Length headers"}})");
    CHECK(header_of(out, "Connection") == "close");
  }
  SECTION("encoded-nul: %00 in the raw path is a 400, elsewhere it is data") {
    w.get("/a");
    w.raw_path = "/cgi/a%00.txt";
    CHECK(status_from("encoded-nul", w, out) == 400);
    CHECK(*out.body == R"j({"error":{"status":400,"message":"request path contains an )j"
                       R"j(encoded NUL byte (%00)"}})j");
    w.raw_path = "/cgi/a%0";
    CHECK(status_from("encoded-nul", w, out) == 0);
    w.raw_path = "/cgi/%2000";
    CHECK(status_from("encoded-nul", w, out) == 0);
  }
  SECTION("path-segments: '.' and '..' segments and an encoded '/' are a 400") {
    for (const char* path : {"/cgi/x/../../../etc/passwd", "/a/..", "/a/.", "/./a", "/..", "/."}) {
      INFO(path);
      w.get(path);
      CHECK(status_from("path-segments", w, out) == 400);
      CHECK(*out.body == R"j({"error":{"status":400,"message":"request path has a '.' or '..' )j"
                         R"j(segment"}})j");
    }
    for (const char* path : {"/a", "/", "/a/.b", "/a/..b", "/a..", "/.well-known/x", "/a//b"}) {
      INFO(path);
      w.get(path);
      CHECK(status_from("path-segments", w, out) == 0);
    }
    w.get("/cgi/x/a/b");
    w.raw_path = "/cgi/x/a%2Fb";
    CHECK(status_from("path-segments", w, out) == 400);
    CHECK(*out.body == R"j({"error":{"status":400,"message":"request path contains an encoded )j"
                       R"j('/' (%2F)"}})j");
    w.raw_path = "/cgi/x/a%2fb";
    CHECK(status_from("path-segments", w, out) == 400);
    w.raw_path = "/cgi/x/a%20b";
    CHECK(status_from("path-segments", w, out) == 0);
  }
  SECTION("host: a Host that is not a host and port, or two of them, is a 400") {
    for (const char* host : {"localhost", "board.local:8095", "127.0.0.1:80", "[::1]:8095",
                             "xn--bcher-kva.example", "a_b", ""}) {
      INFO(host);
      w.get("/a");
      w.header("Host", host);
      CHECK(status_from("host", w, out) == 0);
    }
    for (const char* host : {"x\"><script>", "a b", "board:80x", "[::1", "[::1]x", "a/b", "a@b",
                             "board:8095:1", "[zz::1]"}) {
      INFO(host);
      w.get("/a");
      w.header("Host", host);
      CHECK(status_from("host", w, out) == 400);
      CHECK(*out.body == R"j({"error":{"status":400,"message":"the Host header is not a host )j"
                         R"j(name or address with an optional port"}})j");
    }
    w.get("/a");
    w.header("Host", "a");
    w.header("host", "a");
    CHECK(status_from("host", w, out) == 400);
    CHECK(*out.body == R"({"error":{"status":400,"message":"more than one Host header"}})");
    w.get("/a");  // none: HTTP/1.0 (libmicrohttpd refuses an HTTP/1.1 request without one)
    CHECK(status_from("host", w, out) == 0);
  }
  SECTION("body-size: a body over 64 KiB is a 413") {
    CHECK(status_from("body-size", w, out) == 0);
    w.body_too_large = true;
    CHECK(status_from("body-size", w, out) == 413);
    CHECK(*out.body ==
          R"({"error":{"status":413,"message":"request body larger than 65536 bytes"}})");
  }
}

TEST_CASE("gates: a CORS preflight from an allowed origin is a 204 with the route's methods") {
  World w;
  Response out;
  w.get("/form");
  w.request.method = "OPTIONS";
  w.header("Origin", "http://ok.test");
  CHECK(status_from("cors-preflight", w, out) == 0);  // no Access-Control-Request-Method
  w.header("Access-Control-Request-Method", "POST");
  CHECK(status_from("cors-preflight", w, out) == 204);
  CHECK(out.content_type.empty());
  CHECK(!out.body);
  CHECK(header_of(out, "Access-Control-Allow-Methods") == "GET, HEAD, POST");
  CHECK(header_of(out, "Access-Control-Allow-Headers") ==
        "If-None-Match, Accept-Encoding, Content-Type");
  CHECK(header_of(out, "Access-Control-Max-Age") == "600");

  w.get("/form");
  w.request.method = "OPTIONS";
  w.header("Origin", "http://other.test");
  w.header("Access-Control-Request-Method", "POST");
  CHECK(status_from("cors-preflight", w, out) == 0);  // not an allowed origin: on to the route
}

TEST_CASE("gates: auth refuses a request without credentials, unless the path is public") {
  World w;
  Response out;
  CHECK(status_from("auth", w, out) == 0);  // no [http.auth]
  w.require_bearer_token();
  CHECK(status_from("auth", w, out) == 401);
  CHECK(header_of(out, "WWW-Authenticate") == "Bearer realm=\"kiwi-agent\"");
  w.header("Authorization", "Bearer tok-1");
  CHECK(status_from("auth", w, out) == 0);
  w.get("/form");
  CHECK(status_from("auth", w, out) == 0);  // public
}

TEST_CASE("gates: the route's gates answer 404, 405 with Allow, then the handler") {
  World w;
  Response out;
  w.get("/nope");
  CHECK(status_from("no-route", w, out) == 404);
  CHECK(*out.body == R"({"error":{"status":404,"message":"no route for /nope"}})");
  w.get("/a");
  CHECK(status_from("no-route", w, out) == 0);
  w.request.method = "POST";
  CHECK(status_from("method", w, out) == 405);
  CHECK(header_of(out, "Allow") == "GET, HEAD");
  CHECK(*out.body == R"({"error":{"status":405,"message":"method POST is not allowed here; use )"
                     R"(GET or HEAD"}})");
  w.request.method = "HEAD";
  CHECK(status_from("method", w, out) == 0);
  CHECK(status_from("handler", w, out) == 200);
  CHECK(*out.body == "A");
}

TEST_CASE("gates: the response filters: 304 for a known ETag, CORS headers for an origin") {
  World w;
  Response res;
  SECTION("conditional-get") {
    w.header("If-None-Match", "\"1\"");
    REQUIRE(gate("handler").answer(w.input(), res));
    filter("conditional-get").apply(w.input(), res);
    CHECK(res.status == 304);
    CHECK(!res.body);
    CHECK(res.content_type.empty());
    CHECK(header_of(res, "ETag") == "\"1\"");
    // Only a 200 to a GET or HEAD.
    w.request.method = "POST";
    REQUIRE(gate("handler").answer(w.input(), res));
    filter("conditional-get").apply(w.input(), res);
    CHECK(res.status == 200);
  }
  SECTION("cors-headers") {
    Response plain = Response::error(404, "x");
    filter("cors-headers").apply(w.input(), plain);
    CHECK(header_of(plain, "Vary") == "Origin");  // CORS on: it varies, even without an Origin
    CHECK(header_of(plain, "Access-Control-Allow-Origin").empty());
    w.header("Origin", "http://ok.test");
    Response allowed = Response::error(404, "x");
    filter("cors-headers").apply(w.input(), allowed);
    CHECK(header_of(allowed, "Access-Control-Allow-Origin") == "http://ok.test");
    w.published.cors_origins.clear();
    Response off = Response::error(404, "x");
    filter("cors-headers").apply(w.input(), off);
    CHECK(off.headers.empty());  // CORS off: nothing
  }
}

TEST_CASE("gates: the first gate that answers wins, and the answer counts as its gate says") {
  World w;
  w.require_bearer_token();
  Response res;
  SECTION("a preflight with too long a URI: the limit answers first") {
    w.get("/form" + std::string(2048, 'a'));
    w.request.method = "OPTIONS";
    w.header("Origin", "http://ok.test");
    w.header("Access-Control-Request-Method", "POST");
    CHECK(answer_request(w.input(), res) == -1);
    CHECK(res.status == 414);
    CHECK(header_of(res, "Access-Control-Allow-Origin") == "http://ok.test");  // filters: all
  }
  SECTION("a preflight comes before auth, and is not the route's") {
    w.get("/a");
    w.request.method = "OPTIONS";
    w.header("Origin", "http://ok.test");
    w.header("Access-Control-Request-Method", "GET");
    CHECK(answer_request(w.input(), res) == -1);
    CHECK(res.status == 204);
  }
  SECTION("auth before the route: an unknown path without credentials is a 401, unmatched") {
    w.get("/nope");
    CHECK(answer_request(w.input(), res) == -1);
    CHECK(res.status == 401);
  }
  SECTION("an auth refusal on a route counts as the route's") {
    w.get("/a");
    CHECK(answer_request(w.input(), res) == 0);
    CHECK(res.status == 401);
  }
  SECTION("a 405 counts as the route's, the handler's answer too") {
    w.get("/form");
    w.request.method = "DELETE";
    CHECK(answer_request(w.input(), res) == 1);
    CHECK(res.status == 405);
    w.request.method = "POST";
    CHECK(answer_request(w.input(), res) == 1);
    CHECK(res.status == 200);
    CHECK(*res.body == "A");
  }
}
