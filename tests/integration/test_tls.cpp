// [http.tls] against the real binary with curl and openssl: HTTPS with a certificate made here,
// the certificate renewed in place and served after SIGHUP, TLS turned on by a reload, a key
// that does not match (at start and at a reload, which keeps the old one), config errors, and
// the memory it does not cost when off: the agent without [http.tls] maps no GnuTLS.
#include "auth_support.hpp"
#include "checks.hpp"

using namespace kiwi_test;

namespace {

// A self-signed certificate for 127.0.0.1 (its own CA: a client trusts it with --cacert) and its
// key, as cert.pem and key.pem under `dir`; `name` is its subject's CN.
void make_certificate(const fs::path& dir, const std::string& name) {
  if (run_shell("command -v openssl").first != 0)
    skip_test("openssl is not installed (tools/setup.sh --test installs it)");
  fs::create_directories(dir);
  auto [code, out] = run_shell(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "
      "/CN=" +
      name + " -addext subjectAltName=IP:127.0.0.1 -keyout " + (dir / "key.pem").string() +
      " -out " + (dir / "cert.pem").string());
  INFO(out);
  REQUIRE(code == 0);
}

struct Curl {
  int exit_code = 0;  // curl's: 0, 60 (certificate not trusted), 35 (handshake failed), ...
  int status = 0;
  std::string body;
  std::string log;
};

// curl https://127.0.0.1:port/path trusting only `ca`; `args` quoted by the caller.
Curl https_get(const Agent& a, const std::string& path, const fs::path& ca,
               const std::string& args = "") {
  const fs::path body = a.dir() / "curl.body";
  fs::remove(body);
  auto [code, out] =
      run_shell("curl -sS --max-time 10 -o " + body.string() + " -w '%{http_code}' --cacert " +
                ca.string() + " " + args + " https://127.0.0.1:" + std::to_string(a.port()) + path);
  Curl r{code, 0, fs::exists(body) ? read_text(body) : "", out};
  if (code == 0) r.status = std::stoi(out);
  return r;
}

std::string tls_table(const fs::path& dir) {
  return "[http.tls]\ncert_file = \"" + (dir / "cert.pem").string() + "\"\nkey_file = \"" +
         (dir / "key.pem").string() + "\"\n";
}

// Whether the agent's address space maps a file whose name contains `part`.
bool maps(pid_t pid, const std::string& part) {
  return read_text("/proc/" + std::to_string(pid) + "/maps").find(part) != std::string::npos;
}

}  // namespace

TEST_CASE(
    "tls: HTTPS with the configured certificate, verified by curl, and plain HTTP on that port is "
    "not "
    "answered") {
  TempDir certs;
  make_certificate(certs.path / "a", "kiwi-a");
  Agent a(tls_table(certs.path / "a"), "", "", "", "", false);
  const fs::path ca = certs.path / "a/cert.pem";
  REQUIRE(eventually([&] { return https_get(a, "/api/current", ca).status == 200; }));
  Curl h = https_get(a, "/api/health", ca);
  INFO(h.log);
  CHECK(h.status == 200);
  CHECK_THAT(h.body, Catch::Contains("\"status\""));
  // Compressed as over HTTP, and the counters count it.
  CHECK(https_get(a, "/metrics", ca, "--compressed").status == 200);
  CHECK_THAT(a.stderr_text(), Catch::Contains("listening on https://127.0.0.1:"));
  CHECK_THAT(a.stderr_text(), Catch::Contains("https: certificate " + ca.string()));
  // Another CA's certificate is not trusted for it: curl refuses (60), it does not fall back.
  make_certificate(certs.path / "other", "kiwi-other");
  CHECK(https_get(a, "/api/health", certs.path / "other/cert.pem").exit_code == 60);
  // Plain HTTP to the TLS port: no HTTP answer (the TLS server sees no handshake).
  auto [code, out] =
      run_shell("curl -sS --max-time 5 -o /dev/null -w '%{http_code}' http://127.0.0.1:" +
                std::to_string(a.port()) + "/api/health");
  INFO(out);
  CHECK(code != 0);
  // And it serves on after that.
  CHECK(https_get(a, "/api/health", ca).status == 200);
}

TEST_CASE("tls: a certificate renewed in place is served after SIGHUP, without a restart") {
  TempDir certs;
  make_certificate(certs.path / "live", "kiwi-old");
  fs::copy_file(certs.path / "live/cert.pem", certs.path / "old.pem");
  Agent a(tls_table(certs.path / "live"), "", "", "", "", false);
  const pid_t pid = a.pid();
  REQUIRE(eventually(
      [&] { return https_get(a, "/api/health", certs.path / "old.pem").status == 200; }));

  make_certificate(certs.path / "live", "kiwi-new");  // both files replaced, same paths
  // Not before the reload: the files are read with the config.
  CHECK(https_get(a, "/api/health", certs.path / "old.pem").status == 200);
  const std::string verdict = a.reload();
  CHECK_THAT(verdict, Catch::Contains("http.tls changed (certificate or key renewed)"));
  CHECK(https_get(a, "/api/health", certs.path / "live/cert.pem").status == 200);
  CHECK(https_get(a, "/api/health", certs.path / "old.pem").exit_code == 60);
  CHECK(a.pid() == pid);
  CHECK(kill(pid, 0) == 0);
}

