// The server's gzip (agent/src/base/compress.hpp, agent/src/http/response_cache.hpp): what it sends
// as Content-Encoding: gzip, which types it compresses, and the cache that compresses a body once
// by its identity.
#include <catch2/catch.hpp>

#include <atomic>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "base/compress.hpp"
#include "http/response_cache.hpp"

using kiwi::Body;
using kiwi::agent::compressible_type;
using kiwi::agent::GzipCache;

namespace {

// Text that compresses about 5:1, like the agent's JSON; `seed` makes each one different.
std::string json_text(std::size_t bytes, int seed = 0) {
  std::string text;
  for (int i = 0; text.size() < bytes; ++i)
    text += "{\"ts\":" + std::to_string(1700000000 + i * 7 + seed) + ",\"v\":0.25},";
  text.resize(bytes);
  return text;
}

Body body_of(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace

TEST_CASE("gzip: gzip and gunzip round-trip, and a kept gzip holds only its bytes") {
  const std::string text = json_text(8000);
  const std::string gz = kiwi::agent::gzip(text);
  CHECK(gz.size() < text.size() / 4);
  CHECK(gz.capacity() < gz.size() + 32);  // not the worst-case buffer deflate was given
  CHECK(static_cast<unsigned char>(gz[0]) == 0x1f);
  CHECK(static_cast<unsigned char>(gz[1]) == 0x8b);
  CHECK(kiwi::agent::gunzip(gz) == text);
  CHECK(kiwi::agent::gunzip(kiwi::agent::gzip("")).empty());
  // Output many times the input: the buffer grows as inflate needs.
  const std::string zeros(1 << 20, '\0');
  CHECK(kiwi::agent::gunzip(kiwi::agent::gzip(zeros, Z_BEST_SPEED)) == zeros);
}

TEST_CASE("gzip: gunzip refuses what is not a complete gzip stream") {
  const std::string gz = kiwi::agent::gzip(std::string(5000, 'x'));
  CHECK_THROWS_WITH(kiwi::agent::gunzip(gz.substr(0, gz.size() / 2)),
                    Catch::Contains("not a complete gzip stream"));
  CHECK_THROWS_WITH(kiwi::agent::gunzip("plain text, not gzip"),
                    Catch::Contains("not a complete gzip stream"));
  CHECK_THROWS_WITH(kiwi::agent::gunzip(""), Catch::Contains("not a complete gzip stream"));
}

TEST_CASE("gzip: textual types are compressed, already compressed ones are not") {
  for (auto t : {"text/html; charset=utf-8", "text/plain; version=0.0.4; charset=utf-8",
                 "application/json", "Application/JSON ; charset=utf-8", "application/javascript",
                 "image/svg+xml", "application/problem+json", "application/atom+xml", "text/css"})
    CHECK(compressible_type(t));
  for (auto t : {"image/png", "application/octet-stream", "application/gzip", "image/jpeg", "",
                 "application/jsonx", "font/woff2"})
    CHECK_FALSE(compressible_type(t));
}

TEST_CASE("gzip: the cache compresses a body once however many workers ask at once") {
  GzipCache cache;
  const Body body = body_of(json_text(256 * 1024));  // some ms of deflate: the others arrive
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<Body> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      got[static_cast<std::size_t>(i)] = cache.get(body);
    });
  for (auto& t : threads) t.join();
  CHECK(cache.stats().compressions == 1);
  CHECK(cache.stats().hits == kThreads - 1);
  REQUIRE(got[0]);
  for (auto& g : got) CHECK(g.identity() == got[0].identity());
  CHECK(kiwi::agent::gunzip(*got[0]) == *body);
  // Asked again later: the same gzip, no new compression.
  CHECK(cache.get(body).identity() == got[0].identity());
  CHECK(cache.stats().compressions == 1);
  CHECK(cache.stats().entries == 1);
  CHECK(cache.stats().bytes == body->size() + got[0]->size());
}

