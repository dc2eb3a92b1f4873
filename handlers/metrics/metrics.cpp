// /metrics: Prometheus text exposition, rendered at most once per sample and gzipped at most once
// (on the first scrape that asks: Prometheus does).
#include <kiwi/gzip.hpp>
#include <kiwi/handler.hpp>
#include <mutex>

#include "metrics_render.hpp"

namespace {

class MetricsHandler final : public kiwi::Handler {
 public:
  explicit MetricsHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  kiwi::Response handle(const kiwi::Request& req) override {
    auto snap = data_.snapshot();
    kiwi::Response res;
    res.content_type = "text/plain; version=0.0.4; charset=utf-8";
    res.headers = {{"Cache-Control", "no-cache"}};
    std::unique_lock lock(mutex_);
    if (!body_ || sequence_ != snap->sequence) {
      // Counters (HTTP requests, errors) are as of the first scrape after each sample.
      body_ = std::make_shared<const kiwi::LazyGzip>(
          std::make_shared<const std::string>(kiwi_metrics::render(*snap, data_.stats())));
      sequence_ = snap->sequence;
    }
    auto body = body_;
    lock.unlock();  // gzip, if asked for, outside the lock
    body->serve(res, req);
    return res;
  }

 private:
  const kiwi::DataSource& data_;
  std::mutex mutex_;
  std::uint64_t sequence_ = 0;
  std::shared_ptr<const kiwi::LazyGzip> body_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(MetricsHandler, "metrics", "Prometheus text exposition (/metrics)",
                    kiwi::no_options)
