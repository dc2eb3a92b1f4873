// [http.auth] against the real binary with curl: Basic users with bcrypt hashes, bearer tokens
// from a file of SHA-256 hashes, public paths, the 401 and 429 answers, the counters in /metrics,
// SIGHUP, the warning for an open API beyond loopback, and config errors.
#include "auth_support.hpp"
#include "checks.hpp"

using namespace kiwi_test;

namespace {

struct Curl {
  int status = 0;
  std::string headers;  // the response's header block
  std::string body;
};

// curl on 127.0.0.1:port with `args` (quoted by the caller).
Curl curl(const Agent& a, const std::string& path, const std::string& args = "") {
  const fs::path head = a.dir() / "curl.head", body = a.dir() / "curl.body";
  auto [code, out] =
      run_shell("curl -sS -o " + body.string() + " -D " + head.string() + " -w '%{http_code}' " +
                args + " http://127.0.0.1:" + std::to_string(a.port()) + path);
  INFO(out);
  REQUIRE(code == 0);
  return {std::stoi(out), read_text(head), read_text(body)};
}

// /metrics (with `curl_auth`) once every one of `expected` (series and value) shows: the agent's
// counters are its own report's, as of a sample, so a request made just before is counted in the
// next tick's.
std::string metrics_showing(Agent& a, const std::string& curl_auth,
                            const std::vector<std::pair<std::string, std::string>>& expected) {
  std::string body;
  eventually([&] {
    Curl m = curl(a, "/metrics", curl_auth);
    body = m.body;
    return m.status == 200 && std::all_of(expected.begin(), expected.end(), [&](auto& e) {
             return metric(body, e.first) == e.second;
           });
  });
  for (auto& [series, value] : expected) CHECK(metric(body, series) == value);
  return body;
}

// The first sample is there (the harness waits on /api/current, which needs credentials here).
void wait_ready(Agent& a, const std::string& curl_auth) {
  REQUIRE(eventually([&] { return curl(a, "/api/current", curl_auth).status == 200; }));
}

}  // namespace

TEST_CASE(
    "auth: Basic users - right password 200, wrong password or unknown user 401 with JSON and "
    "WWW-Authenticate, public path open") {
  const std::string hash = bcrypt_hash("s3cret pass");
  Agent a("", "", "[http.auth]\nbasic_users = { prom = \"" + hash + "\" }\n", "", "", false);
  wait_ready(a, "-u 'prom:s3cret pass'");
  CHECK(curl(a, "/api/current", "-u 'prom:s3cret pass'").status == 200);

  for (const std::string who : {"-u prom:wrong", "-u nobody:'s3cret pass'", ""}) {
    INFO(who);
    Curl r = curl(a, "/api/current", who);
    CHECK(r.status == 401);
    CHECK_THAT(r.headers,
               Catch::Contains("WWW-Authenticate: Basic realm=\"kiwi-agent\", charset=\"UTF-8\""));
    CHECK_THAT(r.headers, Catch::Contains("Content-Type: application/json"));
    auto d = parse_json(r.body);
    CHECK(d["error"]["status"].GetInt() == 401);
    CHECK(std::string(d["error"]["message"].GetString()) ==
          (who.empty() ? "authentication required" : "invalid credentials"));
  }
  // /api/health is public by default; the dashboard is not.
  CHECK(curl(a, "/api/health").status != 401);
  CHECK(curl(a, "/").status == 401);

  metrics_showing(a, "-u 'prom:s3cret pass'",
                  {{"kiwi_http_auth_failures_total{reason=\"invalid_credentials\"}", "2"},
                   {"kiwi_http_auth_failures_total{reason=\"rate_limited\"}", "0"},
                   {"kiwi_http_requests_total{route=\"/api/current\",status=\"401\"}", "3"}});
  CHECK_THAT(a.stderr_text(), Catch::Contains("authentication on"));
  CHECK_THAT(a.stderr_text(), !Catch::Contains("beyond loopback"));
}

