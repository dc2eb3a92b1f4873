// /peer/<name>/...: a [[peer]]'s pages and API through this agent (docs/fleet.md), so a browser
// reaches one board and the peers' credentials stay here. Only the peers the configuration names
// (any other name: 404), only GET and HEAD, only paths under the peer's root; each distinct URL is
// fetched at most once per `cache` however many browsers ask (they share the answer and wait for
// the one fetch in flight), within the peer's timeout; a failure is a 502 that says why.
#include <chrono>
#include <condition_variable>
#include <kiwi/handler.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "peer_http.hpp"
#include "peer_path.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr kiwi::OptionSpec kOptions[] = {
    {"cache", kiwi::OptionType::duration, "\"1s\"",
     "an answer of a peer is served again for this long: one fetch per URL per `cache`", true, 100,
     60'000},
    {"max_body", kiwi::OptionType::size, "\"16MiB\"",
     "a peer's answer larger than this is not passed on (502)", true, 1024, 1024.0 * 1024 * 1024},
};

// The cache's bounds: answers kept at most, and their bytes (the oldest go first; an answer
// larger than a quarter of it is served to those who asked, and not kept).
constexpr std::size_t kMaxEntries = 256;
constexpr std::size_t kMaxBytes = 32 * 1024 * 1024;
// A peer that did not answer (no connection, a timeout) is not asked again for this long: its
// pages are a 502 at once, so a board that is off does not hold an HTTP worker per request.
constexpr auto kDownFor = std::chrono::seconds(5);

struct Entry {
  bool fetching = true;
  Clock::time_point fetched;
  kiwi::Response response;
  std::size_t bytes = 0;
};

class PeerHandler final : public kiwi::Handler {
 public:
  explicit PeerHandler(const kiwi::HandlerContext& ctx)
      : prefix_(ctx.route_path.substr(0, ctx.route_path.size() - 1)),  // "/peer/*" -> "/peer/"
        cache_(ctx.options.get_duration("cache")),
        max_body_(static_cast<std::size_t>(ctx.options.get_size("max_body"))) {
    if (!ctx.route_path.ends_with("/*"))
      throw std::runtime_error("the peer handler serves a prefix: path = \"/peer/*\"");
    const std::string user_agent = "kiwi-agent/" + std::string(ctx.agent_version);
    for (const kiwi::Peer& p : ctx.peers)
      clients_.emplace(std::string(p.name), std::make_unique<kiwi_http::PeerClient>(p, user_agent));
  }

  kiwi::Response handle(const kiwi::Request& req) override {
    auto resolved = kiwi_proxy::resolve(req.path, prefix_, req.raw_query);
    if (auto* refused = std::get_if<kiwi_proxy::Refused>(&resolved))
      return kiwi::Response::error(refused->status, refused->message);
    if (auto* redirect = std::get_if<kiwi_proxy::Redirect>(&resolved)) {
      if (!clients_.contains(redirect->location.substr(0, redirect->location.size() - 1)))
        return unknown(redirect->location.substr(0, redirect->location.size() - 1));
      kiwi::Response res;
      res.status = 308;
      res.headers = {{"Location", redirect->location}};
      return res;
    }
    const auto& target = std::get<kiwi_proxy::Target>(resolved);
    auto client = clients_.find(target.name);
    if (client == clients_.end()) return unknown(target.name);
    return answer(*client->second, target.name + target.path_and_query, target.path_and_query);
  }

 private:
  kiwi::Response unknown(std::string_view name) const {
    std::string known;
    for (const auto& [n, c] : clients_) known += (known.empty() ? "" : ", ") + n;
    return kiwi::Response::error(
        404, "no peer named \"" + std::string(name) +
                 "\"; the configured peers: " + (known.empty() ? std::string("none") : known));
  }

