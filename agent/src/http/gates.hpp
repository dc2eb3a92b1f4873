// The request gates: what the server does with every request before and around its route's
// handler, as an ordered list (Envoy's filter chain is the model). Each gate has one job and
// either answers the request or lets it through; the first that answers wins, and the last (the
// route's handler) always answers. Then each response filter adjusts the answer, whichever gate
// gave it. The lists are data in one place (gates.cpp); adding a gate is one row. Knows nothing of
// libmicrohttpd: the workers (mhd_workers.cpp) read the request and send the answer.
#pragma once

#include <kiwi/handler.hpp>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http/auth.hpp"
#include "http/router.hpp"

namespace kiwi::agent::http {

// What a request reads, swapped whole on HttpServer::reconfigure(): a request sees the old or the
// new routes, origins and authentication, never a mix. A request's reference keeps the router and
// its handlers alive until it is answered.
struct Published {
  std::shared_ptr<const Router> router;
  std::vector<std::string> cors_origins;      // exact origins allowed to read responses
  std::shared_ptr<const Authenticator> auth;  // null: no authentication
};

// A request as the gates see it.
struct GateInput {
  // Read-only for every gate but "auth", which sets the identity that passed (auth_type,
  // remote_user) for the handler.
  Request& request;
  std::string_view raw_path;  // the path as sent, before libmicrohttpd decoded it
  bool body_too_large;        // the body passed kMaxBodyBytes (the rest was not kept)
  const Published& published;
  int route;                  // published.router->route_of(request.path); -1: no route
  AuthLimiter& auth_limiter;  // the server's, kept across reloads
  AuthCounters& auth_counters;
};

// One gate: answers the request (sets `out` whole and returns true), or lets it go on (returns
// false, `out` untouched).
struct RequestGate {
  std::string_view name;
  bool (*answer)(const GateInput& in, Response& out);
  // Whose answer it is in the request counts (/metrics): the route's, or "unmatched".
  bool counts_as_route;
};

// One response filter: adjusts every answer, whichever gate gave it.
struct ResponseFilter {
  std::string_view name;
  void (*apply)(const GateInput& in, Response& res);
};

// The gates in the order they run, and the filters in theirs.
std::span<const RequestGate> request_gates();
std::span<const ResponseFilter> response_filters();

// Answers `in.request` into `out`: the first gate that answers, then every filter. Returns the
// route the answer counts for (-1: unmatched). `out` may be the worker's Response of its last
// request, reused: a gate sets it whole, and a handler fills its answer in place
// (Handler::handle_into), so a response shaped like the last one allocates nothing.
int answer_request(const GateInput& in, Response& out);

}  // namespace kiwi::agent::http