TEST_CASE(
    "tls: a reload with a key that does not match keeps the old certificate serving, and at start "
    "it "
    "is an error naming both files") {
  TempDir certs;
  make_certificate(certs.path / "a", "kiwi-a");
  make_certificate(certs.path / "b", "kiwi-b");
  // cert of a, key of b
  const std::string mismatched = "[http.tls]\ncert_file = \"" +
                                 (certs.path / "a/cert.pem").string() + "\"\nkey_file = \"" +
                                 (certs.path / "b/key.pem").string() + "\"\n";
  {
    Agent a(tls_table(certs.path / "a"), "", "", "", "", false);
    REQUIRE(eventually(
        [&] { return https_get(a, "/api/health", certs.path / "a/cert.pem").status == 200; }));
    a.write_config(mismatched);
    const std::string verdict = a.reload();
    CHECK_THAT(verdict, Catch::StartsWith("error: reload failed"));
    CHECK_THAT(verdict, Catch::Contains("cannot start the HTTPS server"));
    CHECK_THAT(verdict, Catch::Contains((certs.path / "b/key.pem").string()));
    CHECK_THAT(verdict, Catch::Contains("do not match"));  // GnuTLS says why
    CHECK(https_get(a, "/api/health", certs.path / "a/cert.pem").status == 200);
  }
  TempDir tmp;
  write_text(tmp.path / "kiwi.toml", "[agent]\ndata_dir = \"" + (tmp.path / "data").string() +
                                         "\"\nplugin_dir = \"" KIWI_PLUGIN_DIR
                                         "\"\n[http]\nbind = \"127.0.0.1:0\"\n" +
                                         mismatched);
  auto r = run_agent_command({"--config", (tmp.path / "kiwi.toml").string()});
  INFO(r.err);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err,
             Catch::Contains("cannot start the HTTPS server on 127.0.0.1:0 with cert_file \"" +
                             (certs.path / "a/cert.pem").string() + "\" and key_file \"" +
                             (certs.path / "b/key.pem").string() + "\""));
}

TEST_CASE("tls: turned on by a reload, and off again, on the same port") {
  TempDir certs;
  make_certificate(certs.path / "a", "kiwi-a");
  Agent a;
  const int port = a.port();
  HttpClient plain(port);
  REQUIRE(plain.get("/api/health").status == 200);
  a.write_config(tls_table(certs.path / "a"));
  CHECK_THAT(a.reload(), Catch::Contains("http.tls changed (on: "));
  CHECK(https_get(a, "/api/health", certs.path / "a/cert.pem").status == 200);
  a.write_config("");
  CHECK_THAT(a.reload(), Catch::Contains("http.tls changed (off)"));
  HttpClient again(port);
  CHECK(again.get("/api/health").status == 200);
  CHECK(a.port() == port);
}

TEST_CASE("tls: Basic authentication over HTTPS") {
  TempDir certs;
  make_certificate(certs.path / "a", "kiwi-a");
  const std::string hash = bcrypt_hash("pw");
  Agent a(tls_table(certs.path / "a"), "",
          "[http.auth]\nbasic_users = { prom = \"" + hash + "\" }\n", "", "", false);
  const fs::path ca = certs.path / "a/cert.pem";
  REQUIRE(eventually([&] { return https_get(a, "/api/health", ca).status == 200; }));
  CHECK(https_get(a, "/api/current", ca).status == 401);
  CHECK(https_get(a, "/api/current", ca, "-u prom:pw").status == 200);
}

TEST_CASE("tls: without [http.tls] the agent maps neither GnuTLS nor a second libmicrohttpd") {
  if (!KIWI_MHD_STATIC)
    skip_test(
        "this agent links Debian's shared libmicrohttpd, which brings GnuTLS itself "
        "(tools/setup-mhd.sh builds the static one)");
  Agent a;
  CHECK_FALSE(maps(a.pid(), "libgnutls"));
  CHECK_FALSE(maps(a.pid(), "libmicrohttpd"));
  TempDir certs;
  make_certificate(certs.path / "a", "kiwi-a");
  a.write_config(tls_table(certs.path / "a"));
  a.reload();
  CHECK(maps(a.pid(), "libgnutls"));
  CHECK(maps(a.pid(), "libmicrohttpd.so.12"));
}

TEST_CASE("tls: config errors name the place (exit 2): one file alone, unreadable, not PEM") {
  TempDir tmp;
  make_certificate(tmp.path / "a", "kiwi-a");
  const fs::path cfg = tmp.path / "kiwi.toml";
  const std::string cert = (tmp.path / "a/cert.pem").string();
  const std::string key = (tmp.path / "a/key.pem").string();

  write_text(cfg, "[http.tls]\ncert_file = \"" + cert + "\"\n");
  auto r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(cfg.string() + ":1:1: http.tls: needs both cert_file and "
                                                   "key_file; key_file is missing"));

  write_text(cfg, "[http.tls]\ncert_file = \"" + (tmp.path / "missing.pem").string() +
                      "\"\nkey_file = \"" + key + "\"\n");
  r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(":2:13: http.tls.cert_file: cannot read"));

  // The key where the certificate goes, and the other way round.
  write_text(cfg, "[http.tls]\ncert_file = \"" + key + "\"\nkey_file = \"" + cert + "\"\n");
  r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Catch::Contains("http.tls.cert_file: \"" + key +
                             "\" is not a PEM certificate (no \"-----BEGIN CERTIFICATE-----\" "
                             "line)"));

  write_text(cfg, "[http.tls]\ncert_file = \"" + cert + "\"\nkey_file = \"" + key +
                      "\"\nca_file = \"x\"\n");
  r = run_agent_command({"--check-config", cfg.string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("http.tls.ca_file: unknown key; accepted in [http.tls]: "
                                    "cert_file, key_file"));
}
