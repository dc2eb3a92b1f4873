// Maps request paths to handler instances: exact paths, and prefixes for routes ending in "/*".
// Knows nothing about libmicrohttpd; the server turns its answers into responses.
#pragma once

#include <string>
#include <vector>

#include "plugin_loader.hpp"

namespace kiwi::agent {

struct Route {
  std::string path;  // as configured
  PluginInstance<Handler> handler;
};

class Router {
 public:
  explicit Router(std::vector<Route> routes);

  // Answers one request: the handler's response, or the JSON 404/405 of the API.
  // `route_index` receives the index of the matching route in routes(), or -1 for none.
  Response dispatch(const Request& request, int* route_index = nullptr) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
  std::vector<std::size_t> order_;  // exact routes first, then prefixes longest first
};

}  // namespace kiwi::agent
