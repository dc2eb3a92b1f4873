// The dashboard: www/ embedded at build time and served from memory with ETags.
#include <kiwi/handler.hpp>
#include <map>

#include "kiwi_embedded.hpp"

extern const kiwi_embedded::File kiwi_www[];
extern const std::size_t kiwi_www_count;

namespace {

std::string_view content_type(std::string_view path) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},   {".svg", "image/svg+xml"},
      {".png", "image/png"},                 {".ico", "image/x-icon"},
      {".json", "application/json"},         {".txt", "text/plain; charset=utf-8"}};
  for (auto& [ext, type] : kTypes)
    if (path.ends_with(ext)) return type;
  return "application/octet-stream";
}

// FNV-1a: a content hash for the ETag, computed once at start.
std::string etag_of(std::string_view data) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

class DashboardHandler final : public kiwi::Handler {
 public:
  explicit DashboardHandler(const kiwi::HandlerContext&) {
    for (std::size_t i = 0; i < kiwi_www_count; ++i) {
      const auto& f = kiwi_www[i];
      files_.emplace("/" + std::string(f.path),
                     File{std::make_shared<const std::string>(f.data), std::string(content_type(f.path)),
                          etag_of(f.data)});
    }
  }

  kiwi::Response handle(const kiwi::Request& req) override {
    // Only exact names of embedded files are served: no path from the request reaches a filesystem.
    auto it = files_.find(req.path == "/" ? std::string("/index.html") : std::string(req.path));
    if (it == files_.end()) return kiwi::Response::error(404, "no such file: " + std::string(req.path));
    const File& f = it->second;
    kiwi::Response res;
    res.content_type = f.type;
    res.headers = {{"ETag", f.etag}, {"Cache-Control", "no-cache"}};
    if (auto inm = req.header("If-None-Match"); inm && *inm == f.etag) {
      res.status = 304;
      res.content_type.clear();
      return res;
    }
    res.body = f.body;
    return res;
  }

 private:
  struct File {
    kiwi::Body body;
    std::string type;
    std::string etag;
  };
  std::map<std::string, File, std::less<>> files_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(DashboardHandler, "dashboard", "the browser dashboard (www/), from memory",
                    kiwi::no_options)
