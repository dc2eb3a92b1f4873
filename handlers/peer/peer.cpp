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

// Answers kept at most (the oldest go first); each one is at most max_body.
constexpr std::size_t kMaxEntries = 256;

struct Entry {
  bool fetching = true;
  Clock::time_point fetched;
  kiwi::Response response;
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

  // The cached answer for `key`, or the one fetch of it (others asking meanwhile wait for it).
  kiwi::Response answer(const kiwi_http::PeerClient& client, const std::string& key,
                        const std::string& path_and_query) {
    std::unique_lock lock(mutex_);
    for (;;) {
      auto it = entries_.find(key);
      if (it == entries_.end()) break;
      if (it->second.fetching) {
        fetched_.wait(lock);
        continue;
      }
      if (Clock::now() - it->second.fetched < cache_) return it->second.response;
      entries_.erase(it);
      break;
    }
    prune();
    entries_[key];  // fetching
    lock.unlock();
    kiwi::Response res;
    try {
      res = respond(client, client.get(path_and_query, max_body_));
    } catch (const std::exception& e) {  // the waiters must not wait for ever
      res = kiwi::Response::error(502, "peer " + client.name() + ": " + e.what());
    }
    lock.lock();
    Entry& e = entries_[key];
    e.fetching = false;
    e.fetched = Clock::now();
    e.response = res;
    fetched_.notify_all();
    return res;
  }

  // Expired answers out; the oldest out while there are too many (under mutex_).
  void prune() {
    const auto now = Clock::now();
    for (auto it = entries_.begin(); it != entries_.end();)
      it = !it->second.fetching && now - it->second.fetched >= cache_ ? entries_.erase(it)
                                                                      : std::next(it);
    while (entries_.size() >= kMaxEntries) {
      auto oldest = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (!it->second.fetching &&
            (oldest == entries_.end() || it->second.fetched < oldest->second.fetched))
          oldest = it;
      if (oldest == entries_.end()) break;
      entries_.erase(oldest);
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

  std::mutex mutex_;  // guards entries_
  std::condition_variable fetched_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(PeerHandler, "peer",
                    "a [[peer]]'s pages and API under /peer/<name>/ (bounded, cached)", kOptions)
