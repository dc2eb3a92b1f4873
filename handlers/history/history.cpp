// /api/history: samples as columnar JSON (or CSV), read through the agent's read-only store
// connections.
// A response is rendered once per query and sample (the server gzips it once, by body identity):
// repeated requests for a window that cannot change until the next sample are served from a small
// cache, found by the request's own query string before anything is parsed.
#include <chrono>
#include <kiwi/handler.hpp>
#include <list>
#include <mutex>

#include "history_render.hpp"

namespace {

constexpr std::size_t kCacheEntries = 32;

struct Rendered {
  Rendered(std::string etag, bool closed, std::string_view content_type, kiwi::Body body)
      : etag(std::move(etag)), closed(closed), content_type(content_type), body(std::move(body)) {}
  std::string etag;
  bool closed;  // the window ends before the latest sample: no later sample changes it
  std::string_view content_type;  // static (kiwi_history::content_type)
  kiwi::Body body;
};

// A cache slot: one rendering under one key. A rendering has two keys: the request's query string
// as sent, whole and undecoded (the fast path: no parsing, no series list; decoded parameters
// joined again would make `series=a%26limit%3D1` and `series=a&limit=1` one key) and the
// canonical query (what parse_query made of it, every value exact and whole, format and band
// included, so equivalent spellings share one rendering and different queries or formats never
// do). An open window's keys end in
// the sample sequence; it is useless once a newer sample exists, and dropped then.
struct Slot {
  std::string key;
  std::uint64_t sequence;  // 0 for a closed window
  std::shared_ptr<const Rendered> rendered;
};

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The query string as received (undecoded, whole), plus the sample sequence.
std::string raw_key(const kiwi::Request& req, std::uint64_t sequence) {
  std::string key = "raw:";
  key.append(req.raw_query);
  return key.append("#").append(std::to_string(sequence));
}

class HistoryHandler final : public kiwi::InPlaceHandler {
 public:
  explicit HistoryHandler(const kiwi::HandlerContext& ctx)
      : data_(ctx.data), default_series_(ctx.options.get_strings("default_series")) {}

  void handle_into(const kiwi::Request& req, kiwi::Response& out) override {
    auto snap = data_.snapshot();
    std::string raw = raw_key(req, snap->sequence);
    std::shared_ptr<const Rendered> r = lookup(raw);
    if (!r) {
      const double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      auto parsed = kiwi_history::parse_query(req, now, data_.series_names(), default_series_);
      if (auto* err = std::get_if<kiwi_history::ParamError>(&parsed)) {
        out = kiwi::Response::error(400, err->message, err->parameter);
        return;
      }
      auto& pq = std::get<kiwi_history::ParsedQuery>(parsed);
      // A relative window (until=-60) slides with the clock: the same URL gets other samples
      // later, so it is never served as closed (cacheable for an hour).
      const bool closed = !pq.relative && pq.query.until && *pq.query.until < snap->timestamp;
      const std::uint64_t sequence = closed ? 0 : snap->sequence;
      std::string key = pq.canonical + (closed ? "" : "#" + std::to_string(snap->sequence));
      r = lookup(key);
      if (!r) {
        char etag[48];
        std::snprintf(etag, sizeof etag, "\"h%016llx\"",
                      static_cast<unsigned long long>(fnv1a(key)));
        const kiwi::HistoryResult result = data_.history(pq.query);
        r = std::make_shared<const Rendered>(
            etag, closed, kiwi_history::content_type(pq.format),
            std::make_shared<const std::string>(pq.format == kiwi_history::Format::csv
                                                    ? kiwi_history::render_csv(result, pq.query)
                                                    : kiwi_history::render(result, pq.query)));
        insert({std::move(key), sequence, r}, snap->sequence);
      }
      insert({std::move(raw), snap->sequence, r}, snap->sequence);  // raw keys name the sample
    }
    out.set(200, r->content_type,
            {{"ETag", r->etag}, {"Cache-Control", r->closed ? "max-age=3600" : "no-cache"}},
            r->body);
  }

 private:
  std::shared_ptr<const Rendered> lookup(const std::string& key) {
    std::lock_guard lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->key == key) {
        cache_.splice(cache_.begin(), cache_, it);  // most recently used first
        return cache_.front().rendered;
      }
    return nullptr;
  }
  void insert(Slot slot, std::uint64_t latest_sequence) {
    std::lock_guard lock(mutex_);
    // Open windows of older samples can never be asked for again: their keys name old sequences.
    std::erase_if(cache_,
                  [&](const Slot& s) { return s.sequence != 0 && s.sequence < latest_sequence; });
    cache_.push_front(std::move(slot));
    if (cache_.size() > kCacheEntries) cache_.pop_back();
  }

  const kiwi::DataSource& data_;
  const std::vector<std::string> default_series_;
  std::mutex mutex_;
  std::list<Slot> cache_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(HistoryHandler, "history", "columnar sample history (/api/history)",
                    kiwi_history::kOptions)
