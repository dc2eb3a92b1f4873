// /metrics: Prometheus text exposition, rendered at most once per sample and served as that one
// body until the next (the server gzips it once, by the body's identity: Prometheus asks for gzip).
#include <charconv>
#include <kiwi/handler.hpp>
#include <mutex>

#include "metrics_render.hpp"

namespace {

class MetricsHandler final : public kiwi::InPlaceHandler {
 public:
  explicit MetricsHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  void handle_into(const kiwi::Request&, kiwi::Response& out) override {
    auto snap = data_.snapshot();
    // The ETag names the sample: it marks the body as a version served again (so its gzip is
    // kept) and answers a conditional scrape. Every value, the agent's counters too (its own
    // report), is the sample's.
    char etag[32] = "W/\"m";
    char* end = std::to_chars(etag + 4, etag + sizeof etag - 1, snap->sequence).ptr;
    *end++ = '"';
    std::lock_guard lock(mutex_);
    if (!body_ || sequence_ != snap->sequence) {
      body_ = std::make_shared<const std::string>(kiwi_metrics::render(*snap, data_.stats()));
      sequence_ = snap->sequence;
    }
    out.set(200, "text/plain; version=0.0.4; charset=utf-8",
            {{"ETag", std::string_view(etag, end - etag)}, {"Cache-Control", "no-cache"}}, body_);
  }

 private:
  const kiwi::DataSource& data_;
  std::mutex mutex_;
  std::uint64_t sequence_ = 0;
  kiwi::Body body_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(MetricsHandler, "metrics", "Prometheus text exposition (/metrics)",
                    kiwi::no_options)
