// kiwi-agent plugin SDK: gzip for pre-computed response bodies (Response::body_gzip).
// Compress at most once per body (at start, or on the first request that asks: LazyGzip), never
// per request.
#pragma once

#include <zlib.h>

#include "kiwi/handler.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiwi {

// Bodies smaller than this are not worth compressing (headers dominate).
inline constexpr std::size_t kGzipMinBytes = 1024;

// gzip (RFC 1952) of `data`. Thread-safe. The window and hash table are sized to the body: zlib's
// defaults (32 KiB window, 64 KiB hash) cost more to set up and clear than a few-kB body costs to
// compress, and this runs every tick on a board that should idle near 0 % CPU.
inline std::string gzip(std::string_view data, int level = Z_DEFAULT_COMPRESSION) {
  int window_bits = 9;
  while (window_bits < 15 && (std::size_t{1} << window_bits) < data.size()) ++window_bits;
  const int mem_level = window_bits >= 14 ? 8 : 5;
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, window_bits + 16, mem_level, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate failed");
  out.resize(z.total_out);
  // The buffer was sized for the worst case (about the input size); a kept body holds only what
  // it needs (a 9.5 kB history body compresses to 1.4 kB).
  out.shrink_to_fit();
  return out;
}

// The data in a gzip stream (RFC 1952), e.g. one made by gzip() or at build time. Throws
// std::runtime_error if `data` is not a complete gzip stream.
inline std::string gunzip(std::string_view data) {
  z_stream z{};
  if (inflateInit2(&z, 16 + 15) != Z_OK) throw std::runtime_error("inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    const std::size_t done = out.size();
    out.resize(done + std::max<std::size_t>(data.size() * 3, 4096));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + done);
    z.avail_out = static_cast<uInt>(out.size() - done);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(out.size() - z.avail_out);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("gunzip: not a complete gzip stream");
  out.shrink_to_fit();
  return out;
}

// The gzip body for `body`, or null when it is too small to be worth it. Bodies made every tick
// use kGzipFast (a few percent larger, several times cheaper); files compressed once at start can
// afford the default level.
inline constexpr int kGzipFast = Z_BEST_SPEED;
inline Body gzip_body(const Body& body, int level = Z_DEFAULT_COMPRESSION) {
  if (!body || body->size() < kGzipMinBytes) return nullptr;
  return std::make_shared<const std::string>(gzip(*body, level));
}

// A body and its gzip, compressed on the first request that accepts gzip and shared by the later
// ones: a body made every tick costs nothing extra while no client asks for gzip (curl, scripts,
// benchmarks), and once per body when one does (browsers, Prometheus). Thread-safe.
// The gzip is made by the code of the module (agent or plugin) that constructed the LazyGzip: it
// keeps that module's gzip_body. The agent's snapshot outlives the plugins, and a shared_ptr made
// by a plugin's code would still point into it after it is unloaded.
class LazyGzip {
 public:
  explicit LazyGzip(Body body, int level = kGzipFast)
      : body_(std::move(body)), level_(level), make_(&gzip_body) {}

  const Body& body() const { return body_; }
  // Null when the body is too small to be worth compressing.
  const Body& gzip() const {
    std::call_once(once_, [this] { gzip_ = make_(body_, level_); });
    return gzip_;
  }
  // res.body, and res.body_gzip if `req` accepts gzip.
  void serve(Response& res, const Request& req) const {
    res.body = body_;
    if (req.accepts_gzip()) res.body_gzip = gzip();
  }

 private:
  Body body_;
  int level_;
  Body (*make_)(const Body&, int);
  mutable std::once_flag once_;
  mutable Body gzip_;
};

}  // namespace kiwi
