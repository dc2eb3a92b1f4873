// /metrics: Prometheus text exposition, rendered at most once per sample and gzipped once.
#include <kiwi/gzip.hpp>
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
    res.headers = {{"Cache-Control", "no-cache"}};
    std::lock_guard lock(mutex_);
    if (!body_ || sequence_ != snap->sequence) {
      // Counters (HTTP requests, errors) are as of the first scrape after each sample.
      body_ = std::make_shared<const std::string>(kiwi_metrics::render(*snap, data_.stats()));
      body_gzip_ = kiwi::gzip_body(body_, kiwi::kGzipFast);
      sequence_ = snap->sequence;
    }
    res.body = body_;
    res.body_gzip = body_gzip_;
    return res;
  }

 private:
  const kiwi::DataSource& data_;
  std::mutex mutex_;
  std::uint64_t sequence_ = 0;
  kiwi::Body body_, body_gzip_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(MetricsHandler, "metrics", "Prometheus text exposition (/metrics)",
                    kiwi::no_options)
