// /api/history: the latest samples as columnar JSON, read through the agent's read-only store.
#include <kiwi/handler.hpp>

#include "history_render.hpp"

namespace {

class HistoryHandler final : public kiwi::Handler {
 public:
  explicit HistoryHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  kiwi::Response handle(const kiwi::Request& req) override {
    auto parsed = kiwi_history::parse_query(req);
    if (auto* err = std::get_if<kiwi_history::ParamError>(&parsed))
      return kiwi::Response::error(400, err->message, err->parameter);
    kiwi::Response res;
    res.headers = {{"Cache-Control", "no-cache"}};
    res.body = std::make_shared<const std::string>(
        kiwi_history::render(data_.history(std::get<kiwi::HistoryQuery>(parsed))));
    return res;
  }

 private:
  const kiwi::DataSource& data_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(HistoryHandler, "history", "columnar sample history (/api/history)",
                    kiwi::no_options)
