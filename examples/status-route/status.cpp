// A complete route-handler plugin: every sensor's state as plain text, one line each, for a shell
// script, an LCD or `watch curl`:
//   [[route]]
//   path = "/status.txt"
//   handler = "status"          # kiwi-handler-status.so
//   options = { only_failing = false }
#include <kiwi/handler.hpp>

namespace {

constexpr kiwi::OptionSpec kOptions[] = {
    {"only_failing", kiwi::OptionType::boolean, "false", "list only sensors that are not ok"}};

class StatusHandler final : public kiwi::Handler {
 public:
  explicit StatusHandler(const kiwi::HandlerContext& ctx)
      : data_(ctx.data), only_failing_(ctx.options.get_bool("only_failing")) {}

  // Called from several HTTP worker threads at once: it only reads the shared snapshot.
  kiwi::Response handle(const kiwi::Request&) override {
    auto snap = data_.snapshot();  // the latest sample; sequence 0 before the first one
    std::string text;
    for (const auto& s : snap->sensors) {
      if (only_failing_ && s.state == kiwi::SensorState::ok) continue;
      text += s.name + " " + std::string(kiwi::to_string(s.state)) + " " +
              std::to_string(s.metrics.size()) + " metrics";
      if (!s.message.empty()) text += ": " + s.message;
      text += "\n";
    }
    kiwi::Response r;
    r.content_type = "text/plain; charset=utf-8";
    r.headers.push_back({"Cache-Control", "no-cache"});
    r.body = std::make_shared<const std::string>(std::move(text));
    return r;
  }

 private:
  const kiwi::DataSource& data_;
  bool only_failing_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(StatusHandler, "status", "sensor states as plain text", kOptions)
