#include "http/mhd_response.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "base/compress.hpp"

namespace kiwi::agent::http {

namespace {

// What an MHD response keeps alive: its body, and the code of the plugin that made it. A body a
// handler made may be freed through that plugin's code (its shared_ptr control block), and an MHD
// response can outlive the router it came from (a worker's cache, a slow connection), so the
// library stays loaded until the body is gone. `body` is declared last and goes first.
struct KeptBody {
  std::shared_ptr<LoadedLibrary> code;
  Body body;
};

void free_body(void* cls) {
  delete static_cast<KeptBody*>(cls);
}

// The gzip of r.body, or null (incompressible, or zlib failed: sent plain then). A response with an
// ETag is a version served again: its gzip is made once and kept by body identity; any other is
// compressed for this request only, at the fastest level.
Body gzip_of(const Response& r, GzipCache& cache, const std::shared_ptr<LoadedLibrary>* code) {
  try {
    if (has_header(r, "ETag")) return cache.get(r.body, code ? *code : nullptr);
    auto gz = std::make_shared<const std::string>(gzip(*r.body, kGzipPerRequestLevel));
    if (gz->size() < r.body->size()) return gz;
  } catch (const std::exception&) {
  }
  return nullptr;
}

MHD_Response* build_response(const MhdApi& mhd, const Body& chosen, const Response& r, bool gzip,
                             bool close, const std::shared_ptr<LoadedLibrary>* code) {
  const std::string_view data = chosen ? *chosen : std::string_view();
  // Zero-copy: MHD reads the shared body in place; the callback drops our reference when done.
  auto* keep = new KeptBody{code ? *code : nullptr, chosen};
  MHD_Response* res =
      mhd.create_response(data.size(), const_cast<char*>(data.data()), &free_body, keep);
  if (!res) {
    delete keep;
    return nullptr;
  }
  if (!r.content_type.empty()) mhd.add_response_header(res, "Content-Type", r.content_type.c_str());
  // On the identity response too (and on small bodies of such a type, which may grow past the
  // threshold in a later version), so that a shared cache keeps the two apart.
  if (negotiates_encoding(r)) mhd.add_response_header(res, "Vary", "Accept-Encoding");
  if (gzip) mhd.add_response_header(res, "Content-Encoding", "gzip");
  for (auto& h : r.headers) mhd.add_response_header(res, h.name.c_str(), h.value.c_str());
  // MHD then closes the connection once the response is sent.
  if (close) mhd.add_response_header(res, "Connection", "close");
  return res;
}

// The MHD response a worker made last, reused while its answers stay the same: the same body
// (by identity: the cached page, snapshot, history window or /metrics text of the current
// second), the same choice of gzip, type and headers. MHD counts the references to a response,
// so one object may be queued on many connections at once (the ceiling server serves every
// request so). Building one costs some 15 allocations (the response, each header's name and
// value) and a look into the gzip cache (a lock shared by the workers); reusing it costs a few
// comparisons. It keeps the handler's body alive, so that body's address cannot be reused while
// cached, and the body's plugin code loaded (`code`, released after `source`), so the cache stays
// valid across routers. A worker belongs to one daemon, whose responses carry
// "Connection: close" once it is replaced: that is part of the match, and so is its library.
struct LastResponse {
  const MhdApi* api = nullptr;  // the library that made `response`
  MHD_Response* response = nullptr;
  std::shared_ptr<LoadedLibrary> code;
  Body source;  // the handler's body, which `response` sends as it is or compressed
  bool gzip_wanted = false;
  bool close = false;
  std::string content_type;
  std::vector<Header> headers;

  bool matches(const MhdApi* mhd, const Response& r, bool gz, bool cl) const {
    if (!response || mhd != api || r.body.identity() != source.identity() ||
        r.body->size() != source->size() || gz != gzip_wanted || cl != close ||
        r.content_type != content_type || r.headers.size() != headers.size())
      return false;
    for (std::size_t i = 0; i < headers.size(); ++i)
      if (r.headers[i].name != headers[i].name || r.headers[i].value != headers[i].value)
        return false;
    return true;
  }
  ~LastResponse() {
    if (response) api->destroy_response(response);
  }
};

}  // namespace

MHD_Response* make_response(const MhdApi& mhd, const Response& r, bool accepts_gzip, bool close,
                            GzipCache& cache, const std::shared_ptr<LoadedLibrary>* code) {
  thread_local LastResponse last;
  const bool gzip_wanted = accepts_gzip && gzip_candidate(r);
  if (last.matches(&mhd, r, gzip_wanted, close)) return last.response;
  Body gz = gzip_wanted ? gzip_of(r, cache, code) : nullptr;
  MHD_Response* res = build_response(mhd, gz ? gz : r.body, r, gz != nullptr, close, code);
  if (!res) return nullptr;
  if (last.response) last.api->destroy_response(last.response);  // freed once no connection uses it
  last.api = &mhd;
  last.response = res;
  last.source = r.body;  // before `code`: the old body goes while its code is still loaded
  last.code = code ? *code : nullptr;
  last.gzip_wanted = gzip_wanted;
  last.close = close;
  last.content_type = r.content_type;
  last.headers = r.headers;
  return res;
}

}  // namespace kiwi::agent::http
