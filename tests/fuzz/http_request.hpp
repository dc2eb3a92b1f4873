// A kiwi::Request made from fuzz text, decoded as libmicrohttpd decodes a request for the server
// (mhd_workers.cpp): "METHOD /path?query\nName: value\n...\n\nbody". The path and the query's
// names and values are percent-decoded ('+' in the query is a space); the raw query is kept too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <kiwi/handler.hpp>

namespace kiwi_fuzz {

inline std::string percent_decode(std::string_view s, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() + 0 && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Owns the strings a Request's views point into.
class FakeRequest {
 public:
  void set_query(std::string_view raw) {
    raw_query_ = std::string(raw);
    while (!raw.empty()) {
      const auto amp = raw.find('&');
      std::string_view item = raw.substr(0, amp);
      if (!item.empty()) {
        const auto eq = item.find('=');
        storage_.push_back(percent_decode(item.substr(0, eq), true));
        storage_.push_back(eq == std::string_view::npos
                               ? std::string()
                               : percent_decode(item.substr(eq + 1), true));
        pairs_.emplace_back(storage_.size() - 2, &query_);
      }
      if (amp == std::string_view::npos) break;
      raw.remove_prefix(amp + 1);
    }
  }
  // "METHOD TARGET" on the first line, headers after it, a blank line, then the body.
  void set_http(std::string_view in) {
    auto line = [&in]() {
      const auto nl = in.find('\n');
      std::string_view l = in.substr(0, nl);
      in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      return l;
    };
    std::string_view first = line();
    const auto sp = first.find(' ');
    method_ = std::string(first.substr(0, sp));
    std::string_view target = sp == std::string_view::npos ? "/" : first.substr(sp + 1);
    const auto q = target.find('?');
    path_ = percent_decode(target.substr(0, q), false);
    if (q != std::string_view::npos) set_query(target.substr(q + 1));
    while (!in.empty()) {
      std::string_view h = line();
      if (h.empty()) break;
      const auto colon = h.find(':');
      std::string_view value = colon == std::string_view::npos ? "" : h.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      storage_.emplace_back(h.substr(0, colon));
      storage_.emplace_back(value);
      pairs_.emplace_back(storage_.size() - 2, &headers_);
    }
    body_ = std::string(in);
  }
  kiwi::Request request() {
    query_.clear();
    headers_.clear();
    for (auto& [index, list] : pairs_) list->push_back({storage_[index], storage_[index + 1]});
    kiwi::Request r;
    r.method = method_;
    r.path = path_;
    r.query = query_;
    r.headers = headers_;
    r.remote_address = "127.0.0.1";
    r.local_address = "127.0.0.1";
    r.local_port = 9100;
    r.protocol = "HTTP/1.1";
    r.body = body_;
    r.raw_query = raw_query_;
    return r;
  }

 private:
  std::string method_ = "GET", path_ = "/", body_, raw_query_;
  std::vector<std::string> storage_;  // name, value, name, value...
  std::vector<std::pair<std::size_t, std::vector<kiwi::Param>*>> pairs_;
  std::vector<kiwi::Param> query_, headers_;
};

}  // namespace kiwi_fuzz
