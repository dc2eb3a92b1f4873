// /api/plugins: every loaded plugin instance, its file, kind, ABI version and status.
#include <kiwi/handler.hpp>
#include <map>

namespace {

class PluginsHandler final : public kiwi::Handler {
 public:
  explicit PluginsHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  kiwi::Response handle(const kiwi::Request&) override {
    auto snap = data_.snapshot();
    auto stats = data_.stats();
    std::map<std::string_view, const kiwi::SensorReport*> reports;
    for (auto& r : snap->sensors) reports.emplace(r.name, &r);

    std::string body = "{\"plugins\":[";
    bool first = true;
    for (auto& p : stats.plugins) {
      if (!first) body += ',';
      first = false;
      const bool sensor = p.kind == kiwi::PluginKind::sensor;
      // A route is named by its path; a sensor and an output ([[remote_write]]) by their name.
      body += p.kind == kiwi::PluginKind::handler ? "{\"route\":" : "{\"name\":";
      kiwi::append_json_string(body, p.name);
      body += ",\"kind\":";
      kiwi::append_json_string(body, kiwi::to_string(p.kind));
      body += ",\"plugin\":";
      kiwi::append_json_string(body, p.plugin);
      body += ",\"file\":";
      kiwi::append_json_string(body, p.file);
      body += ",\"abi_version\":" + std::to_string(p.abi_major) +
              ",\"abi_minor\":" + std::to_string(p.abi_minor);
      auto it = reports.find(p.name);
      if (sensor && it != reports.end()) {
        const kiwi::SensorReport& r = *it->second;
        body += ",\"status\":";
        kiwi::append_json_string(body, kiwi::to_string(r.state));
        body += ",\"last_error\":";
        if (r.state == kiwi::SensorState::error)
          kiwi::append_json_string(body, r.message);
        else
          body += "null";
        if (!r.message.empty() && r.state != kiwi::SensorState::error) {
          body += ",\"message\":";
          kiwi::append_json_string(body, r.message);
        }
        char buf[64];
        std::snprintf(buf, sizeof buf, ",\"last_sample_duration_seconds\":%.6f",
                      r.duration_seconds);
        body += buf;
        body += ",\"errors_total\":" + std::to_string(r.errors_total);
        body += ",\"invalid_metrics_total\":" + std::to_string(r.invalid_metrics_total);
      } else {
        body += ",\"status\":\"ok\"";
      }
      body += '}';
    }
    body += ']';
    kiwi::append_config_status_json(body, stats.config);
    body += '}';
    kiwi::Response res;
    res.headers = {{"Cache-Control", "no-cache"}};
    res.body = std::make_shared<const std::string>(std::move(body));
    return res;
  }

 private:
  const kiwi::DataSource& data_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(PluginsHandler, "plugins", "loaded plugins and their status (/api/plugins)",
                    kiwi::no_options)
