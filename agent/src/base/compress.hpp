// Compression (zlib): gzip of response bodies, which the HTTP server makes (http/response_cache.hpp
// says when), raw deflate of the history blocks the store writes, and the CRC-32 that frames
// them in the tick log (store/tick_log.hpp).
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiwi::agent {

// gzip (RFC 1952) of `data`. Thread-safe. Throws std::runtime_error if zlib fails (out of memory).
std::string gzip(std::string_view data, int level = Z_DEFAULT_COMPRESSION);

// The data in a gzip stream. Throws std::runtime_error if `data` is not a complete gzip stream.
std::string gunzip(std::string_view data);

// Raw deflate (RFC 1951, no header or checksum: the store frames and checks its rows itself) of
// `data`. Thread-safe. Throws std::runtime_error if zlib fails (out of memory).
std::string deflate_raw(std::string_view data, int level = Z_DEFAULT_COMPRESSION);

// The data in a raw deflate stream that inflates to exactly `size` bytes; false (and `out`
// unspecified) if it does not: damaged, truncated, or longer. `out` is reused (no allocation once
// it has grown to the size).
bool inflate_raw(std::string_view data, std::size_t size, std::string& out);

// CRC-32 (zlib's, as gzip's) of `data`, continuing from `crc` (0 to start). Thread-safe.
std::uint32_t crc32_of(std::string_view data, std::uint32_t crc = 0);

}  // namespace kiwi::agent
