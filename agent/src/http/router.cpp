#include "http/router.hpp"

#include <algorithm>

#include "base/fatal_signal.hpp"

namespace kiwi::agent {

namespace {
bool is_prefix_route(const std::string& p) {
  return p.ends_with("/*");
}

bool matches(const std::string& route, std::string_view path) {
  if (!is_prefix_route(route)) return route == path;
  std::string_view prefix(route.data(), route.size() - 1);  // keep the '/'
  return path.starts_with(prefix) && path.size() > prefix.size();
}
}  // namespace

bool method_listed(std::string_view methods, std::string_view method) {
  while (!methods.empty()) {
    const std::size_t comma = methods.find(',');
    std::string_view token = methods.substr(0, comma);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
      token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
    if (!token.empty() && token == method) return true;
    if (comma == std::string_view::npos) break;
    methods.remove_prefix(comma + 1);
  }
  return false;
}

void RequestCounters::add(int status) {
  std::size_t col = kStatuses.size() - 1;
  for (std::size_t i = 0; i + 1 < kStatuses.size(); ++i)
    if (kStatuses[i] == status) col = i;
  counts_[col].fetch_add(1, std::memory_order_relaxed);
}

Router::Router(std::vector<Route> routes, const Router* previous) : routes_(std::move(routes)) {
  for (std::size_t i = 0; i < routes_.size(); ++i) order_.push_back(i);
  for (auto& r : routes_)
    activities_.push_back(
        "route " + r.path + " (" +
        (r.handler && r.handler->library ? r.handler->library->file : std::string("built in")) +
        ")");
  counters_.push_back(previous ? previous->counters_[0] : std::make_shared<RequestCounters>());
  for (auto& r : routes_) {
    std::shared_ptr<RequestCounters> row;
    if (previous)
      for (std::size_t i = 0; i < previous->routes_.size() && !row; ++i)
        if (previous->routes_[i].path == r.path) row = previous->counters_[i + 1];
    counters_.push_back(row ? std::move(row) : std::make_shared<RequestCounters>());
  }
  std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    bool pa = is_prefix_route(routes_[a].path), pb = is_prefix_route(routes_[b].path);
    if (pa != pb) return !pa;
    return routes_[a].path.size() > routes_[b].path.size();
  });
}

Response Router::dispatch(const Request& request, int* route_index) const {
  Response out;
  dispatch(request, out, route_index);
  return out;
}

void Router::dispatch(const Request& request, Response& out, int* route_index) const {
  const int i = route_of(request.path);
  if (route_index) *route_index = i;
  if (answer_not_found(i, request.path, out) || answer_method_not_allowed(i, request.method, out))
    return;
  handle(i, request, out);
}

bool Router::answer_not_found(int route_index, std::string_view path, Response& out) {
  if (route_index >= 0) return false;
  out = Response::error(404, "no route for " + std::string(path));
  return true;
}

bool Router::answer_method_not_allowed(int route_index, std::string_view method,
                                       Response& out) const {
  const std::string_view allowed =
      routes_[static_cast<std::size_t>(route_index)].handler->object->methods();
  if (method_listed(allowed, method)) return false;
  // "GET, HEAD" reads "use GET or HEAD".
  std::string list(allowed);
  if (auto last = list.rfind(", "); last != std::string::npos) list.replace(last, 2, " or ");
  out = Response::error(405, "method " + std::string(method) + " is not allowed here; use " + list);
  out.headers.push_back({"Allow", std::string(allowed)});
  return true;
}

void Router::handle(int route_index, const Request& request, Response& out) const {
  const auto i = static_cast<std::size_t>(route_index);
  try {
    CurrentActivity running(activities_[i].c_str());
    routes_[i].handler->object->handle_into(request, out);
  } catch (const StoreError& e) {
    out = Response::error(503, std::string("history store unavailable: ") + e.what());
  } catch (const std::exception& e) {
    out = Response::error(500, std::string("handler failed: ") + e.what());
  }
}

int Router::route_of(std::string_view path) const {
  for (std::size_t i : order_)
    if (matches(routes_[i].path, path)) return static_cast<int>(i);
  return -1;
}

std::string_view Router::methods(std::string_view path) const {
  for (std::size_t i : order_)
    if (matches(routes_[i].path, path)) return routes_[i].handler->object->methods();
  return "GET, HEAD";
}

std::vector<HttpRequestCount> Router::request_counts() const {
  std::vector<HttpRequestCount> out;
  for (std::size_t r = 0; r < counters_.size(); ++r)
    for (std::size_t i = 0; i < RequestCounters::kStatuses.size(); ++i)
      if (auto n = counters_[r]->count(i))
        out.push_back(
            {r == 0 ? "unmatched" : routes_[r - 1].path, RequestCounters::kStatuses[i], n});
  return out;
}

}  // namespace kiwi::agent
