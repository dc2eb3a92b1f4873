// /metrics: Prometheus text exposition, rendered at most once per sample and served as that one
// body until the next (the server gzips it once, by the body's identity: Prometheus asks for gzip).
#include <kiwi/handler.hpp>
#include <mutex>

#include "metrics_render.hpp"

namespace {

class MetricsHandler final : public kiwi::Handler {
 public:
  explicit MetricsHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  kiwi::Response handle(const kiwi::Request&) override {
    auto snap = data_.snapshot();
    kiwi::Response res;
    res.content_type = "text/plain; version=0.0.4; charset=utf-8";
    // The ETag names the sample: it marks the body as a version served again (so its gzip is
    // kept) and answers a conditional scrape. Weak: a handler made by a reload renders the same
    // sample with its own request counters.
    res.headers = {{"ETag", "W/\"m" + std::to_string(snap->sequence) + "\""},
                   {"Cache-Control", "no-cache"}};
    std::lock_guard lock(mutex_);
    if (!body_ || sequence_ != snap->sequence) {
      // Counters (HTTP requests, errors) are as of the first scrape after each sample.
      body_ = std::make_shared<const std::string>(kiwi_metrics::render(*snap, data_.stats()));
      sequence_ = snap->sequence;
    }
    res.body = body_;
    return res;
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
