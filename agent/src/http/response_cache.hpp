// What the HTTP server compresses and the cache that compresses a body once. Handlers return plain
// bodies; the server decides whether and how to compress them (as h2o's compress filter does), so
// no compressed bytes and no zlib cross the plugin boundary.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <kiwi/handler.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kiwi::agent {

// Bodies smaller than this go out plain even to a client that accepts gzip. Measured on the
// agent's /api/current JSON (x86 VM): 1 KiB shrinks by about 720 bytes for 13 µs of deflate,
// 512 B by 270 B for 9 µs, 256 B by under 100 B (about what the response headers weigh) for 6 µs.
inline constexpr std::size_t kGzipMinBytes = 1024;

// Levels: a body cached by identity is compressed once and served many times, so it gets the
// default level; one compressed per request (no ETag) gets the fastest, as its cost is paid again
// by every request.
inline constexpr int kGzipCachedLevel = Z_DEFAULT_COMPRESSION;
inline constexpr int kGzipPerRequestLevel = Z_BEST_SPEED;

// Whether a Content-Type names a format that compresses well (text, JSON, JavaScript, XML, SVG):
// its responses get "Vary: Accept-Encoding", and gzip for a client that accepts it.
bool compressible_type(std::string_view content_type);

// Whether `r` has a header named `name` (ASCII case-insensitive).
bool has_header(const Response& r, std::string_view name);

// Whether the server chooses the encoding of `r` (gzip or identity by Accept-Encoding): a textual
// type, not encoded by the handler itself (a CGI program may send its own Content-Encoding).
bool negotiates_encoding(const Response& r);

// Whether `r` goes out gzip-compressed to a client that accepts gzip (unless it does not shrink).
bool gzip_candidate(const Response& r);

// The gzip of bodies served again and again (those with an ETag: /api/current, /metrics, dashboard
// files), computed once per body and kept, found by the body's identity (the address and size of
// its bytes). An entry holds the Body itself, so those bytes cannot be freed and their address
// reused for other bytes while the entry exists, and the code that made it (a plugin's library:
// the body may be freed through that code). Least recently used entries go first beyond
// `max_entries` or `max_bytes` (body and gzip bytes counted; a body also held by its handler
// counts too: the cache may be what keeps it alive). A body larger than a quarter of
// `max_bytes` is not kept: get() compresses it and forgets it.
//
// Thread-safe. get() holds the lock only to look up and insert; the compression runs outside it,
// and a second caller asking for the same body while the first compresses waits for that one
// compression instead of making its own.
class GzipCache {
 public:
  // Small: at 1 Hz /api/current and /metrics each add a body a second, and an entry is worth
  // keeping only while its body is the one served (a browser revalidates a dashboard file with
  // If-None-Match and gets a 304, which needs no gzip). 32 entries measured some 0.5 MiB more RSS
  // than the per-body gzip before (old snapshots and their gzip, kept until pushed out).
  struct Limits {
    std::size_t max_entries = 16;
    std::size_t max_bytes = 1024 * 1024;
  };
  struct Stats {
    std::uint64_t compressions = 0;  // deflate runs made by get() (kept or not)
    std::uint64_t hits = 0;          // get() calls answered by an entry made before
    std::uint64_t evictions = 0;
    std::size_t entries = 0;
    std::size_t bytes = 0;  // body + gzip bytes of the entries whose gzip is made
  };

  GzipCache() : GzipCache(Limits{}) {}
  explicit GzipCache(Limits limits) : limits_(limits) {}
  GzipCache(const GzipCache&) = delete;
  GzipCache& operator=(const GzipCache&) = delete;

  // The gzip of `body` (at kGzipCachedLevel; kGzipPerRequestLevel for a body too large to keep),
  // or a null Body when it would not be smaller than
  // the body itself. `code` is kept with the entry and released after the body. Throws
  // std::runtime_error if zlib fails (nothing is cached then).
  Body get(const Body& body, std::shared_ptr<const void> code = nullptr);

  Stats stats() const;
  void clear();

 private:
  struct Key {
    const void* data;
    std::size_t size;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.data) ^ (k.size * 0x9e3779b97f4a7c15ull);
    }
  };
  struct Entry {
    std::shared_ptr<const void> code;  // declared first: released after `body`
    Body body;
    Key key{};
    std::once_flag once;
    Body gzip;              // set once, inside `once`
    std::size_t bytes = 0;  // counted in bytes_ once the gzip is made (under mutex_)
    bool cached = true;     // still in the list (under mutex_)
  };
  using List = std::list<std::shared_ptr<Entry>>;

  void evict_over_limits();  // mutex_ held

  const Limits limits_;
  mutable std::mutex mutex_;
  List lru_;  // most recently used first
  std::unordered_map<Key, List::iterator, KeyHash> index_;
  std::size_t bytes_ = 0;
  std::uint64_t compressions_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace kiwi::agent
