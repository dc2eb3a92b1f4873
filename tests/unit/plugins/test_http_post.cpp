// plugins/common/http_post: the options every pushing plugin shares, read through the agent's own
// option reader; credentials from files and kept out of every reason; a receiver's answer as ok,
// retry or drop. The POSTs themselves go to real receivers in tests/integration.
#include <catch2/catch.hpp>
#include <fstream>

#include "config/options.hpp"
#include "http_post.hpp"
#include "options_support.hpp"
#include "test_support.hpp"

using namespace kiwi_http;

namespace {

const kiwi::OptionSpec kTable[] = {
    {"url", kiwi::OptionType::string, "\"\"", "where"},
    kTimeoutOption,
    kHeadersOption,
    kBasicAuthOption,
    kBearerTokenFileOption,
};

// The options of a [[notify]]-like table, read as the agent reads a plugin's.
kiwi::Options options(const std::string& toml) {
  const kiwi::PluginInfo info{kiwi::PluginKind::notifier, "t", "", kTable, {}};
  return kiwi::agent::validate_options(info, kiwi::test::options_table("[options]\n" + toml),
                                       "kiwi.toml", "notify");
}

std::string refusal(const std::string& toml) {
  try {
    target_from(options(toml), "http://127.0.0.1:9093", "bearer_token_file");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("http: a target takes its password and token from the first line of their files") {
  kiwi_test::TempDir dir;
  std::ofstream(dir.path / "pass") << "s3cret  \nsecond line\n";
  std::ofstream(dir.path / "token") << "tk_abc\r\n";
  const Target basic = target_from(
      options("url = \"http://am:9093\"\ntimeout = \"2s\"\nheaders = { X-Org = \"pi\" }\n"
              "basic_auth = { username = \"kiwi\", password_file = \"" +
              (dir.path / "pass").string() + "\" }\n"),
      "", "bearer_token_file");
  CHECK(basic.url == "http://am:9093");
  CHECK(basic.timeout == std::chrono::seconds(2));
  CHECK(basic.headers == std::vector<std::pair<std::string, std::string>>{{"X-Org", "pi"}});
  CHECK(basic.username == "kiwi");
  CHECK(basic.password == "s3cret");
  CHECK(basic.bearer_token.empty());
  const Target bearer = target_from(options("url = \"https://am\"\nbearer_token_file = \"" +
                                            (dir.path / "token").string() + "\"\n"),
                                    "", "bearer_token_file");
  CHECK(bearer.bearer_token == "tk_abc");
  CHECK(bearer.timeout == std::chrono::seconds(5));  // the row's default
  CHECK(bearer.username.empty());
}

TEST_CASE("http: each refusal names the option and what would do, never a secret") {
  kiwi_test::TempDir dir;
  const std::string pass = (dir.path / "pass").string(), empty = (dir.path / "empty").string();
  std::ofstream(pass) << "s3cret\n";
  std::ofstream(empty) << "\n";
  CHECK(refusal("") == "url is required, e.g. url = \"http://127.0.0.1:9093\"");
  CHECK(refusal("url = \"hooks.example.com/services/T0/B0/s3cret\"") ==
        "url is not a URL: it must start with http:// or https://");
  CHECK(refusal("url = \"ftp://u:s3cret@host/x\"") ==
        "url \"ftp://host...\" is not an http:// or https:// URL");
  CHECK(refusal("url = \"http://h\"\nbasic_auth = { user = \"kiwi\" }") ==
        "basic_auth: unknown key 'user'; accepted: username, password_file");
  CHECK(refusal("url = \"http://h\"\nbasic_auth = { password_file = \"" + pass + "\" }") ==
        "basic_auth: password_file without username");
  CHECK(refusal("url = \"http://h\"\nbasic_auth = { username = \"kiwi\", password_file = "
                "\"/nonexistent/pass\" }") ==
        "basic_auth.password_file: cannot read /nonexistent/pass");
  CHECK(refusal("url = \"http://h\"\nbearer_token_file = \"" + empty + "\"") ==
        "bearer_token_file: " + empty + " holds no token");
  CHECK(refusal("url = \"http://h\"\nbearer_token_file = \"" + pass +
                "\"\nbasic_auth = { username = \"kiwi\", password_file = \"" + pass + "\" }") ==
        "basic_auth and bearer_token_file both given: a request carries one Authorization; "
        "choose one");
  CHECK(refusal("url = \"http://h\"\nbearer_token_file = \"" + pass +
                "\"\nheaders = { authorization = \"Bearer s3cret\" }") ==
        "headers: Authorization and bearer_token_file both given; choose one");
}

TEST_CASE("http: a reason names the url's origin only, and no secret the receiver echoes") {
  CHECK(url_origin("http://u:s3cret@127.0.0.1:9093/api/v2/alerts?token=x") ==
        "http://127.0.0.1:9093");
  CHECK(url_origin("https://hooks.slack.com/services/T0/B0/s3cret") == "https://hooks.slack.com");
  CHECK(url_origin("https://ntfy.sh") == "https://ntfy.sh");
  CHECK(url_origin("not a url").empty());
  const std::vector<std::string> secrets = {"s3cret", "", "tk_abc"};
  CHECK(redact("bad token tk_abc for s3cret and s3cret", secrets) ==
        "bad token <secret> for <secret> and <secret>");
  CHECK(redact("nothing here", secrets) == "nothing here");
}

TEST_CASE("http: answers as ok (2xx), retry (429, 5xx, others) and drop (other 4xx)") {
  CHECK(verdict(200, "").status == kiwi::WriteStatus::ok);
  CHECK(verdict(204, "").status == kiwi::WriteStatus::ok);
  CHECK(verdict(429, "slow down").status == kiwi::WriteStatus::retry);
  CHECK(verdict(503, "").status == kiwi::WriteStatus::retry);
  const auto bad = verdict(400, "out of order sample\n");
  CHECK(bad.status == kiwi::WriteStatus::drop);
  CHECK(bad.reason == "HTTP 400: out of order sample");
  CHECK(verdict(404, "").status == kiwi::WriteStatus::drop);
  CHECK(verdict(302, "").status == kiwi::WriteStatus::retry);
  CHECK(verdict(302, "").reason == "HTTP 302 (unexpected status)");
  // The receiver's words on one line, 256 bytes at most.
  CHECK(verdict(500, "a\r\nb").reason == "HTTP 500: a  b");
  CHECK(verdict(500, std::string(1000, 'x')).reason.size() ==
        std::string("HTTP 500: ").size() + 256);
}

TEST_CASE("http: no connection is a retry that names the origin, not the credentials") {
  kiwi_test::TempDir dir;
  std::ofstream(dir.path / "pass") << "s3cret\n";
  Target t = target_from(
      options("url = \"http://user:urlpass@127.0.0.1:" + std::to_string(kiwi_test::free_port()) +
              "/hook/s3cret?k=v\"\nbasic_auth = { username = \"kiwi\", "
              "password_file = \"" +
              (dir.path / "pass").string() + "\" }\n"),
      "", "bearer_token_file");
  t.timeout = std::chrono::seconds(2);
  Client client(t, "kiwi-agent/test");
  const kiwi::WriteResult r = client.post("{}", std::vector<std::string>{"Content-Type: x/y"});
  CHECK(r.status == kiwi::WriteStatus::retry);
  CHECK_THAT(r.reason, Catch::Contains("(http://127.0.0.1:"));
  CHECK_THAT(r.reason, !Catch::Contains("s3cret") && !Catch::Contains("urlpass") &&
                           !Catch::Contains("/hook"));
}
