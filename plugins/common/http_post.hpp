// One HTTP POST with libcurl, shared by the plugins that push to a receiver (remote_write and the
// notifiers): the options they all take (url, timeout, headers, basic_auth, a bearer token file),
// credentials read from files, and the receiver's answer as ok / retry / drop with a bounded reason
// that holds no credential. plugins/common is not a plugin: a static library linked into each of
// them, so libcurl is loaded only with a plugin that needs it.
#pragma once

#include <chrono>
#include <kiwi/output.hpp>
#include <kiwi/plugin.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiwi_http {

// Option rows for a plugin's table, so each option is declared and described once.
inline constexpr kiwi::OptionSpec kTimeoutOption{
    "timeout", kiwi::OptionType::duration,
    "\"5s\"",  "how long one request may take (connect, send, answer) before it is retried",
    true,      100,
    300'000};
inline constexpr kiwi::OptionSpec kHeadersOption{
    "headers", kiwi::OptionType::string_table, "{}",
    "extra request headers, e.g. { \"X-Scope-OrgID\" = \"kiwi\" }"};
inline constexpr kiwi::OptionSpec kBasicAuthOption{
    "basic_auth", kiwi::OptionType::string_table, "{}",
    "{ username = \"...\", password_file = \"/etc/kiwi-agent/x.pass\" }: HTTP basic "
    "authentication, the password read from the file (its first line)"};
inline constexpr kiwi::OptionSpec kBearerTokenFileOption{
    "bearer_token_file", kiwi::OptionType::string, "\"\"",
    "a file whose first line is a token, sent as Authorization: Bearer <token> (\"\": none)"};

// Where and how to POST.
struct Target {
  std::string url;
  std::chrono::milliseconds timeout{5000};
  std::vector<std::pair<std::string, std::string>> headers;  // the user's, sent with every request
  std::string username;                                      // basic authentication ("": none)
  std::string password;
  std::string bearer_token;  // Authorization: Bearer ("": none)
};

// The target of a plugin's options: `url` (required, http:// or https://; `url_example` is shown
// when it is missing), `timeout`, `headers`, `basic_auth` and, when `token_key` is not empty, the
// token file option of that name. Credentials are read from their files here (at create, so at
// start and at each reload). Throws std::runtime_error naming the option; never its secret.
Target target_from(const kiwi::Options& options, std::string_view url_example,
                   std::string_view token_key);

// The first line of a credentials file, without trailing blanks; throws std::runtime_error naming
// `option` and the file when it cannot be read or holds nothing.
std::string read_secret(const std::string& file, std::string_view option);

// The scheme, host and port of `url`, for reasons and logs: http://u:p@host:9093/x?t=1 ->
// http://host:9093. Not the user and password a user may have written into it, nor the path and
// query, which may be a credential themselves (Slack's and Discord's webhook URLs are).
std::string url_origin(std::string_view url);

// `text` with each occurrence of a secret (empty ones ignored) replaced by "<secret>".
std::string redact(std::string text, std::span<const std::string> secrets);

// An HTTP status as the verdict: 2xx ok; 429 and 5xx retry; other 4xx drop (as Prometheus does);
// anything else retry. The reason is "HTTP <status>: " and the first 256 bytes of `body` (the
// receiver's words, on one line).
kiwi::WriteResult verdict(long status, std::string_view body);

// One keep-alive connection's worth of state: POSTs are made one at a time (a plugin's write or
// send is never concurrent), so the handle needs no lock.
class Client {
 public:
  // `user_agent`: "kiwi-agent/<version>".
  Client(Target target, std::string_view user_agent);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // POSTs `body` to the target's url with `headers` ("Name: value", e.g. the Content-Type)
  // before the target's own. No connection, a timeout, 429 or 5xx: retry; another 4xx: drop;
  // each with a reason that names the url's origin or the answer and holds no credential.
  kiwi::WriteResult post(std::string_view body, std::span<const std::string> headers);

  const Target& target() const { return target_; }

 private:
  Target target_;
  std::vector<std::string> secrets_;  // kept out of every reason
  void* curl_ = nullptr;              // CURL*; curl.h stays in http_post.cpp
};

}  // namespace kiwi_http
