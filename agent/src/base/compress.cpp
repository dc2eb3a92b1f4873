#include "base/compress.hpp"

#include <algorithm>
#include <stdexcept>

namespace kiwi::agent {

namespace {
// gzip (format 16) or raw deflate (format -1: window bits negated).
std::string compress(std::string_view data, int level, int format) {
  // The window and hash table are sized to the data: zlib's defaults (32 KiB window, 64 KiB
  // hash) cost more to set up and clear than a few kB cost to compress.
  int window_bits = 9;
  while (window_bits < 15 && (std::size_t{1} << window_bits) < data.size()) ++window_bits;
  const int mem_level = window_bits >= 14 ? 8 : 5;
  z_stream z{};
  const int bits = format < 0 ? -window_bits : window_bits + format;
  if (deflateInit2(&z, level, Z_DEFLATED, bits, mem_level, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate failed");
  out.resize(z.total_out);
  // The buffer was sized for the worst case (about the input size); a kept gzip holds only what it
  // needs (a 9.5 kB history body compresses to 1.4 kB).
  out.shrink_to_fit();
  return out;
}
}  // namespace

std::string gzip(std::string_view data, int level) {
  return compress(data, level, 16);
}

std::string deflate_raw(std::string_view data, int level) {
  return compress(data, level, -1);
}

bool inflate_raw(std::string_view data, std::size_t size, std::string& out) {
  out.resize(size);
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) throw std::runtime_error("inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  // One byte of room past `size`: a stream that inflates to more is found, not cut short.
  char spare;
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(size);
  int rc = inflate(&z, Z_FINISH);
  if (rc == Z_BUF_ERROR && z.avail_out == 0) {
    z.next_out = reinterpret_cast<Bytef*>(&spare);
    z.avail_out = 1;
    rc = inflate(&z, Z_FINISH);
  }
  const bool ok = rc == Z_STREAM_END && z.total_out == size && z.avail_in == 0;
  inflateEnd(&z);
  return ok;
}

std::string gunzip(std::string_view data) {
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

std::uint32_t crc32_of(std::string_view data, std::uint32_t crc) {
  // zlib's length is a uInt: long views go in pieces.
  while (!data.empty()) {
    const auto n = static_cast<uInt>(std::min<std::size_t>(data.size(), 1u << 30));
    crc = static_cast<std::uint32_t>(::crc32(crc, reinterpret_cast<const Bytef*>(data.data()), n));
    data.remove_prefix(n);
  }
  return crc;
}

}  // namespace kiwi::agent
