#include "http_post.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <mutex>
#include <stdexcept>

namespace kiwi_http {

namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Keeps the first 4 KiB of the answer: a reason shows 256 bytes of it.
size_t collect(char* data, size_t size, size_t n, void* out) {
  auto& body = *static_cast<std::string*>(out);
  if (body.size() < 4096) body.append(data, std::min<size_t>(size * n, 4096 - body.size()));
  return size * n;
}

}  // namespace

Target target_from(const kiwi::Options& options, std::string_view url_example,
                   std::string_view token_key) {
  Target t;
  t.url = options.get_string("url");
  if (t.url.empty())
    throw std::runtime_error("url is required, e.g. url = \"" + std::string(url_example) + "\"");
  if (!t.url.starts_with("http://") && !t.url.starts_with("https://"))
    throw std::runtime_error(t.url.find("://") == std::string::npos
                                 ? "url is not a URL: it must start with http:// or https://"
                                 : "url \"" + url_origin(t.url) +
                                       "...\" is not an http:// or https:// URL");
  t.timeout = options.get_duration("timeout");
  t.headers = options.get_table("headers");
  std::string password_file;
  for (const auto& [k, v] : options.get_table("basic_auth")) {
    if (k == "username")
      t.username = v;
    else if (k == "password_file")
      password_file = v;
    else
      throw std::runtime_error("basic_auth: unknown key '" + k +
                               "'; accepted: username, password_file");
  }
  if (!password_file.empty() && t.username.empty())
    throw std::runtime_error("basic_auth: password_file without username");
  if (!t.username.empty()) t.password = read_secret(password_file, "basic_auth.password_file");
  if (!token_key.empty()) {
    if (const std::string& file = options.get_string(token_key); !file.empty()) {
      t.bearer_token = read_secret(file, token_key);
      if (t.bearer_token.empty())
        throw std::runtime_error(std::string(token_key) + ": " + file + " holds no token");
    }
  }
  if (!t.username.empty() && !t.bearer_token.empty())
    throw std::runtime_error("basic_auth and " + std::string(token_key) +
                             " both given: a request carries one Authorization; choose one");
  for (const auto& [k, v] : t.headers)
    if (same_name(k, "Authorization") && (!t.username.empty() || !t.bearer_token.empty()))
      throw std::runtime_error("headers: Authorization and " +
                               std::string(t.username.empty() ? token_key : "basic_auth") +
                               " both given; choose one");
  return t;
}

kiwi::WriteResult verdict(long status, std::string_view body) {
  std::string why = "HTTP " + std::to_string(status);
  std::string text(body.substr(0, 256));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  for (auto& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  if (!text.empty()) why += ": " + text;
  if (status >= 200 && status < 300) return kiwi::WriteResult::ok();
  if (status == 429 || status >= 500) return kiwi::WriteResult::retry(why);
  if (status >= 400) return kiwi::WriteResult::drop(why);
  return kiwi::WriteResult::retry(why + " (unexpected status)");
}

Client::Client(Target target, std::string_view user_agent) : target_(std::move(target)) {
  secrets_ = {target_.password, target_.bearer_token};
  for (const auto& [k, v] : target_.headers)
    if (same_name(k, "Authorization")) secrets_.push_back(v);
  static std::once_flag global;
  std::call_once(global, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
  if (!curl_) throw std::runtime_error("curl_easy_init failed");
  target_.headers.insert(target_.headers.begin(), {"User-Agent", std::string(user_agent)});
  if (!target_.bearer_token.empty())
    target_.headers.emplace_back("Authorization", "Bearer " + target_.bearer_token);
}

Client::~Client() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

kiwi::WriteResult Client::post(std::string_view body, std::span<const std::string> headers) {
  CURL* curl = static_cast<CURL*>(curl_);
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  for (const auto& [k, v] : target_.headers) list = curl_slist_append(list, (k + ": " + v).c_str());
  std::string answer;
  char error[CURL_ERROR_SIZE] = {};
  // Reset keeps the connection cache: the next POST reuses the kept-alive connection.
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, target_.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(target_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(target_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  if (!target_.username.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, target_.username.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, target_.password.c_str());
  }
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(list);
  if (rc != CURLE_OK)
    return kiwi::WriteResult::retry(redact(std::string(curl_easy_strerror(rc)) +
                                               (error[0] ? std::string(": ") + error : "") + " (" +
                                               url_origin(target_.url) + ")",
                                           secrets_));
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  kiwi::WriteResult r = verdict(status, answer);
  r.reason = redact(std::move(r.reason), secrets_);
  return r;
}

}  // namespace kiwi_http
