// /api/health: 200 when the agent is sampling, storing and every sensor works; 503 with reasons.
#include <chrono>
#include <kiwi/handler.hpp>

#include "health_render.hpp"

namespace {

class HealthHandler final : public kiwi::Handler {
 public:
  explicit HealthHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  kiwi::Response handle(const kiwi::Request&) override {
    auto snap = data_.snapshot();
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    kiwi_health::Health h = kiwi_health::check(*snap, data_.stats(), now);
    kiwi::Response res;
    res.status = h.status;
    res.headers = {{"Cache-Control", "no-store"}};
    res.body = std::make_shared<const std::string>(std::move(h.body));
    return res;
  }

 private:
  const kiwi::DataSource& data_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(HealthHandler, "health", "liveness and the reasons for failing (/api/health)",
                    kiwi::no_options)
