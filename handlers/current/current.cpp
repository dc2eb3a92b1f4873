// /api/current: the latest snapshot, rendered once per tick by the agent and served as is (gzip
// made on the first request that asks for it).
#include <chrono>
#include <kiwi/gzip.hpp>
#include <kiwi/handler.hpp>

namespace {

constexpr std::string_view kFresh = "\"stale\":false";
constexpr std::string_view kStale = "\"stale\":true";

// The snapshot body with "stale":true. Only while the collector is stuck, so made per request.
kiwi::Body stale_body(const std::string& fresh) {
  auto out = std::make_shared<std::string>(fresh);
  if (auto at = out->find(kFresh); at != std::string::npos) out->replace(at, kFresh.size(), kStale);
  return out;
}

class CurrentHandler final : public kiwi::Handler {
 public:
  explicit CurrentHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  kiwi::Response handle(const kiwi::Request& req) override {
    auto snap = data_.snapshot();
    if (snap->sequence == 0) return kiwi::Response::error(503, "no sample yet; retry in a second");
    double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const bool stale = now - snap->timestamp > snap->stale_after_seconds;
    // The body differs between fresh and stale for one sequence, so the ETag does too.
    std::string etag = "\"" + std::to_string(snap->sequence) + (stale ? "s\"" : "\"");
    kiwi::Response res;
    res.headers = {{"ETag", etag}, {"Cache-Control", "no-cache"}};
    if (stale)
      res.body = stale_body(*snap->json->body());
    else
      snap->json->serve(res, req);
    return res;
  }

 private:
  const kiwi::DataSource& data_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(CurrentHandler, "current", "the latest sample as JSON (/api/current)",
                    kiwi::no_options)
