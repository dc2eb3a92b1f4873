// kiwi-agent plugin SDK: UTF-8 checks. JSON and the Prometheus exposition both require UTF-8;
// text from files, plugins and requests may be anything, so the host makes it well-formed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiwi {

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF) that starts `s`, or 0 if none does.
inline std::size_t utf8_sequence_length(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  return n;
}

// Whether `s` is well-formed UTF-8.
inline bool is_valid_utf8(std::string_view s) {
  while (!s.empty()) {
    const std::size_t n = utf8_sequence_length(s);
    if (n == 0) return false;
    s.remove_prefix(n);
  }
  return true;
}

// `s` with each byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD (the
// replacement character, EF BF BD); text that is valid UTF-8 is returned as it is. The host
// applies this to every label value and message a plugin gives it (JSON and the Prometheus
// exposition both require UTF-8).
inline std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const std::size_t n = utf8_sequence_length(s);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      s.remove_prefix(1);
    } else {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
    }
  }
  return out;
}

// `s` cut to at most `max` bytes without splitting a UTF-8 sequence (only continuation bytes are
// backed over), with "...(N bytes)" after it when it was cut.
inline std::string truncate_utf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::size_t end = max;
  for (int k = 0; k < 3 && end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80; ++k)
    --end;
  return std::string(s.substr(0, end)) + "...(" + std::to_string(s.size()) + " bytes)";
}

}  // namespace kiwi
