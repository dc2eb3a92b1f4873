// The remote_write output: POSTs Prometheus remote write 1.0 requests with libcurl. One curl
// handle per [[remote_write]] (its connection is kept alive between requests); write() is never
// called concurrently for one object (kiwi/output.hpp), so the handle needs no lock.
#include <curl/curl.h>

#include <fstream>
#include <kiwi/output.hpp>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "remote_write.hpp"

namespace {

using kiwi::OptionSpec;
using kiwi::OptionType;

const OptionSpec kOptions[] = {
    {"url", OptionType::string, "\"\"",
     "the receiver's remote write endpoint, e.g. \"http://prometheus:9090/api/v1/write\" "
     "(required)"},
    {"timeout", OptionType::duration, "\"5s\"",
     "how long one request may take (connect, send, answer) before it is retried", true, 100,
     300'000},
    {"headers", OptionType::string_table, "{}",
     "extra request headers, e.g. { Authorization = \"Bearer ...\" }"},
    {"basic_auth", OptionType::string_table, "{}",
     "{ username = \"...\", password_file = \"/etc/kiwi-agent/rw.pass\" }: HTTP basic "
     "authentication, the password read from the file (its first line)"},
    {"labels", OptionType::string_table, "{}",
     "external labels added to every series that lacks them; `instance` defaults to the host "
     "name (set instance = \"\" to leave it out)"},
};

std::string first_line_of(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("basic_auth.password_file: cannot read " + file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

size_t collect(char* data, size_t size, size_t n, void* out) {
  auto& body = *static_cast<std::string*>(out);
  if (body.size() < 4096) body.append(data, std::min<size_t>(size * n, 4096 - body.size()));
  return size * n;
}

class RemoteWrite final : public kiwi::Output {
 public:
  explicit RemoteWrite(const kiwi::OutputContext& ctx) {
    url_ = ctx.options.get_string("url");
    if (url_.empty())
      throw std::runtime_error(
          "url is required, e.g. url = \"http://127.0.0.1:9090/api/v1/write\"");
    if (!url_.starts_with("http://") && !url_.starts_with("https://"))
      throw std::runtime_error("url \"" + url_ + "\" is not an http:// or https:// URL");
    timeout_ms_ = ctx.options.get_duration("timeout").count();
    bool instance_set = false;
    for (const auto& [k, v] : ctx.options.get_table("labels")) {
      external_.emplace_back(k, v);
      instance_set |= k == "instance";
    }
    if (!instance_set) external_.emplace_back("instance", std::string(ctx.host_name));
    for (const auto& [k, v] : ctx.options.get_table("basic_auth")) {
      if (k == "username")
        username_ = v;
      else if (k == "password_file")
        password_file_ = v;
      else
        throw std::runtime_error("basic_auth: unknown key '" + k +
                                 "'; accepted: username, password_file");
    }
    if (!password_file_.empty() && username_.empty())
      throw std::runtime_error("basic_auth: password_file without username");
    if (!username_.empty()) password_ = first_line_of(password_file_);

    static std::once_flag global;
    std::call_once(global, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    curl_ = curl_easy_init();
    if (!curl_) throw std::runtime_error("curl_easy_init failed");
    headers_ = curl_slist_append(headers_, "Content-Encoding: snappy");
    headers_ = curl_slist_append(headers_, "Content-Type: application/x-protobuf");
    headers_ = curl_slist_append(headers_, "X-Prometheus-Remote-Write-Version: 0.1.0");
    headers_ = curl_slist_append(
        headers_, ("User-Agent: kiwi-agent/" + std::string(ctx.agent_version)).c_str());
    for (const auto& [k, v] : ctx.options.get_table("headers"))
      headers_ = curl_slist_append(headers_, (k + ": " + v).c_str());
  }
  ~RemoteWrite() override {
    curl_slist_free_all(headers_);
    curl_easy_cleanup(curl_);
  }

  kiwi::WriteResult write(const kiwi::OutputBatch& batch) override {
    const std::string body =
        kiwi_remote_write::compress_snappy(kiwi_remote_write::encode_write_request(
            kiwi_remote_write::to_time_series(batch, external_)));
    std::string answer;
    char error[CURL_ERROR_SIZE] = {};
    curl_easy_reset(curl_);
    curl_easy_setopt(curl_, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_POST, 1L);
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, timeout_ms_);
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms_);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &collect);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error);
    if (!username_.empty()) {
      curl_easy_setopt(curl_, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl_easy_setopt(curl_, CURLOPT_USERNAME, username_.c_str());
      curl_easy_setopt(curl_, CURLOPT_PASSWORD, password_.c_str());
    }
    const CURLcode rc = curl_easy_perform(curl_);
    if (rc != CURLE_OK)
      return kiwi::WriteResult::retry(std::string(curl_easy_strerror(rc)) +
                                      (error[0] ? std::string(": ") + error : "") + " (" + url_ +
                                      ")");
    long status = 0;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
    return kiwi_remote_write::verdict(status, answer);
  }

 private:
  std::string url_;
  long timeout_ms_ = 5000;
  kiwi_remote_write::Labels external_;
  std::string username_, password_file_, password_;
  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
};

}  // namespace

KIWI_OUTPUT_PLUGIN(RemoteWrite, "remote_write",
                   "Prometheus remote write 1.0 (protobuf, snappy) over HTTP, with backfill",
                   kOptions)
