#include "peer_http.hpp"

#include "curl_dl.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>

#include "http_post.hpp"

namespace kiwi_http {

struct PeerClient::Handle {
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  std::string url;
  std::string body;
  std::string etag, cache_control;
  std::size_t max_body = 0;
  bool too_large = false;
  char error[CURL_ERROR_SIZE] = {};
  Handle() : curl(curl_api().easy_init()) {
    if (!curl) throw std::runtime_error("curl_easy_init failed");
  }
  ~Handle() {
    curl_api().slist_free_all(headers);
    curl_api().easy_cleanup(curl);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

namespace {

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto& h = *static_cast<PeerClient::Handle*>(user);  // NOLINT: curl's callback shape
  const size_t bytes = size * n;
  if (h.body.size() + bytes > h.max_body) {
    h.too_large = true;
    return 0;  // stops the transfer (CURLE_WRITE_ERROR)
  }
  h.body.append(data, bytes);
  return bytes;
}

bool header_is(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

std::string header_value(std::string_view line, std::size_t name_size) {
  std::string_view v = line.substr(name_size + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
    v.remove_suffix(1);
  return std::string(v);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto& h = *static_cast<PeerClient::Handle*>(user);  // NOLINT: curl's callback shape
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue): forget the last
    h.etag.clear();
    h.cache_control.clear();
  } else if (header_is(line, "etag")) {
    h.etag = header_value(line, 4);
  } else if (header_is(line, "cache-control")) {
    h.cache_control = header_value(line, 13);
  }
  return size * n;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  const auto n = ms.count();
  return n % 1000 == 0 ? std::to_string(n / 1000) + " s" : std::to_string(n) + " ms";
}

}  // namespace

PeerClient::PeerClient(const kiwi::Peer& peer, std::string_view user_agent)
    : name_(peer.name),
      url_(peer.url),
      timeout_(peer.timeout),
      user_agent_(user_agent),
      ca_file_(peer.ca_file) {
  curl_api();  // libcurl is loaded here, by the first peer (curl_dl.hpp)
  const std::string where = "peer " + name_ + ": ";
  try {
    if (!peer.bearer_token_file.empty()) {
      const std::string token =
          read_secret(std::string(peer.bearer_token_file), "bearer_token_file");
      if (token.empty())
        throw std::runtime_error("bearer_token_file: " + std::string(peer.bearer_token_file) +
                                 " holds no token");
      bearer_ = "Authorization: Bearer " + token;
      secrets_.push_back(token);
    }
    if (!peer.username.empty()) {
      username_ = peer.username;
      password_ = read_secret(std::string(peer.password_file), "basic_auth.password_file");
      secrets_.push_back(password_);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(where + e.what());
  }
}

PeerClient::~PeerClient() = default;

std::unique_ptr<PeerClient::Handle> PeerClient::take() const {
  {
    std::lock_guard lock(pool_mutex_);
    if (!pool_.empty()) {
      auto h = std::move(pool_.back());
      pool_.pop_back();
      return h;
    }
  }
  return std::make_unique<Handle>();
}

void PeerClient::give_back(std::unique_ptr<Handle> h) const {
  h->body = std::string();  // a large page is not kept alive in the pool
  std::lock_guard lock(pool_mutex_);
  if (pool_.size() < 4) pool_.push_back(std::move(h));
}

void PeerClient::prepare(Handle& h, std::string_view path_and_query, std::size_t max_body) const {
  CURL* curl = h.curl;
  // Reset keeps the connection cache: the next GET reuses the kept-alive connection.
  curl_api().easy_reset(curl);
  curl_api().slist_free_all(h.headers);
  h.headers = nullptr;
  if (!bearer_.empty()) h.headers = curl_api().slist_append(h.headers, bearer_.c_str());
  h.url = url_ + std::string(path_and_query);
  h.body.clear();
  h.etag.clear();
  h.cache_control.clear();
  h.max_body = max_body;
  h.too_large = false;
  h.error[0] = 0;
  curl_api().easy_setopt(curl, CURLOPT_URL, h.url.c_str());
  curl_api().easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_api().easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  // Straight to the peer: not through a proxy that http_proxy or ALL_PROXY in the agent's
  // environment name, which would see the peer's credentials.
  curl_api().easy_setopt(curl, CURLOPT_PROXY, "");
  curl_api().easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  curl_api().easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is the peer's answer
  curl_api().easy_setopt(curl, CURLOPT_USERAGENT, user_agent_.c_str());
  curl_api().easy_setopt(curl, CURLOPT_HTTPHEADER, h.headers);
  curl_api().easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
  curl_api().easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
  curl_api().easy_setopt(curl, CURLOPT_WRITEFUNCTION, &on_body);
  curl_api().easy_setopt(curl, CURLOPT_WRITEDATA, &h);
  curl_api().easy_setopt(curl, CURLOPT_HEADERFUNCTION, &on_header);
  curl_api().easy_setopt(curl, CURLOPT_HEADERDATA, &h);
  curl_api().easy_setopt(curl, CURLOPT_ERRORBUFFER, h.error);
  if (!ca_file_.empty()) curl_api().easy_setopt(curl, CURLOPT_CAINFO, ca_file_.c_str());
  if (!username_.empty()) {
    curl_api().easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_api().easy_setopt(curl, CURLOPT_USERNAME, username_.c_str());
    curl_api().easy_setopt(curl, CURLOPT_PASSWORD, password_.c_str());
  }
}

Fetched PeerClient::finish(Handle& h, int curl_code) const {
  Fetched f;
  double seconds = 0;
  curl_api().easy_getinfo(h.curl, CURLINFO_TOTAL_TIME, &seconds);
  f.seconds = seconds;
  const auto rc = static_cast<CURLcode>(curl_code);
  if (h.too_large) {
    f.error = "its answer is larger than " + std::to_string(h.max_body) + " bytes";
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    f.error = "no answer within " + seconds_text(timeout_);
  } else if (rc != CURLE_OK) {
    f.error = h.error[0] ? std::string(h.error) : std::string(curl_api().easy_strerror(rc));
  }
  if (!f.error.empty()) {
    f.error = redact(f.error + " (" + url_origin(url_) + ")", secrets_);
    return f;
  }
  curl_api().easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &f.status);
  const char* type = nullptr;
  curl_api().easy_getinfo(h.curl, CURLINFO_CONTENT_TYPE, &type);
  if (type) f.content_type = type;
  f.etag = std::move(h.etag);
  f.cache_control = std::move(h.cache_control);
  f.body = std::move(h.body);
  return f;
}

Fetched PeerClient::get(std::string_view path_and_query, std::size_t max_body) const {
  auto h = take();
  prepare(*h, path_and_query, max_body);
  const CURLcode rc = curl_api().easy_perform(h->curl);
  Fetched f = finish(*h, rc);
  give_back(std::move(h));
  return f;
}

PeerRounds::PeerRounds() : multi_(curl_api().multi_init()) {
  if (!multi_) throw std::runtime_error("curl_multi_init failed");
}

PeerRounds::~PeerRounds() {
  curl_api().multi_cleanup(static_cast<CURLM*>(multi_));
}

std::vector<Fetched> PeerRounds::get_all(std::span<const PeerClient* const> clients,
                                         std::string_view path_and_query, std::size_t max_body,
                                         const std::atomic<bool>& stop) {
  const CurlApi& api = curl_api();
  auto* multi = static_cast<CURLM*>(multi_);
  std::vector<Fetched> out(clients.size());
  for (auto& f : out) f.error = "stopped";  // until its transfer is done
  std::vector<std::unique_ptr<PeerClient::Handle>> handles(clients.size());
  // Every handle taken is removed from the multi and given back, whatever happens.
  struct Release {
    const CurlApi& api;
    CURLM* multi;
    std::span<const PeerClient* const> clients;
    std::vector<std::unique_ptr<PeerClient::Handle>>& handles;
    ~Release() {
      for (std::size_t i = 0; i < handles.size(); ++i)
        if (handles[i]) {
          api.multi_remove_handle(multi, handles[i]->curl);
          clients[i]->give_back(std::move(handles[i]));
        }
    }
  } release{api, multi, clients, handles};
  for (std::size_t i = 0; i < clients.size(); ++i) {
    handles[i] = clients[i]->take();
    clients[i]->prepare(*handles[i], path_and_query, max_body);
    api.multi_add_handle(multi, handles[i]->curl);
  }
  auto collect = [&] {
    int queued = 0;
    while (CURLMsg* msg = api.multi_info_read(multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      for (std::size_t i = 0; i < handles.size(); ++i)
        if (handles[i] && handles[i]->curl == msg->easy_handle)
          out[i] = clients[i]->finish(*handles[i], msg->data.result);
    }
  };
  int running = 0;
  do {
    if (api.multi_perform(multi, &running) != CURLM_OK) break;
    collect();
    if (running && !stop) api.multi_poll(multi, nullptr, 0, 100, nullptr);
  } while (running && !stop);
  collect();  // transfers that ended in the last perform
  return out;
}

}  // namespace kiwi_http
