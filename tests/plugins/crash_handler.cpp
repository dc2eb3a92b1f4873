// A route handler whose handle() dereferences a null pointer: the agent dies of SIGSEGV, and its
// last log line names the route (fatal_signal.hpp).
#include <kiwi/handler.hpp>

namespace {
struct Crashes final : kiwi::Handler {
  explicit Crashes(const kiwi::HandlerContext&) {}
  kiwi::Response handle(const kiwi::Request&) override {
    volatile int* nowhere = nullptr;
    return kiwi::Response::error(500, std::to_string(*nowhere));
  }
};
}  // namespace

KIWI_HANDLER_PLUGIN(Crashes, "crashes", "dereferences null in handle() (test plugin)",
                    kiwi::no_options)
