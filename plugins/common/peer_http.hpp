// GETs from a [[peer]] (another kiwi-agent) with libcurl, shared by the handlers that read peers:
// fleet (/api/fleet, every peer's row once per interval) and peer (/peer/<name>/..., its pages).
// The peer's credentials are read from their files here and sent only to that peer; the answer's
// errors name the peer's origin, never a secret.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <kiwi/handler.hpp>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi_http {

// What one GET brought back.
struct Fetched {
  // "" when the peer answered (any status); else why not, e.g. "timeout after 2 s
  // (http://barn:8095)", "connection refused (...)", "answer larger than 16777216 bytes".
  std::string error;
  long status = 0;  // the HTTP status when it answered
  std::string content_type;
  std::string etag;           // "" none
  std::string cache_control;  // "" none
  std::string body;
  double seconds = 0;  // how long it took
  bool answered() const { return error.empty(); }
};

class PeerClient {
 public:
  // Reads the peer's credentials (bearer_token_file, basic auth's password_file). Throws
  // std::runtime_error naming the peer and the file when one cannot be read or is empty.
  PeerClient(const kiwi::Peer& peer, std::string_view user_agent);
  ~PeerClient();
  PeerClient(const PeerClient&) = delete;
  PeerClient& operator=(const PeerClient&) = delete;

  const std::string& name() const { return name_; }
  const std::string& url() const { return url_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // One GET of url() + `path_and_query` (which starts with '/'), within the peer's timeout, its
  // body at most `max_body` bytes. Thread-safe: each call takes a connection handle of its own
  // (kept for the next call, so connections are reused).
  Fetched get(std::string_view path_and_query, std::size_t max_body) const;

  struct Handle;  // one libcurl handle and what a transfer fills in (peer_http.cpp)

 private:
  friend class PeerRounds;
  std::unique_ptr<Handle> take() const;
  void give_back(std::unique_ptr<Handle> h) const;
  void prepare(Handle& h, std::string_view path_and_query, std::size_t max_body) const;
  Fetched finish(Handle& h, int curl_code) const;

  std::string name_;
  std::string url_;
  std::chrono::milliseconds timeout_;
  std::string user_agent_;
  std::string bearer_;  // "Authorization: Bearer ..." ("" none)
  std::string username_, password_;
  std::string ca_file_;
  std::vector<std::string> secrets_;
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Handle>> pool_;  // idle handles, their connections open
};

// Rounds of one GET to each of a set of peers at once, on the calling thread (libcurl's multi
// interface). One object for a poller's life: its connections stay open from round to round.
class PeerRounds {
 public:
  PeerRounds();  // loads libcurl (curl_dl.hpp); throws std::runtime_error if it cannot
  ~PeerRounds();
  PeerRounds(const PeerRounds&) = delete;
  PeerRounds& operator=(const PeerRounds&) = delete;

  // GETs `path_and_query` from every client, each within its own peer's timeout, and returns
  // their answers in the order of `clients` once all are done, or once `stop` is set (looked at
  // every 100 ms; an unfinished one then says "stopped").
  std::vector<Fetched> get_all(std::span<const PeerClient* const> clients,
                               std::string_view path_and_query, std::size_t max_body,
                               const std::atomic<bool>& stop);

 private:
  void* multi_;  // CURLM*
};

}  // namespace kiwi_http
