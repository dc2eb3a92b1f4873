// /api/alerts: the alert instances of the agent's [[alert]] rules (pending, firing, resolved) as
// JSON, filtered by state and severity. The list is small and rendered per request; a rendering
// equal to the last one of the same filter is served as that same body (its ETag the same, and
// the server's gzip of it made once), so a client polling with If-None-Match gets 304 while
// nothing changed.
#include <array>
#include <cstdio>
#include <functional>
#include <kiwi/handler.hpp>
#include <mutex>

#include "alerts_render.hpp"

namespace {

class AlertsHandler final : public kiwi::InPlaceHandler {
 public:
  explicit AlertsHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  void handle_into(const kiwi::Request& req, kiwi::Response& out) override {
    auto parsed = kiwi_alerts::parse_filter(req);
    if (auto* err = std::get_if<kiwi_alerts::ParamError>(&parsed)) {
      out = kiwi::Response::error(400, err->message, err->parameter);
      return;
    }
    const auto& filter = std::get<kiwi_alerts::Filter>(parsed);
    auto snap = data_.snapshot();
    std::string text =
        kiwi_alerts::render(data_.alerts(), filter, snap->sequence ? snap->timestamp : 0);
    Slot slot;
    {
      std::lock_guard lock(mutex_);
      Slot& last = slots_[filter.slot()];
      if (!last.body || *last.body != text) {
        char etag[24];
        std::snprintf(etag, sizeof etag, "\"a%016zx\"", std::hash<std::string>{}(text));
        last = {std::make_shared<const std::string>(std::move(text)), etag};
      }
      slot = last;
    }
    out.set(200, "application/json", {{"ETag", slot.etag}, {"Cache-Control", "no-cache"}},
            slot.body);
  }

 private:
  // The latest rendering of one filter.
  struct Slot {
    kiwi::Body body;
    std::string etag;
  };
  const kiwi::DataSource& data_;
  std::mutex mutex_;
  std::array<Slot, kiwi_alerts::Filter::kSlots> slots_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(AlertsHandler, "alerts",
                    "the alert instances of the [[alert]] rules as JSON (/api/alerts)",
                    kiwi::no_options)
