#include "http/auth.hpp"

#include <crypt.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace kiwi::agent {

namespace {

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

void compress(std::array<std::uint32_t, 8>& h, const unsigned char* block) {
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = std::uint32_t(block[4 * i]) << 24 | std::uint32_t(block[4 * i + 1]) << 16 |
           std::uint32_t(block[4 * i + 2]) << 8 | std::uint32_t(block[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t t1 =
        k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const std::uint32_t t2 =
        (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

// Base64 (RFC 4648, with padding as RFC 7617's Basic credentials use it); nullopt if malformed.
std::optional<std::string> base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = in[i + j];
      if (c == '=' && i + 4 == in.size() && j >= 2) {
        v[j] = 0;
        ++pad;
        continue;
      }
      if (pad) return std::nullopt;  // data after '='
      v[j] = value(c);
      if (v[j] < 0) return std::nullopt;
    }
    const std::uint32_t n = std::uint32_t(v[0]) << 18 | std::uint32_t(v[1]) << 12 |
                            std::uint32_t(v[2]) << 6 | std::uint32_t(v[3]);
    out.push_back(static_cast<char>(n >> 16));
    if (pad < 2) out.push_back(static_cast<char>(n >> 8 & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xff));
  }
  return out;
}

// `s` without leading and trailing spaces and tabs.
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether `value` starts with the auth scheme `scheme` and a space (the scheme is
// case-insensitive, RFC 9110 section 11.1); `rest` gets what follows, trimmed.
bool has_scheme(std::string_view value, std::string_view scheme, std::string_view& rest) {
  if (value.size() <= scheme.size() || value[scheme.size()] != ' ') return false;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if ((value[i] | 0x20) != (scheme[i] | 0x20)) return false;
  rest = trim(value.substr(scheme.size() + 1));
  return true;
}

}  // namespace

std::array<std::uint8_t, 32> sha256(std::string_view data) {
  std::array<std::uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  while (n >= 64) {
    compress(h, p);
    p += 64;
    n -= 64;
  }
  // The last block(s): the rest, 0x80, zeros, the length in bits (big-endian).
  unsigned char tail[128] = {};
  std::memcpy(tail, p, n);
  tail[n] = 0x80;
  const std::size_t blocks = n + 1 + 8 <= 64 ? 1 : 2;
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i)
    tail[blocks * 64 - 1 - static_cast<std::size_t>(i)] =
        static_cast<unsigned char>(bits >> (8 * i));
  for (std::size_t b = 0; b < blocks; ++b) compress(h, tail + 64 * b);
  std::array<std::uint8_t, 32> out;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      out[static_cast<std::size_t>(4 * i + j)] =
          static_cast<std::uint8_t>(h[static_cast<std::size_t>(i)] >> (24 - 8 * j));
  return out;
}

std::string to_hex(const std::array<std::uint8_t, 32>& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (auto b : digest) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool bcrypt_verify(std::string_view password, const std::string& hash) {
  // crypt(3) takes a C string: a password with a NUL in it is never right.
  if (password.find('\0') != std::string_view::npos) return false;
  const std::string phrase(password);
  auto data = std::make_unique<crypt_data>();  // zeroed, as crypt_rn wants it the first time
  const char* out = crypt_rn(phrase.c_str(), hash.c_str(), data.get(), sizeof *data);
  return out && constant_time_equal(out, hash);
}

// ---- AuthLimiter --------------------------------------------------------------------------------

int AuthLimiter::blocked_for(const std::string& address, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto it = table_.find(address);
  if (it == table_.end() || it->second.blocked_until <= now) return 0;
  it->second.last_seen = now;
  const auto left = std::chrono::ceil<std::chrono::seconds>(it->second.blocked_until - now);
  return static_cast<int>(std::max<std::int64_t>(1, left.count()));
}

void AuthLimiter::failed(const std::string& address, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto it = table_.find(address);
  if (it == table_.end()) {
    make_room(now);
    it = table_.emplace(address, Entry{0, now, {}, now}).first;
  }
  Entry& e = it->second;
  if (now - e.window_start >= kWindow) {
    e.failures = 0;
    e.window_start = now;
  }
  e.last_seen = now;
  if (++e.failures >= kMaxFailures) {
    e.blocked_until = now + kBlock;
    e.failures = 0;
    e.window_start = now + kBlock;
  }
}

void AuthLimiter::succeeded(const std::string& address, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto it = table_.find(address);
  if (it != table_.end() && it->second.blocked_until <= now) table_.erase(it);
}

std::size_t AuthLimiter::tracked() const {
  std::lock_guard lock(mutex_);
  return table_.size();
}

void AuthLimiter::make_room(Clock::time_point now) {
  if (table_.size() < kMaxAddresses) return;
  for (auto it = table_.begin(); it != table_.end();)
    if (it->second.blocked_until <= now && now - it->second.window_start >= kWindow)
      it = table_.erase(it);
    else
      ++it;
  if (table_.size() < kMaxAddresses) return;
  auto oldest = std::min_element(table_.begin(), table_.end(), [](auto& a, auto& b) {
    return a.second.last_seen < b.second.last_seen;
  });
  table_.erase(oldest);
}

// ---- Authenticator ------------------------------------------------------------------------------

Authenticator::Authenticator(HttpAuth settings) : settings_(std::move(settings)) {}

bool Authenticator::is_public(std::string_view path) const {
  for (auto& p : settings_.public_paths) {
    if (p.ends_with("/*")) {
      const std::string_view prefix(p.data(), p.size() - 1);
      if (path.starts_with(prefix) && path.size() > prefix.size()) return true;
    } else if (p == path) {
      return true;
    }
  }
  return false;
}

Authenticator::Check Authenticator::quick_check(std::string_view value, const std::string& key,
                                                Identity& who) const {
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      who = it->second.who;
      return Check::ok;
    }
  }
  std::string_view rest;
  if (has_scheme(value, "Bearer", rest)) {
    if (rest.empty()) return Check::invalid;
    const std::string presented = to_hex(sha256(rest));
    bool found = false;  // every hash compared: the time does not say which one matched
    for (auto& h : settings_.bearer_token_hashes) found |= constant_time_equal(presented, h);
    if (found) who = {"Bearer", {}};  // a token names no user (the file holds hashes only)
    return found ? Check::ok : Check::invalid;
  }
  if (has_scheme(value, "Basic", rest))
    return settings_.basic_users.empty() ? Check::invalid : Check::needs_bcrypt;
  return Check::invalid;
}

