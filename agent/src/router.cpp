#include "router.hpp"

#include <algorithm>

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

Router::Router(std::vector<Route> routes) : routes_(std::move(routes)) {
  for (std::size_t i = 0; i < routes_.size(); ++i) order_.push_back(i);
  std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    bool pa = is_prefix_route(routes_[a].path), pb = is_prefix_route(routes_[b].path);
    if (pa != pb) return !pa;
    return routes_[a].path.size() > routes_[b].path.size();
  });
}

Response Router::dispatch(const Request& request, int* route_index) const {
  for (std::size_t i : order_) {
    const Route& r = routes_[i];
    if (!matches(r.path, request.path)) continue;
    if (route_index) *route_index = static_cast<int>(i);
    if (request.method != "GET" && request.method != "HEAD") {
      Response res = Response::error(
          405, "method " + std::string(request.method) + " is not allowed here; use GET or HEAD");
      res.headers.push_back({"Allow", "GET, HEAD"});
      return res;
    }
    try {
      return r.handler.object->handle(request);
    } catch (const StoreError& e) {
      return Response::error(503, std::string("history store unavailable: ") + e.what());
    } catch (const std::exception& e) {
      return Response::error(500, std::string("handler failed: ") + e.what());
    }
  }
  if (route_index) *route_index = -1;
  return Response::error(404, "no route for " + std::string(request.path));
}

}  // namespace kiwi::agent
