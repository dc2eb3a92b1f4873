// The router on in-process handlers: which method reaches a handler, and the 405 otherwise.
#include <catch2/catch.hpp>

#include "http/router.hpp"

using namespace kiwi;
using namespace kiwi::agent;

namespace {

// Answers 200 with the method it saw; takes the methods it is given.
class MethodHandler final : public Handler {
 public:
  explicit MethodHandler(std::string methods) : methods_(std::move(methods)) {}
  Response handle(const Request& r) override {
    Response res;
    res.content_type = "text/plain";
    res.body = std::make_shared<const std::string>(r.method);
    return res;
  }
  std::string_view methods() const override { return methods_; }

 private:
  std::string methods_;
};

class DefaultHandler final : public Handler {
 public:
  Response handle(const Request&) override { return {}; }
};

Route route(const std::string& path, std::unique_ptr<Handler> h) {
  auto instance = std::make_shared<PluginInstance<Handler>>();
  instance->object = std::move(h);
  return {path, std::move(instance)};
}

Response call(const Router& router, std::string_view method, std::string_view path) {
  Request r;
  r.method = method;
  r.path = path;
  return router.dispatch(r);
}

std::string allow_of(const Response& r) {
  for (auto& h : r.headers)
    if (h.name == "Allow") return h.value;
  return "(none)";
}

}  // namespace

TEST_CASE("router: a handler gets GET and HEAD unless it lists more methods") {
  Router router(
      {route("/plain", std::make_unique<DefaultHandler>()),
       route("/cgi/*", std::make_unique<MethodHandler>("GET, HEAD, POST, PUT, PATCH, DELETE"))});
  CHECK(call(router, "GET", "/plain").status == 200);
  CHECK(call(router, "HEAD", "/plain").status == 200);
  auto post = call(router, "POST", "/plain");
  CHECK(post.status == 405);
  CHECK(allow_of(post) == "GET, HEAD");
  CHECK(*post.body ==
        R"({"error":{"status":405,"message":"method POST is not allowed here; use GET or HEAD"}})");

  for (auto m : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}) {
    auto r = call(router, m, "/cgi/x");
    CHECK(r.status == 200);
    CHECK(*r.body == m);
  }
  auto options = call(router, "OPTIONS", "/cgi/x");
  CHECK(options.status == 405);
  CHECK(allow_of(options) == "GET, HEAD, POST, PUT, PATCH, DELETE");
  CHECK(*options.body == R"({"error":{"status":405,"message":"method OPTIONS is not allowed )"
                         R"(here; use GET, HEAD, POST, PUT, PATCH or DELETE"}})");
}

TEST_CASE("router: methods are matched as whole, case-sensitive tokens") {
  CHECK(method_listed("GET, HEAD", "GET"));
  CHECK(method_listed("GET, HEAD", "HEAD"));
  CHECK(method_listed("GET,HEAD", "HEAD"));
  CHECK(method_listed(" POST ", "POST"));
  CHECK_FALSE(method_listed("GET, HEAD", "HEA"));
  CHECK_FALSE(method_listed("GET, HEAD", "EAD"));
  CHECK_FALSE(method_listed("GET, HEAD", "get"));
  CHECK_FALSE(method_listed("GET, HEAD", "GET, HEAD"));
  CHECK_FALSE(method_listed("GET, HEAD", ""));
  CHECK_FALSE(method_listed("", "GET"));
  CHECK_FALSE(method_listed("PATCHES", "PATCH"));
  Router router({route("/p", std::make_unique<MethodHandler>("PATCHES"))});
  CHECK(call(router, "PATCH", "/p").status == 405);
}