const std::string* Authenticator::check_basic(std::string_view credentials) const {
  auto decoded = base64_decode(credentials);
  if (!decoded) return nullptr;
  const std::size_t colon = decoded->find(':');
  if (colon == std::string::npos) return nullptr;
  const std::string user = decoded->substr(0, colon);
  const std::string_view password = std::string_view(*decoded).substr(colon + 1);
  auto it = settings_.basic_users.find(user);
  if (it == settings_.basic_users.end()) {
    // An unknown user costs a bcrypt too, so the time does not tell which names exist.
    bcrypt_verify(password, settings_.basic_users.begin()->second);
    return nullptr;
  }
  return bcrypt_verify(password, it->second) ? &it->first : nullptr;
}

void Authenticator::remember(const std::string& key, const Identity& who) const {
  std::lock_guard lock(mutex_);
  if (cache_.size() >= kCacheEntries) {
    auto oldest = std::min_element(cache_.begin(), cache_.end(), [](auto& a, auto& b) {
      return a.second.added < b.second.added;
    });
    cache_.erase(oldest);
  }
  cache_.emplace(key, Verified{++added_, who});
}

Response Authenticator::challenge(std::string_view message) const {
  Response res = Response::error(401, message);
  if (!settings_.basic_users.empty())
    res.headers.push_back({"WWW-Authenticate", "Basic realm=\"kiwi-agent\", charset=\"UTF-8\""});
  if (!settings_.bearer_tokens_file.empty())
    res.headers.push_back({"WWW-Authenticate", "Bearer realm=\"kiwi-agent\""});
  res.headers.push_back({"Cache-Control", "no-store"});
  return res;
}

std::optional<Response> Authenticator::gate(const Request& req, AuthLimiter& limiter,
                                            AuthCounters& counters, Identity* who) const {
  if (!settings_.enabled() || is_public(req.path)) return std::nullopt;
  const auto header = req.header("Authorization");
  if (!header) return challenge("authentication required");
  const std::string_view value = trim(*header);
  const auto digest = sha256(value);
  const std::string key(reinterpret_cast<const char*>(digest.data()), digest.size());
  const auto now = AuthLimiter::Clock::now();
  const std::string address(req.remote_address);
  Identity verified;
  Check check = quick_check(value, key, verified);
  // A blocked address gets only what needs no bcrypt: the cache and bearer tokens.
  if (check != Check::ok) {
    if (const int wait = limiter.blocked_for(address, now)) {
      counters.rate_limited.fetch_add(1, std::memory_order_relaxed);
      Response res =
          Response::error(429, "too many failed authentication attempts from " + address +
                                   "; retry in " + std::to_string(wait) + " s");
      res.headers.push_back({"Retry-After", std::to_string(wait)});
      res.headers.push_back({"Cache-Control", "no-store"});
      return res;
    }
  }
  if (check == Check::needs_bcrypt) {
    std::string_view rest;
    has_scheme(value, "Basic", rest);
    if (const std::string* user = check_basic(rest)) {
      verified = {"Basic", *user};
      check = Check::ok;
      remember(key, verified);
    } else {
      check = Check::invalid;
    }
  }
  if (check == Check::ok) {
    limiter.succeeded(address, now);
    if (who) *who = verified;
    return std::nullopt;
  }
  counters.invalid.fetch_add(1, std::memory_order_relaxed);
  limiter.failed(address, now);
  return challenge("invalid credentials");
}

}  // namespace kiwi::agent
