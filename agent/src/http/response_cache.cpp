#include "http/response_cache.hpp"

#include <algorithm>
#include <stdexcept>

#include "base/compress.hpp"

namespace kiwi::agent {

bool compressible_type(std::string_view type) {
  type = type.substr(0, type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  std::string lower(type);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  const std::string_view t = lower;
  if (t.starts_with("text/")) return true;
  // Not images other than SVG and icons (PNG, JPEG are compressed already), not octet-stream.
  static constexpr std::string_view kTypes[] = {"application/json", "application/javascript",
                                                "application/xml", "image/svg+xml", "image/x-icon"};
  for (auto k : kTypes)
    if (t == k) return true;
  // Structured syntax suffixes (RFC 6839): application/problem+json, application/atom+xml.
  return t.starts_with("application/") && (t.ends_with("+json") || t.ends_with("+xml"));
}

bool has_header(const Response& r, std::string_view name) {
  for (const auto& h : r.headers)
    if (h.name.size() == name.size() &&
        std::equal(name.begin(), name.end(), h.name.begin(),
                   [](char a, char b) { return (a | 0x20) == (b | 0x20); }))
      return true;
  return false;
}

bool negotiates_encoding(const Response& r) {
  return compressible_type(r.content_type) && !has_header(r, "Content-Encoding");
}

bool gzip_candidate(const Response& r) {
  return r.body && r.body->size() >= kGzipMinBytes && negotiates_encoding(r);
}

Body GzipCache::get(const Body& body, std::shared_ptr<const void> code) {
  const Key key{body.identity(), body->size()};
  std::shared_ptr<Entry> e;
  {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      e = lru_.front();
      ++hits_;
    } else if (limits_.max_entries > 0 && body->size() <= limits_.max_bytes / 4) {
      e = std::make_shared<Entry>();
      e->code = std::move(code);
      e->body = body;
      e->key = key;
      lru_.push_front(e);
      index_.emplace(key, lru_.begin());
      evict_over_limits();
    } else {
      ++compressions_;
    }
  }
  auto make = [&](int level) -> Body {
    auto out = std::make_shared<const std::string>(gzip(*body, level));
    if (out->size() >= body->size()) return nullptr;  // incompressible: send it as it is
    return out;
  };
  // Too large to keep: compressed for this request alone, so at the per-request level (a year's
  // chart, 580 kB of JSON: 40 ms at the default level on the 2-core VM, year_http.py).
  if (!e) return make(kGzipPerRequestLevel);

  try {
    std::call_once(e->once, [&] {
      e->gzip = make(kGzipCachedLevel);
      std::lock_guard lock(mutex_);
      ++compressions_;
      if (e->cached) {
        e->bytes = e->body->size() + (e->gzip ? e->gzip->size() : 0);
        bytes_ += e->bytes;
        evict_over_limits();
      }
    });
  } catch (...) {
    // Nothing kept for a failed compression; a later request tries again.
    std::lock_guard lock(mutex_);
    if (e->cached) {
      e->cached = false;
      lru_.erase(index_.at(key));
      index_.erase(key);
    }
    throw;
  }
  return e->gzip;
}

void GzipCache::evict_over_limits() {
  while (!lru_.empty() && (lru_.size() > limits_.max_entries || bytes_ > limits_.max_bytes)) {
    Entry& old = *lru_.back();
    old.cached = false;
    bytes_ -= old.bytes;
    index_.erase(old.key);
    lru_.pop_back();  // the entry goes when the last get() using it returns
    ++evictions_;
  }
}

GzipCache::Stats GzipCache::stats() const {
  std::lock_guard lock(mutex_);
  return {compressions_, hits_, evictions_, lru_.size(), bytes_};
}

void GzipCache::clear() {
  std::lock_guard lock(mutex_);
  for (auto& e : lru_) e->cached = false;
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

}  // namespace kiwi::agent
