// The dashboard: www/ and the charting library (uPlot) embedded at build time and served from
// memory, plain, with ETags (the server gzips each file once for clients that accept it, and keeps
// the gzip). The handler's options are written into index.html (data attributes on <body>) at
// construction, so the page needs no extra request. "/fleet" is www/fleet.html (the fleet page).
// Every URL in the pages is relative, so they work as well under another agent's /peer/<name>/.
#include <kiwi/handler.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "kiwi_embedded.hpp"

// www/** and, from CMakeLists.txt, assets/uPlot.* and assets/README.md.
extern const kiwi_embedded::File kiwi_www[];
extern const std::size_t kiwi_www_count;
extern const kiwi_embedded::File kiwi_vendor[];
extern const std::size_t kiwi_vendor_count;

namespace {

constexpr kiwi::OptionSpec kOptions[] = {
    // Faster than 1 s only loads the board the agent watches.
    {"poll_interval", kiwi::OptionType::duration, "\"5s\"",
     "how often the page asks for a new sample, e.g. \"2s\"", true, 1000, 600'000},
    {"temperature_warm_celsius", kiwi::OptionType::number, "70",
     "a temperature at or above this is shown as warm (amber)"},
    {"temperature_hot_celsius", kiwi::OptionType::number, "80",
     "a temperature at or above this is shown as hot (red); must be above the warm threshold"},
};

std::string_view content_type(std::string_view path) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".json", "application/json"},
      {".txt", "text/plain; charset=utf-8"},
      {".md", "text/plain; charset=utf-8"}};  // Markdown is read as text in the browser
  for (auto& [ext, type] : kTypes)
    if (path.ends_with(ext)) return type;
  return "application/octet-stream";
}

// FNV-1a: a content hash for the ETag, computed once at start. Weak (W/), because the same tag
// stands for the plain and the gzip bytes of one file (the server's choice per client).
std::string etag_of(std::string_view data) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  char buf[28];
  std::snprintf(buf, sizeof buf, "W/\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

std::string number_text(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

// index.html with each "@key@" placeholder replaced. A missing placeholder is a build mistake
// (www/index.html and this table disagree): refuse to start rather than serve a page that
// silently ignores the configuration.
std::string render_index(std::string html, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string mark = "@" + key + "@";
    auto at = html.find(mark);
    if (at == std::string::npos)
      throw std::logic_error("www/index.html has no " + mark + " placeholder");
    for (; at != std::string::npos; at = html.find(mark, at + value.size()))
      html.replace(at, mark.size(), value);
  }
  return html;
}

// Whether the agent has [[peer]] entries: the header's "Fleet" link is in the page only then (a
// reload that changes the peers makes every route anew, so the page is written again).
bool has_peers(const kiwi::HandlerContext& ctx) {
  return !ctx.peers.empty();
}

class DashboardHandler final : public kiwi::InPlaceHandler {
 public:
  explicit DashboardHandler(const kiwi::HandlerContext& ctx) {
    const auto& o = ctx.options;
    const std::int64_t poll_ms = o.get_duration("poll_interval").count();
    const double warm = o.get_number("temperature_warm_celsius");
    const double hot = o.get_number("temperature_hot_celsius");
    for (double c : {warm, hot})
      if (!std::isfinite(c) || c < -50 || c > 200)
        throw std::invalid_argument(
            "temperature thresholds must be from -50 to 200 (celsius), got " + number_text(c));
    if (!(warm < hot))
      throw std::invalid_argument("temperature_warm_celsius (" + number_text(warm) +
                                  ") must be below temperature_hot_celsius (" + number_text(hot) +
                                  ")");
    const std::map<std::string, std::string> page_values = {
        {"poll_ms", std::to_string(poll_ms)},
        {"temperature_warm_celsius", number_text(warm)},
        {"temperature_hot_celsius", number_text(hot)},
        // an attribute of the header's link to the fleet page: shown when there are peers
        {"fleet_link", has_peers(ctx) ? "" : " hidden"}};

    auto add = [&](const kiwi_embedded::File& f) {
      std::string path = "/" + std::string(f.path);
      File& file = files_.try_emplace(path).first->second;
      file.type = content_type(path);
      if (path == "/index.html")  // rendered with this handler's options
        file.body =
            std::make_shared<const std::string>(render_index(std::string(f.data), page_values));
      else  // the embedded bytes themselves (read-only data of this plugin: no copy)
        file.body = kiwi::Body(nullptr, f.data);
      file.etag = etag_of(*file.body);
    };
    for (std::size_t i = 0; i < kiwi_www_count; ++i) add(kiwi_www[i]);
    for (std::size_t i = 0; i < kiwi_vendor_count; ++i) add(kiwi_vendor[i]);
  }

  void handle_into(const kiwi::Request& req, kiwi::Response& out) override {
    // Only exact names of embedded files are served: no path from the request reaches a filesystem.
    auto it = files_.find(req.path == "/"        ? std::string_view("/index.html")
                          : req.path == "/fleet" ? std::string_view("/fleet.html")
                                                 : req.path);
    if (it == files_.end()) {
      out = kiwi::Response::error(404, "no such file: " + std::string(req.path));
      return;
    }
    const File& f = it->second;
    out.set(200, f.type, {{"ETag", f.etag}, {"Cache-Control", "no-cache"}}, f.body);
  }

 private:
  struct File {
    kiwi::Body body;
    std::string type;
    std::string etag;  // of the bytes: they change exactly when the file does
  };
  // Hashed, looked up by the request's path as it is (no std::string made per request).
  struct PathHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view p) const { return std::hash<std::string_view>{}(p); }
  };
  std::unordered_map<std::string, File, PathHash, std::equal_to<>> files_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(DashboardHandler, "dashboard",
                    "the browser dashboard (www/ and uPlot), from memory", kOptions)
