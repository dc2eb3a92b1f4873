// Maps request paths to handler instances: exact paths, and prefixes for routes ending in "/*".
// Knows nothing about libmicrohttpd; the server turns its answers into responses.
//
// A Router is immutable once built, apart from its request counters, so the server swaps whole
// routers on a reload: a request sees the old or the new set of routes, never a mix.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/plugin_loader.hpp"

namespace kiwi::agent {

// Whether `method` is one of the comma-separated tokens of `methods` (an Allow header value),
// compared whole and case-sensitively: "GET, HEAD" lists "HEAD" but not "HEA" or "get".
bool method_listed(std::string_view methods, std::string_view method);

struct Route {
  std::string path;  // as configured
  // Shared: a handler a reload keeps serves in the old and the new router at once, and lives until
  // the last request of either is done.
  std::shared_ptr<PluginInstance<Handler>> handler;
};

// Request counts of one route by status, lock-free; statuses outside the table count as "other".
// 302, 502 and 504 are what a cgi route answers for a redirect, a failed and a hung program; 401
// and 429 what [http.auth] answers.
class RequestCounters {
 public:
  static constexpr std::array<int, 17> kStatuses = {
      200, 204, 302, 304, 400, 401, 404, 405, 413,
      414, 429, 431, 500, 502, 503, 504, 0 /* other */};
  void add(int status);
  std::uint64_t count(std::size_t column) const {
    return counts_[column].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<std::uint64_t>, kStatuses.size()> counts_{};
};

class Router {
 public:
  // `previous`: the router this one replaces. A path routed by both keeps its counters (shared:
  // requests still finishing on the old router count in the new one too), and so does the
  // "unmatched" row, so Prometheus counters never go backwards across a reload.
  explicit Router(std::vector<Route> routes, const Router* previous = nullptr);

  // Answers one request: the handler's response, or the JSON 404/405 of the API.
  // `route_index` receives the index of the matching route in routes(), or -1 for none.
  Response dispatch(const Request& request, int* route_index = nullptr) const;
  // The same, into `out`, which the server reuses from request to request (Handler::handle_into).
  void dispatch(const Request& request, Response& out, int* route_index) const;

  // dispatch() in its steps, for the server's request gates (gates.cpp), which run gates of their
  // own between the lookup (route_of()) and the handler.
  // The JSON 404 when `route_index` is -1 (no route for `path`); otherwise false, `out` untouched.
  static bool answer_not_found(int route_index, std::string_view path, Response& out);
  // The JSON 405 (with Allow) when the handler of route `route_index` (>= 0) does not take
  // `method`; otherwise false, `out` untouched.
  bool answer_method_not_allowed(int route_index, std::string_view method, Response& out) const;
  // The answer of the handler of route `route_index` (>= 0), in `out`; the JSON 503 or 500 when
  // it throws.
  void handle(int route_index, const Request& request, Response& out) const;

  // The methods the route `path` would dispatch to takes (its handler's methods()), for a CORS
  // preflight; "GET, HEAD" when no route matches.
  std::string_view methods(std::string_view path) const;

  // The index in routes() of the route `path` would dispatch to, or -1 (for counting a request
  // answered before dispatch, e.g. refused by [http.auth]).
  int route_of(std::string_view path) const;

  const std::vector<Route>& routes() const { return routes_; }

  // Counts one answered request; `route_index` as dispatch() gave it (-1: unmatched). Safe from
  // any thread.
  void count(int route_index, int status) const {
    counters_[static_cast<std::size_t>(route_index + 1)]->add(status);
  }
  // Non-zero counts of the routes and "unmatched", in route order.
  std::vector<HttpRequestCount> request_counts() const;

 private:
  std::vector<Route> routes_;
  std::vector<std::size_t> order_;  // exact routes first, then prefixes longest first
  // "route <path> (<handler file>)" by route: what a crash in its handle() names
  // (fatal_signal.hpp).
  std::vector<std::string> activities_;
  // Index 0: unmatched, i + 1: route i. Shared with the routers before and after this one.
  std::vector<std::shared_ptr<RequestCounters>> counters_;
};

}  // namespace kiwi::agent
