// kiwi-agent plugin SDK: gzip for pre-computed response bodies (Response::body_gzip).
// Compress once where a body is made (per tick, at start, per cached response), never per request.
#pragma once

#include <zlib.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiwi {

// Bodies smaller than this are not worth compressing (headers dominate).
inline constexpr std::size_t kGzipMinBytes = 1024;

// gzip (RFC 1952) of `data` at the default level. Thread-safe.
inline std::string gzip(std::string_view data) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
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
  return out;
}

// The gzip body for `body`, or null when it is too small to be worth it.
inline std::shared_ptr<const std::string> gzip_body(const std::shared_ptr<const std::string>& body) {
  if (!body || body->size() < kGzipMinBytes) return nullptr;
  return std::make_shared<const std::string>(gzip(*body));
}

}  // namespace kiwi
