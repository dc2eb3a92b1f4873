// kiwi-agent plugin SDK: notifier plugins (since ABI 1.6).
//
// A notifier is transport only. The agent evaluates the [[alert]] rules, keeps the queue of alert
// transitions in its database, and decides what to send and when (every firing and resolve in
// order, reminders while an alert fires, retries with backoff); the notifier formats one
// Notification (kiwi/model.hpp) for its receiver, sends it, and says how it went, as an output
// does (kiwi/output.hpp):
//   WriteResult::ok()            the receiver took it (2xx): the agent goes on with the next;
//   WriteResult::retry("why")    not now (no connection, timeout, 5xx, 429): sent again later;
//   WriteResult::drop("why")     refused for good (another 4xx): logged, counted, skipped.
// A reason never holds a credential: the agent logs it and shows it in /api/health.
//
// Life cycle and threading:
//   - The factory runs once per [[notify]] entry, on the main thread. It may throw
//     std::exception to refuse the configuration (start-up exits 2, a reload changes nothing).
//   - send() runs on the notifier's own thread, at most one call at a time per object. It may
//     block on the network, but should give up within its own timeout: a reload and the agent's
//     stop wait for the call in progress. A send() that throws is a retry.
//   - After a retry, and after a restart that came before the agent recorded an ok, the same
//     transitions may be sent again: a receiver sees at least once, in order.
//   - The object is destroyed before its shared object is unloaded.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kiwi/abi.hpp"
#include "kiwi/model.hpp"
#include "kiwi/output.hpp"
#include "kiwi/plugin.hpp"
#include "kiwi/views.hpp"

namespace kiwi {

class Notifier {
 public:
  virtual ~Notifier() = default;
  // Send one notification; see the header comment for threading and results.
  virtual WriteResult send(const Notification& notification) = 0;
};

// Handed to the factory; valid only during the factory call (copy what you keep).
struct NotifierContext {
  std::string_view instance_name;  // [[notify]] name, unique in the config
  std::string_view host_name;      // gethostname(), the `instance` label
  std::string_view agent_version;
  const Options& options;
  Logger& log;  // outlives the object
};

}  // namespace kiwi

namespace kiwi::abi {

struct NotifierBox {
  explicit NotifierBox(const kiwi_notifier_context* c)
      : log(c->host), options(options_from(c->options, c->option_count)) {}
  HostLogger log;
  Options options;
  std::unique_ptr<Notifier> notifier;  // goes first: it may log in its destructor
  ~NotifierBox() { notifier.reset(); }
};

template <class Class>
void* create_notifier(const kiwi_notifier_context* c, const kiwi_refusal* refusal) noexcept {
  return refusing(refusal, [&]() -> void* {
    auto box = std::make_unique<NotifierBox>(c);
    const NotifierContext ctx{view(c->instance_name), view(c->host_name), view(c->agent_version),
                              box->options, box->log};
    box->notifier = std::make_unique<Class>(ctx);
    return box.release();
  });
}

inline std::uint32_t send_notification(void* instance, const kiwi_notification* notification,
                                       const kiwi_output_result* result) noexcept {
  return answer(result, [&] {
    return static_cast<NotifierBox*>(instance)->notifier->send(notification_from(*notification));
  });
}

inline void destroy_notifier(void* instance) noexcept {
  delete static_cast<NotifierBox*>(instance);
}

template <class Class>
const kiwi_plugin* notifier_descriptor(std::string_view name, std::string_view description,
                                       std::span<const OptionSpec> options) {
  Functions fn;
  fn.notifier_create = &create_notifier<Class>;
  fn.notifier_send = &send_notification;
  fn.destroy = &destroy_notifier;
  static const Descriptor d(PluginKind::notifier, name, description, options, no_metrics, fn);
  return &d.plugin;
}

}  // namespace kiwi::abi

// Declares a notifier plugin. Use once, in one source file of the plugin:
//   KIWI_NOTIFIER_PLUGIN(Ntfy, "ntfy", "alerts to an ntfy topic", kOptions)
// CLASS must be constructible from (const kiwi::NotifierContext&). The plugin's file is
// kiwi-notifier-<NAME>.so (add_kiwi_plugin(notifier <NAME> ...)).
#define KIWI_NOTIFIER_PLUGIN(CLASS, NAME, DESCRIPTION, OPTIONS)                                   \
  extern "C" KIWI_PLUGIN_EXPORT const kiwi_plugin* kiwi_plugin_v1(void) {                         \
    return ::kiwi::abi::notifier_descriptor<CLASS>(NAME, DESCRIPTION,                             \
                                                   std::span<const ::kiwi::OptionSpec>(OPTIONS)); \
  }
