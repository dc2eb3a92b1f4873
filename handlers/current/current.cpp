// /api/current: the latest snapshot as JSON (kiwi/json.hpp render_snapshot_json), rendered once
// per sample on the first request for it and served to every later one as the same body (the
// server gzips it once, by the body's identity).
#include <charconv>
#include <chrono>
#include <kiwi/handler.hpp>
#include <kiwi/json.hpp>
#include <mutex>

namespace {

constexpr std::string_view kFresh = "\"stale\":false";
constexpr std::string_view kStale = "\"stale\":true";

class CurrentHandler final : public kiwi::InPlaceHandler {
 public:
  explicit CurrentHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  void handle_into(const kiwi::Request&, kiwi::Response& out) override {
    auto snap = data_.snapshot();
    if (snap->sequence == 0) {
      out = kiwi::Response::error(503, "no sample yet; retry in a second");
      return;
    }
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const bool stale = now - snap->timestamp > snap->stale_after_seconds;
    // The body differs between fresh and stale for one sequence, so the ETag does too.
    char etag[32] = "\"";
    char* end = std::to_chars(etag + 1, etag + sizeof etag - 2, snap->sequence).ptr;
    if (stale) *end++ = 's';
    *end++ = '"';
    out.set(200, "application/json",
            {{"ETag", std::string_view(etag, end - etag)}, {"Cache-Control", "no-cache"}},
            body(*snap, stale));
  }

 private:
  // The body of `snap`, made once per sequence (under the lock: two workers asking at once for a
  // new sample render it once, some tens of µs each second). The stale one, only while the
  // collector is stuck, is made from the fresh one once too.
  kiwi::Body body(const kiwi::Snapshot& snap, bool stale) {
    std::lock_guard lock(mutex_);
    if (sequence_ != snap.sequence || !fresh_) {
      fresh_ = std::make_shared<const std::string>(kiwi::render_snapshot_json(snap));
      stale_.reset();
      sequence_ = snap.sequence;
    }
    if (!stale) return fresh_;
    if (!stale_) {
      auto out = std::make_shared<std::string>(*fresh_);
      if (auto at = out->find(kFresh); at != std::string::npos)
        out->replace(at, kFresh.size(), kStale);
      stale_ = std::move(out);
    }
    return stale_;
  }

  const kiwi::DataSource& data_;
  std::mutex mutex_;
  std::uint64_t sequence_ = 0;
  kiwi::Body fresh_, stale_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(CurrentHandler, "current", "the latest sample as JSON (/api/current)",
                    kiwi::no_options)
