// Turning a kiwi::Response into a libmicrohttpd response: the body shared, not copied; gzip
// chosen by the server (response_cache.hpp); and the response a worker made last reused while its
// answers stay the same.
#pragma once

#include <memory>

#include "http/mhd_api.hpp"
#include "http/response_cache.hpp"
#include "plugin/plugin_loader.hpp"

namespace kiwi::agent::http {

// The response for `r`, owned by the calling worker's cache: queue it, do not destroy it. `code`:
// the library of the handler that made `r` (null for the server's own answers).
MHD_Response* make_response(const MhdApi& mhd, const Response& r, bool accepts_gzip, bool close,
                            GzipCache& cache, const std::shared_ptr<LoadedLibrary>* code);

}  // namespace kiwi::agent::http
