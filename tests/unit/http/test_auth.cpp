// [http.auth] below the server: SHA-256 against the FIPS 180-4 examples, bcrypt through libxcrypt,
// the limit on failed attempts and the gate a request passes before dispatch.
#include <catch2/catch.hpp>

#include "auth_support.hpp"
#include "http/auth.hpp"

using namespace kiwi;
using namespace kiwi::agent;
using kiwi_test::bcrypt_hash;

namespace {

std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 3) {
    std::uint32_t n = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<unsigned char>(in[i + 2]);
    out += k[n >> 18 & 63];
    out += k[n >> 12 & 63];
    out += i + 1 < in.size() ? k[n >> 6 & 63] : '=';
    out += i + 2 < in.size() ? k[n & 63] : '=';
  }
  return out;
}

Request request(const std::string& path, const std::string& authorization = "",
                const std::string& address = "192.0.2.7") {
  static std::vector<Param> headers;  // Request views into it
  headers.clear();
  if (!authorization.empty()) headers.push_back({"Authorization", authorization});
  Request r;
  r.method = "GET";
  r.path = path;
  r.headers = headers;
  r.remote_address = address;
  return r;
}

}  // namespace

TEST_CASE("sha256 gives the FIPS 180-4 example digests") {
  CHECK(to_hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(to_hex(sha256("abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding takes a second block.
  CHECK(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(to_hex(sha256(std::string(1'000'000, 'a'))) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("constant_time_equal compares whole strings") {
  CHECK(constant_time_equal("abc", "abc"));
  CHECK_FALSE(constant_time_equal("abc", "abd"));
  CHECK_FALSE(constant_time_equal("abc", "abcd"));
  CHECK(constant_time_equal("", ""));
}

TEST_CASE("is_bcrypt_hash takes $2a$, $2b$ and $2y$ hashes of cost 04..31 only") {
  const std::string h = bcrypt_hash("secret");
  CHECK(is_bcrypt_hash(h));
  std::string y = h;
  y[2] = 'y';
  CHECK(is_bcrypt_hash(y));
  CHECK_FALSE(is_bcrypt_hash(h.substr(0, 59)));                       // truncated
  CHECK_FALSE(is_bcrypt_hash("$2b$03$" + h.substr(7)));               // cost too low
  CHECK_FALSE(is_bcrypt_hash("$2b$32$" + h.substr(7)));               // cost too high
  CHECK_FALSE(is_bcrypt_hash("$6$" + h.substr(3)));                   // another method
  CHECK_FALSE(is_bcrypt_hash(h.substr(0, 30) + "!" + h.substr(31)));  // not bcrypt's base64
  CHECK_FALSE(is_bcrypt_hash("secret"));                              // a password, not a hash
}

TEST_CASE("bcrypt_verify accepts the password of the hash only") {
  const std::string h = bcrypt_hash("correct horse");
  CHECK(bcrypt_verify("correct horse", h));
  CHECK_FALSE(bcrypt_verify("correct hors", h));
  CHECK_FALSE(bcrypt_verify(std::string("correct horse\0x", 15), h));
}

TEST_CASE("AuthLimiter blocks an address after 5 failures in a minute, others not") {
  AuthLimiter l;
  const auto t0 = AuthLimiter::Clock::now();
  for (int i = 0; i < AuthLimiter::kMaxFailures - 1; ++i) l.failed("a", t0);
  CHECK(l.blocked_for("a", t0) == 0);
  l.failed("a", t0);
  CHECK(l.blocked_for("a", t0) == 60);
  CHECK(l.blocked_for("b", t0) == 0);
  CHECK(l.blocked_for("a", t0 + std::chrono::seconds(59)) == 1);
  CHECK(l.blocked_for("a", t0 + std::chrono::seconds(60)) == 0);
  // Failures spread over more than the window do not add up.
  for (int i = 0; i < 8; ++i) l.failed("c", t0 + std::chrono::seconds(20 * i));
  CHECK(l.blocked_for("c", t0 + std::chrono::seconds(140)) == 0);
  // A success forgets the address.
  for (int i = 0; i < 4; ++i) l.failed("d", t0);
  l.succeeded("d", t0);
  l.failed("d", t0);
  CHECK(l.blocked_for("d", t0) == 0);
  // But not a block in force.
  for (int i = 0; i < 5; ++i) l.failed("e", t0);
  l.succeeded("e", t0);
  CHECK(l.blocked_for("e", t0) == 60);
}

TEST_CASE("AuthLimiter tracks at most kMaxAddresses addresses") {
  AuthLimiter l;
  const auto t0 = AuthLimiter::Clock::now();
  for (std::size_t i = 0; i < AuthLimiter::kMaxAddresses + 500; ++i)
    l.failed("10.0." + std::to_string(i), t0 + std::chrono::milliseconds(i));
  CHECK(l.tracked() == AuthLimiter::kMaxAddresses);
}

TEST_CASE(
    "Authenticator::gate names who passed: the Basic user, Bearer without a name, nobody "
    "on a public path") {
  HttpAuth a;
  a.basic_users["prom"] = bcrypt_hash("s3cret");
  a.basic_users["grafana"] = bcrypt_hash("other");
  a.bearer_tokens_file = "tokens";
  a.bearer_token_hashes = {to_hex(sha256("tok-1"))};
  a.public_paths = {"/api/health"};
  Authenticator auth(a);
  AuthLimiter limiter;
  AuthCounters counters;
  auto who = [&](const std::string& path, const std::string& authorization) {
    Identity id{"unset", "unset"};
    auto refused = auth.gate(request(path, authorization), limiter, counters, &id);
    return refused ? std::string("refused")
                   : std::string(id.auth_type) + ":" + std::string(id.user);
  };
  CHECK(who("/api/current", "Basic " + base64("prom:s3cret")) == "Basic:prom");
  CHECK(who("/api/current", "Basic " + base64("prom:s3cret")) == "Basic:prom");  // the cache
  CHECK(who("/api/current", "Basic " + base64("grafana:other")) == "Basic:grafana");
  CHECK(who("/api/current", "Bearer tok-1") == "Bearer:");
  CHECK(who("/api/current", "Basic " + base64("prom:wrong")) == "refused");
  CHECK(who("/api/health", "") == "unset:unset");  // public: not authenticated, left alone
}

TEST_CASE("Authenticator::gate: public paths, Basic, Bearer, 401 and 429") {
  HttpAuth a;
  a.basic_users["prom"] = bcrypt_hash("s3cret");
  a.bearer_tokens_file = "tokens";
  a.bearer_token_hashes = {to_hex(sha256("tok-1"))};
  a.public_paths = {"/api/health", "/assets/*"};
  Authenticator auth(a);
  AuthLimiter limiter;
  AuthCounters counters;

  CHECK_FALSE(auth.gate(request("/api/health"), limiter, counters));
  CHECK_FALSE(auth.gate(request("/assets/app.js"), limiter, counters));
  CHECK_FALSE(
      auth.gate(request("/api/current", "Basic " + base64("prom:s3cret")), limiter, counters));
  CHECK_FALSE(auth.gate(request("/api/current", "basic " + base64("prom:s3cret")), limiter,
                        counters));  // the scheme is case-insensitive
  CHECK_FALSE(auth.gate(request("/metrics", "Bearer tok-1"), limiter, counters));
  CHECK(counters.invalid == 0);

  auto missing = auth.gate(request("/api/current"), limiter, counters);
  REQUIRE(missing);
  CHECK(missing->status == 401);
  CHECK(*missing->body == R"({"error":{"status":401,"message":"authentication required"}})");
  int challenges = 0;
  for (auto& h : missing->headers)
    if (h.name == "WWW-Authenticate") ++challenges;
  CHECK(challenges == 2);
  CHECK(counters.invalid == 0);  // no credentials: not an attempt

  for (const std::string& bad :
       {"Basic " + base64("prom:wrong"), "Basic " + base64("nobody:s3cret"),
        std::string("Bearer tok-2"), std::string("Basic !!!"), std::string("Digest x")}) {
    auto r = auth.gate(request("/api/current", bad, "198.51.100.1"), limiter, counters);
    REQUIRE(r);
    CHECK(r->status == 401);
  }
  CHECK(counters.invalid == 5);
  // Blocked now: a password is not even checked ...
  auto blocked = auth.gate(request("/api/current", "Basic " + base64("prom:other"), "198.51.100.1"),
                           limiter, counters);
  REQUIRE(blocked);
  CHECK(blocked->status == 429);
  CHECK(counters.rate_limited == 1);
  // ... but credentials verified before (the cache) and bearer tokens cost no bcrypt: they pass.
  CHECK_FALSE(auth.gate(request("/api/current", "Basic " + base64("prom:s3cret"), "198.51.100.1"),
                        limiter, counters));
  CHECK_FALSE(
      auth.gate(request("/api/current", "Bearer tok-1", "198.51.100.1"), limiter, counters));
  // Which did not lift the block for the others.
  auto still = auth.gate(request("/api/current", "Basic " + base64("prom:guess"), "198.51.100.1"),
                         limiter, counters);
  REQUIRE(still);
  CHECK(still->status == 429);
}