TEST_CASE(
    "auth: bearer tokens from a file of SHA-256 hashes - right token 200, wrong 401, and SIGHUP "
    "reads the file again") {
  TempDir tmp;
  const fs::path tokens = tmp.path / "tokens";
  write_text(tokens, "# scrapers\n" + sha256_hex("tok-one") + "  -\n\n");
  Agent a("", "", "[http.auth]\nbearer_tokens_file = \"" + tokens.string() + "\"\n", "", "", false);
  wait_ready(a, "-H 'Authorization: Bearer tok-one'");
  Curl bad = curl(a, "/api/current", "-H 'Authorization: Bearer tok-two'");
  CHECK(bad.status == 401);
  CHECK_THAT(bad.headers, Catch::Contains("WWW-Authenticate: Bearer realm=\"kiwi-agent\""));
  CHECK_THAT(bad.headers, !Catch::Contains("Basic realm"));

  // Rotation: tok-two in, tok-one out, by SIGHUP.
  write_text(tokens, sha256_hex("tok-two") + "\n");
  CHECK_THAT(a.reload(), Catch::Contains("http.auth changed (on: 0 users, 1 bearer tokens)"));
  CHECK(curl(a, "/api/current", "-H 'Authorization: Bearer tok-two'").status == 200);
  CHECK(curl(a, "/api/current", "-H 'Authorization: Bearer tok-one'").status == 401);

  // A bad line in the file: the reload fails, and the running tokens stay.
  write_text(tokens, sha256_hex("tok-three") + "\nnot-a-hash\n");
  const std::string verdict = a.reload();
  CHECK_THAT(verdict, Catch::Contains("reload failed"));
  CHECK_THAT(verdict, Catch::Contains(tokens.string() + ":2: not a SHA-256 hash"));
  CHECK(curl(a, "/api/current", "-H 'Authorization: Bearer tok-two'").status == 200);
}

TEST_CASE(
    "auth: 5 failed attempts from an address get 429 with Retry-After, counted, and credentials "
    "verified before still pass") {
  const std::string hash = bcrypt_hash("right");
  Agent a("", "", "[http.auth]\nbasic_users = { prom = \"" + hash + "\" }\n", "", "", false);
  wait_ready(a, "-u prom:right");  // verified once: cached from here on
  for (int i = 0; i < 5; ++i)
    CHECK(curl(a, "/api/current", "-u prom:guess" + std::to_string(i)).status == 401);
  Curl limited = curl(a, "/api/current", "-u prom:guess5");
  CHECK(limited.status == 429);
  CHECK_THAT(limited.headers, Catch::Contains("Retry-After: "));
  auto d = parse_json(limited.body);
  CHECK(d["error"]["status"].GetInt() == 429);
  CHECK_THAT(d["error"]["message"].GetString(),
             Catch::StartsWith("too many failed authentication attempts from 127.0.0.1"));
  // The right password, verified before, still passes (no bcrypt needed); the block stays.
  CHECK(curl(a, "/api/current", "-u prom:right").status == 200);
  CHECK(curl(a, "/api/current", "-u prom:guess6").status == 429);

  metrics_showing(a, "-u prom:right",
                  {{"kiwi_http_auth_failures_total{reason=\"invalid_credentials\"}", "5"},
                   {"kiwi_http_auth_failures_total{reason=\"rate_limited\"}", "2"},
                   {"kiwi_http_requests_total{route=\"/api/current\",status=\"429\"}", "2"}});
}

TEST_CASE("auth: listening on 0.0.0.0 without authentication logs a warning at start") {
  TempDir tmp;
  const int port = free_port();
  write_text(tmp.path / "kiwi.toml",
             "[agent]\ndata_dir = \"" + (tmp.path / "data").string() +
                 "\"\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\n[http]\nbind = \"0.0.0.0:" +
                 std::to_string(port) + "\"\n[collector]\nsnapshot_path = \"\"\n");
  AgentOptions options;
  options.config_file = tmp.path / "kiwi.toml";
  options.ready = Ready::started;
  Agent agent(options);
  const bool warned = eventually([&] {
    return agent.stderr_text().find("beyond loopback without authentication") != std::string::npos;
  });
  agent.stop(SIGTERM);  // at once: it listened on every interface only for this
  INFO(agent.stderr_text());
  CHECK(warned);
  CHECK_THAT(agent.stderr_text(),
             Catch::Contains("warn: listening on http://0.0.0.0:" + std::to_string(port) +
                             "/ beyond loopback without authentication"));
}

TEST_CASE(
    "auth: a malformed bcrypt hash or tokens file is a config error naming the place (exit 2)") {
  TempDir tmp;
  const std::string good = bcrypt_hash("x");
  const fs::path cfg = tmp.path / "kiwi.toml";
  write_text(cfg, "[http.auth]\nbasic_users = { prom = \"" + good.substr(0, 59) + "\" }\n");
  auto r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(cfg.string() + ":2:24: http.auth.basic_users.prom: is not a "
                                                   "bcrypt hash"));

  write_text(cfg, "[http.auth]\nbasic_users = { prom = \"plain-password\" }\n");
  r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("is not a bcrypt hash"));

  write_text(cfg,
             "[http.auth]\nbearer_tokens_file = \"" + (tmp.path / "missing").string() + "\"\n");
  r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(":2:22: http.auth.bearer_tokens_file: cannot read"));

  write_text(cfg, "[http.auth]\npublic_paths = [\"api/health\"]\n");
  r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("http.auth.public_paths: \"api/health\" is not a path"));
}
