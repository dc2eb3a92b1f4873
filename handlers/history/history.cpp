// /api/history: samples as columnar JSON, read through the agent's read-only store connections.
// A response is rendered once per query and sample (and gzipped on the first request that asks):
// repeated requests for a window that cannot change until the next sample are served from a small
// cache.
#include <chrono>
#include <kiwi/gzip.hpp>
#include <kiwi/handler.hpp>
#include <list>
#include <mutex>

#include "history_render.hpp"

namespace {

constexpr std::size_t kCacheEntries = 32;

struct Rendered {
  Rendered(std::string key, std::string etag, bool closed, kiwi::Body body)
      : key(std::move(key)), etag(std::move(etag)), closed(closed), body(std::move(body)) {}
  std::string key;  // canonical query + sample sequence
  std::string etag;
  bool closed;
  kiwi::LazyGzip body;
};

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class HistoryHandler final : public kiwi::Handler {
 public:
  explicit HistoryHandler(const kiwi::HandlerContext& ctx)
      : data_(ctx.data), default_series_(ctx.options.get_strings("default_series")) {}

  kiwi::Response handle(const kiwi::Request& req) override {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto parsed = kiwi_history::parse_query(req, now, data_.series_names(), default_series_);
    if (auto* err = std::get_if<kiwi_history::ParamError>(&parsed))
      return kiwi::Response::error(400, err->message, err->parameter);
    auto& pq = std::get<kiwi_history::ParsedQuery>(parsed);

    auto snap = data_.snapshot();
    // A window that ends before the latest sample is closed: no later sample can change it.
    const bool closed = pq.query.until && *pq.query.until < snap->timestamp;
    std::string key = pq.canonical + (closed ? "" : "#" + std::to_string(snap->sequence));
    std::shared_ptr<const Rendered> r = lookup(key);
    if (!r) {
      char etag[48];
      std::snprintf(etag, sizeof etag, "\"h%016llx\"", static_cast<unsigned long long>(fnv1a(key)));
      r = std::make_shared<const Rendered>(
          key, etag, closed,
          std::make_shared<const std::string>(kiwi_history::render(data_.history(pq.query), pq.query)));
      insert(r);
    }
    kiwi::Response res;
    res.headers = {{"ETag", r->etag},
                   {"Cache-Control", r->closed ? "max-age=3600" : "no-cache"}};
    if (auto inm = req.header("If-None-Match"); inm && *inm == r->etag) {
      res.status = 304;
      res.content_type.clear();
      return res;
    }
    r->body.serve(res, req);
    return res;
  }

 private:
  std::shared_ptr<const Rendered> lookup(const std::string& key) {
    std::lock_guard lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if ((*it)->key == key) {
        cache_.splice(cache_.begin(), cache_, it);  // most recently used first
        return cache_.front();
      }
    return nullptr;
  }
  void insert(std::shared_ptr<const Rendered> r) {
    std::lock_guard lock(mutex_);
    cache_.push_front(std::move(r));
    if (cache_.size() > kCacheEntries) cache_.pop_back();
  }

  const kiwi::DataSource& data_;
  const std::vector<std::string> default_series_;
  std::mutex mutex_;
  std::list<std::shared_ptr<const Rendered>> cache_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(HistoryHandler, "history", "columnar sample history (/api/history)",
                    kiwi_history::kOptions)
