// Authentication of HTTP requests ([http.auth]): HTTP Basic against bcrypt hashes (the shape of
// Prometheus exporter-toolkit's basic_auth_users) and bearer tokens against SHA-256 hashes, a
// cache of successful verifications, and a limit on failed attempts per client address. Knows
// nothing about libmicrohttpd: the server asks gate() before it dispatches a request.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <kiwi/handler.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "config/config.hpp"

namespace kiwi::agent {

// SHA-256 (FIPS 180-4) of `data`.
std::array<std::uint8_t, 32> sha256(std::string_view data);
// Lower-case hex of `digest`.
std::string to_hex(const std::array<std::uint8_t, 32>& digest);

// Whether `a` and `b` are equal, in a time that depends on their lengths only.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether crypt(3) of `password` with the salt and cost of `hash` gives `hash` (libxcrypt's
// crypt_rn, compared in constant time). Slow by design: about 50-250 ms at cost 10.
bool bcrypt_verify(std::string_view password, const std::string& hash);

// Failed attempts by client address. After kMaxFailures failed attempts within kWindow an address
// is blocked for kBlock: its requests are answered 429 without checking a password (so a client
// that keeps guessing costs no bcrypt). At most kMaxAddresses are tracked; when the table is full,
// expired entries go first, then the one seen longest ago. Thread-safe.
class AuthLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kMaxFailures = 5;
  static constexpr auto kWindow = std::chrono::seconds(60);
  static constexpr auto kBlock = std::chrono::seconds(60);
  static constexpr std::size_t kMaxAddresses = 4096;

  // Seconds until `address` may try again (>= 1), or 0 when it is not blocked.
  int blocked_for(const std::string& address, Clock::time_point now);
  void failed(const std::string& address, Clock::time_point now);
  // Forgets the address's failures, but not a block in force (a client that knows a password
  // does not lift the block of another one behind the same address).
  void succeeded(const std::string& address, Clock::time_point now);
  std::size_t tracked() const;

 private:
  struct Entry {
    int failures = 0;
    Clock::time_point window_start;
    Clock::time_point blocked_until;
    Clock::time_point last_seen;
  };
  void make_room(Clock::time_point now);
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> table_;
};

// The counters of /metrics (kiwi_http_auth_failures_total), kept across reloads by the server.
struct AuthCounters {
  std::atomic<std::uint64_t> invalid{0};       // credentials presented and refused
  std::atomic<std::uint64_t> rate_limited{0};  // refused unchecked: the address was blocked
};

// Who passed [http.auth] (RFC 3875's AUTH_TYPE and REMOTE_USER): the scheme, "Basic" or "Bearer",
// and for Basic the user name. Views into the Authenticator's settings, valid while it lives (a
// request holds it until it is answered). Both empty: not authenticated (auth off, a public path).
struct Identity {
  std::string_view auth_type;
  std::string_view user;
};

// One [http.auth] configuration, immutable but for its cache; the server swaps it whole on a
// reload (a new one starts with an empty cache, so a removed user is refused at once).
// Thread-safe.
class Authenticator {
 public:
  // Successful verifications kept, keyed by the SHA-256 of the Authorization header: a client that
  // sends the same credentials again (a Prometheus scraping every second) pays no bcrypt.
  static constexpr std::size_t kCacheEntries = 256;

  explicit Authenticator(HttpAuth settings);
  const HttpAuth& settings() const { return settings_; }

  // Whether `path` is open without credentials (public_paths: exact, or a prefix ending in "/*").
  bool is_public(std::string_view path) const;

  // nullopt when the request may go on (a public path, or valid credentials); otherwise the
  // answer: 401 with WWW-Authenticate, or 429 with Retry-After for a blocked address. `who`, when
  // given, is set to the identity that passed (left empty for a public path).
  std::optional<Response> gate(const Request& req, AuthLimiter& limiter, AuthCounters& counters,
                               Identity* who = nullptr) const;

 private:
  enum class Check { ok, missing, invalid, needs_bcrypt };
  // Without bcrypt: the cache, bearer tokens, and what can be refused at once. `key`: the cache
  // key of the header. `who` is set on Check::ok.
  Check quick_check(std::string_view authorization, const std::string& key, Identity& who) const;
  // base64 of "user:password"; the user's name (a key of basic_users) when the password is right.
  const std::string* check_basic(std::string_view credentials) const;
  void remember(const std::string& key, const Identity& who) const;
  Response challenge(std::string_view message) const;

  HttpAuth settings_;
  mutable std::mutex mutex_;
  struct Verified {
    std::uint64_t added;  // when, as a count
    Identity who;
  };
  mutable std::unordered_map<std::string, Verified> cache_;  // key -> what it verified
  mutable std::uint64_t added_ = 0;
};

}  // namespace kiwi::agent