TEST_CASE("gzip: the cache keys by the bytes' address and size, not by their content") {
  GzipCache cache;
  const std::string text = json_text(4000);
  const Body a = body_of(text), b = body_of(text);  // equal bytes, two bodies
  cache.get(a);
  cache.get(b);
  CHECK(cache.stats().compressions == 2);
  // A view of the first 2000 bytes of `a`: the same address, other bytes.
  const Body prefix(a.keep(), a->substr(0, 2000));
  CHECK(kiwi::agent::gunzip(*cache.get(prefix)) == text.substr(0, 2000));
  CHECK(cache.stats().compressions == 3);
}

TEST_CASE("gzip: the cache holds at most max_entries, least recently used out first") {
  GzipCache cache({3, 1 << 20});
  std::vector<Body> bodies;
  for (int i = 0; i < 5; ++i) bodies.push_back(body_of(json_text(2000, i)));
  for (int i = 0; i < 3; ++i) cache.get(bodies[static_cast<std::size_t>(i)]);
  cache.get(bodies[0]);  // now the most recently used: 1 goes first
  cache.get(bodies[3]);
  cache.get(bodies[4]);
  auto s = cache.stats();
  CHECK(s.entries == 3);
  CHECK(s.evictions == 2);
  CHECK(s.compressions == 5);
  cache.get(bodies[0]);  // kept
  CHECK(cache.stats().compressions == 5);
  cache.get(bodies[1]);  // evicted: compressed again
  CHECK(cache.stats().compressions == 6);
}

TEST_CASE(
    "gzip: the cache holds at most max_bytes of bodies and gzip, and no body above a quarter") {
  GzipCache cache({100, 16 * 1024});
  std::vector<Body> bodies;
  for (int i = 0; i < 20; ++i) {
    bodies.push_back(body_of(json_text(3000, i)));
    cache.get(bodies.back());
    CHECK(cache.stats().bytes <= 16 * 1024);
  }
  CHECK(cache.stats().entries >= 4);
  CHECK(cache.stats().entries < 6);
  // 4 KiB + 1: compressed (the caller gets its gzip) but not kept.
  const Body big = body_of(json_text(4 * 1024 + 1));
  const auto before = cache.stats();
  CHECK(kiwi::agent::gunzip(*cache.get(big)) == *big);
  cache.get(big);
  CHECK(cache.stats().compressions == before.compressions + 2);
  CHECK(cache.stats().entries == before.entries);
  // Compressed for one request, so at that level; a kept body at the cached one.
  const auto fast = kiwi::agent::gzip(*big, kiwi::agent::kGzipPerRequestLevel);
  REQUIRE(fast != kiwi::agent::gzip(*big, kiwi::agent::kGzipCachedLevel));
  CHECK(*cache.get(big) == fast);
  CHECK(*cache.get(bodies.back()) ==
        kiwi::agent::gzip(*bodies.back(), kiwi::agent::kGzipCachedLevel));
}

TEST_CASE("gzip: an entry keeps its body and its code alive until it goes") {
  GzipCache cache({1, 1 << 20});
  auto text = std::make_shared<const std::string>(json_text(3000));
  auto code = std::make_shared<int>(1);  // stands for a plugin's library
  std::weak_ptr<const std::string> text_alive = text;
  std::weak_ptr<int> code_alive = code;
  cache.get(Body(std::move(text)), std::move(code));
  CHECK_FALSE(text_alive.expired());  // the bytes' address cannot be reused while cached
  CHECK_FALSE(code_alive.expired());
  cache.get(body_of(json_text(3000, 1)));  // evicts it
  CHECK(text_alive.expired());
  CHECK(code_alive.expired());
}

TEST_CASE("gzip: an incompressible body has no gzip, and that is kept too") {
  GzipCache cache;
  std::string noise(4096, '\0');
  std::uint32_t x = 2463534242u;
  for (char& c : noise) {  // xorshift: no redundancy for deflate to find
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    c = static_cast<char>(x);
  }
  const Body body = body_of(noise);
  CHECK_FALSE(cache.get(body));
  CHECK_FALSE(cache.get(body));
  CHECK(cache.stats().compressions == 1);
}
