// /api/current: the latest snapshot, rendered once per tick by the agent and served as is.
#include <chrono>
#include <kiwi/handler.hpp>

namespace {

class CurrentHandler final : public kiwi::Handler {
 public:
  explicit CurrentHandler(const kiwi::HandlerContext& ctx) : data_(ctx.data) {}

  kiwi::Response handle(const kiwi::Request& req) override {
    auto snap = data_.snapshot();
    if (snap->sequence == 0) return kiwi::Response::error(503, "no sample yet; retry in a second");
    double now = std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    const bool stale = now - snap->timestamp > snap->stale_after_seconds;
    // The body differs between fresh and stale for one sequence, so the ETag does too.
    std::string etag = "\"" + std::to_string(snap->sequence) + (stale ? "s\"" : "\"");
    kiwi::Response res;
    res.headers = {{"ETag", etag}, {"Cache-Control", "no-cache"}};
    if (auto inm = req.header("If-None-Match"); inm && *inm == etag) {
      res.status = 304;
      res.content_type.clear();
      return res;
    }
    res.body = stale ? snap->json_stale : snap->json;
    if (!stale) res.body_gzip = snap->json_gzip;
    return res;
  }

 private:
  const kiwi::DataSource& data_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(CurrentHandler, "current", "the latest sample as JSON (/api/current)",
                    kiwi::no_options)