  // The cached answer for `key`, or the one fetch of it (others asking meanwhile wait for it;
  // the fetch ends within the peer's timeout).
  kiwi::Response answer(const kiwi_http::PeerClient& client, const std::string& key,
                        const std::string& path_and_query) {
    std::unique_lock lock(mutex_);
    const auto now = Clock::now();
    if (auto down = down_.find(client.name()); down != down_.end()) {
      if (now < down->second.until) return down->second.response;
      down_.erase(down);
    }
    if (auto it = entries_.find(key); it != entries_.end()) {
      const std::shared_ptr<Entry> e = it->second;
      if (e->fetching) {
        fetched_.wait(lock, [&] { return !e->fetching; });
        return e->response;
      }
      if (now - e->fetched < cache_) return e->response;
      bytes_ -= e->bytes;
      entries_.erase(it);
    }
    auto e = std::make_shared<Entry>();
    entries_[key] = e;
    lock.unlock();
    kiwi::Response res;
    bool answered = true;
    try {
      kiwi_http::Fetched f = client.get(path_and_query, max_body_);
      answered = f.answered() || f.error.starts_with("its answer is larger");
      res = respond(client, std::move(f));
    } catch (const std::exception& ex) {  // the waiters must not wait for ever
      res = kiwi::Response::error(502, "peer " + client.name() + ": " + ex.what());
    }
    lock.lock();
    e->fetching = false;
    e->fetched = Clock::now();
    e->response = res;
    e->bytes = res.body ? res.body->size() : 0;
    bytes_ += e->bytes;
    if (!answered) down_[client.name()] = {e->fetched + kDownFor, res};
    prune();
    fetched_.notify_all();
    return res;
  }

  // Expired answers out, then the oldest while there are too many or too many bytes (under
  // mutex_). Answers being fetched stay: their waiters hold them.
  void prune() {
    const auto now = Clock::now();
    auto drop = [&](auto it) {
      bytes_ -= it->second->bytes;
      return entries_.erase(it);
    };
    for (auto it = entries_.begin(); it != entries_.end();)
      it = !it->second->fetching && now - it->second->fetched >= cache_ ? drop(it) : std::next(it);
    while (entries_.size() > kMaxEntries || bytes_ > kMaxBytes) {
      auto oldest = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (!it->second->fetching &&
            (oldest == entries_.end() || it->second->fetched < oldest->second->fetched))
          oldest = it;
      if (oldest == entries_.end()) break;
      drop(oldest);
    }
  }

  // The peer's answer as this agent's: its status, type, ETag, Cache-Control and body; its
  // refusal of our credentials and any failure to answer as a 502 that names the peer.
  static kiwi::Response respond(const kiwi_http::PeerClient& client, kiwi_http::Fetched f) {
    const std::string who = "peer " + client.name() + ": ";
    if (!f.answered()) return kiwi::Response::error(502, who + f.error);
    if (f.status == 401 || f.status == 403)
      return kiwi::Response::error(502, who + "HTTP " + std::to_string(f.status) +
                                            ": it refused this agent's credentials (see its "
                                            "[[peer]] bearer_token_file or basic_auth)");
    if (f.status < 200 || f.status > 599 || (f.status >= 300 && f.status < 400))
      return kiwi::Response::error(502, who + "HTTP " + std::to_string(f.status) +
                                            " is not passed on (a redirect leaves the peer's "
                                            "pages)");
    kiwi::Response res;
    res.status = static_cast<int>(f.status);
    res.content_type = f.content_type.empty() ? "application/octet-stream" : f.content_type;
    if (!f.etag.empty()) res.headers.push_back({"ETag", f.etag});
    res.headers.push_back(
        {"Cache-Control", f.cache_control.empty() ? std::string("no-cache") : f.cache_control});
    res.body = std::make_shared<const std::string>(std::move(f.body));
    return res;
  }

  const std::string prefix_;
  const std::chrono::milliseconds cache_;
  const std::size_t max_body_;
  std::map<std::string, std::unique_ptr<kiwi_http::PeerClient>, std::less<>> clients_;

  std::mutex mutex_;  // guards what follows
  std::condition_variable fetched_;
  std::map<std::string, std::shared_ptr<Entry>, std::less<>> entries_;
  std::size_t bytes_ = 0;  // of the answers in entries_
  struct Down {
    Clock::time_point until;
    kiwi::Response response;  // its 502
  };
  std::map<std::string, Down, std::less<>> down_;  // by peer name
};

}  // namespace

KIWI_HANDLER_PLUGIN(PeerHandler, "peer",
                    "a [[peer]]'s pages and API under /peer/<name>/ (bounded, cached)", kOptions)
