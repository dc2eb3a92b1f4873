// The fleet against real agents on loopback: one agent with [[peer]] entries (a plain one, one
// behind a bearer token, one whose token is wrong, one that does not listen) answers /api/fleet
// with a row per board and serves the peers' pages under /peer/<name>/, bounded as docs/fleet.md
// says: only named peers, only their own paths, one fetch per URL per cache period, failures
// shown.
#include <atomic>
#include <thread>

#include "checks.hpp"

using namespace kiwi_test;

namespace {

std::string peer_toml(const std::string& name, int port, const std::string& extra = "") {
  return "[[peer]]\nname = \"" + name + "\"\nurl = \"http://127.0.0.1:" + std::to_string(port) +
         "/\"\ntimeout = \"1s\"\n" + extra + "\n";
}

// The serving agent's routes: /api/fleet asks every second.
const std::string kRoutes =
    "[[route]]\npath = \"/api/fleet\"\nhandler = \"fleet\"\noptions = { interval = \"1s\" }\n"
    "[[route]]\npath = \"/peer/*\"\nhandler = \"peer\"\n"
    "[[route]]\npath = \"/api/current\"\nhandler = \"current\"\n"
    "[[route]]\npath = \"/metrics\"\nhandler = \"metrics\"\n";

const rapidjson::Value* board(const rapidjson::Document& d, const std::string& name) {
  for (const auto& b : d["boards"].GetArray())
    if (name == b["name"].GetString()) return &b;
  return nullptr;
}

}  // namespace

TEST_CASE(
    "fleet: /api/fleet has a row per board with its status, and /peer/<name>/ serves a peer's "
    "pages, bounded") {
  TempDir tmp;
  Agent plain;  // a peer with the default config
  const fs::path tokens = tmp.path / "tokens", token = tmp.path / "token",
                 wrong = tmp.path / "wrong";
  write_text(tokens, sha256_hex("fleet-secret") + "\n");
  write_text(token, "fleet-secret\n");
  write_text(wrong, "not-the-secret\n");
  Agent locked("", "", "[http.auth]\nbearer_tokens_file = \"" + tokens.string() + "\"\n", "", "",
               false);
  const int dead = free_port();
  Agent a(kRoutes + peer_toml("plain", plain.port()) +
          peer_toml("locked", locked.port(), "bearer_token_file = \"" + token.string() + "\"") +
          peer_toml("wrong", locked.port(), "bearer_token_file = \"" + wrong.string() + "\"") +
          peer_toml("dead", dead));
  INFO(a.stderr_text());
  HttpClient c(a.port());

  rapidjson::Document d;
  REQUIRE(eventually([&] {
    auto r = c.get("/api/fleet");
    if (r.status != 200) return false;
    d = parse_json(r.body);
    const auto* p = board(d, "plain");
    const auto* l = board(d, "locked");
    // CPU is a rate: the second sample of each has it.
    return p && l && std::string((*p)["status"].GetString()) == "up" &&
           std::string((*l)["status"].GetString()) == "up" && (*p)["cpu_ratio"].IsNumber() &&
           d["boards"][0]["cpu_ratio"].IsNumber();
  }));
  REQUIRE(d["boards"].Size() == 5);
  const auto& self = d["boards"][0];
  CHECK(self["self"].GetBool());
  CHECK(std::string(self["status"].GetString()) == "up");
  CHECK(self["memory_ratio"].IsNumber());
  CHECK(self["cpu_ratio"].IsNumber());
  CHECK(d["interval_ms"].GetInt() == 1000);

  const auto& p = *board(d, "plain");
  CHECK_FALSE(p["self"].GetBool());
  CHECK(std::string(p["url"].GetString()) == "http://127.0.0.1:" + std::to_string(plain.port()));
  CHECK(p["memory_ratio"].IsNumber());
  CHECK(p["last_seen_ms"].IsNumber());
  CHECK(std::string(p["error"].GetString()).empty());

  const auto& w = *board(d, "wrong");
  CHECK(std::string(w["status"].GetString()) == "auth_failed");
  CHECK_THAT(w["error"].GetString(), Catch::Contains("401"));
  CHECK_THAT(w["error"].GetString(), !Catch::Contains("not-the-secret"));

  const auto& x = *board(d, "dead");
  CHECK(std::string(x["status"].GetString()) == "unreachable");
  CHECK_THAT(x["error"].GetString(), Catch::Contains("127.0.0.1:" + std::to_string(dead)));
  CHECK(x["last_seen_ms"].IsNull());
  CHECK(x["memory_ratio"].IsNull());

  SECTION("scope=self is this board alone; other parameters are refused with a 400 naming them") {
    auto r = c.get("/api/fleet?scope=self");
    REQUIRE(r.status == 200);
    CHECK(parse_json(r.body)["boards"].Size() == 1);
    auto bad = c.get("/api/fleet?scope=most");
    CHECK(bad.status == 400);
    CHECK_THAT(bad.body, Catch::Contains("\"parameter\":\"scope\""));
    CHECK(c.get("/api/fleet?sort=name").status == 400);
  }

  SECTION("a peer's dashboard and API through /peer/<name>/, its token kept on the server") {
    auto page = c.get("/peer/plain/");
    CHECK(page.status == 200);
    CHECK_THAT(page.header("content-type"), Catch::Contains("text/html"));
    auto cur = c.get("/peer/locked/api/current");
    REQUIRE(cur.status == 200);
    CHECK(parse_json(cur.body).HasMember("sensors"));
    auto hist = c.get("/peer/plain/api/history?series=memory_used_ratio&limit=5");
    CHECK(hist.status == 200);
    auto bad = c.get("/peer/plain/api/history?limit=x");
    CHECK(bad.status == 400);  // the peer's own answer, passed on
    CHECK_THAT(bad.body, Catch::Contains("\"parameter\":\"limit\""));
    auto redirect = c.get("/peer/plain");
    CHECK(redirect.status == 308);
    CHECK(redirect.header("location") == "plain/");
  }

  SECTION(
      "only named peers and only their own paths: anything else is a 404 or a 400, never fetched") {
    auto unknown = c.get("/peer/elsewhere/api/current");
    CHECK(unknown.status == 404);
    CHECK_THAT(unknown.body, Catch::Contains("dead, locked, plain, wrong"));
    CHECK(c.get("/peer/plain/../../api/current").status == 400);
    CHECK(c.get("/peer/plain/%2e%2e/metrics").status == 400);
    const int absolute = c.get("/peer/http:%2F%2Fexample.com/").status;  // the server's 400 for %2F
    CHECK((absolute == 400 || absolute == 404));
    CHECK(c.request("POST", "/peer/plain/api/current", {}).status == 405);
  }

  SECTION("failures are shown: no answer, and a refused token, as a 502 naming the peer") {
    auto r = c.get("/peer/dead/api/current");
    CHECK(r.status == 502);
    CHECK_THAT(r.body, Catch::Contains("peer dead: "));
    auto w2 = c.get("/peer/wrong/api/current");
    CHECK(w2.status == 502);
    CHECK_THAT(w2.body, Catch::Contains("refused this agent's credentials"));
  }

  SECTION("one fetch per URL per cache period, however many clients ask at once") {
    HttpClient pc(plain.port());
    const std::string series = "kiwi_http_requests_total{route=\"/api/health\",status=\"200\"}";
    auto count = [&] {
      const std::string v = metric(pc.get("/metrics").body, series);
      return v.empty() ? -1.0 : std::stod(v);  // -1: not counted yet
    };
    const double before = count();
    std::vector<std::thread> clients;
    std::atomic<int> ok{0};
    for (int i = 0; i < 16; ++i)
      clients.emplace_back([&] {
        HttpClient one(a.port());
        for (int j = 0; j < 5; ++j) ok += one.get("/peer/plain/api/health").status == 200;
      });
    for (auto& t : clients) t.join();
    CHECK(ok == 80);
    // The peer counts a request in its next tick's report.
    double after = before;
    eventually([&] { return (after = count()) > std::max(before, 0.0); });
    INFO("before " << before << ", after " << after);
    // 80 requests within well under a second or two: one fetch per second of cache at most.
    CHECK(after - std::max(before, 0.0) >= 1);
    CHECK(after - std::max(before, 0.0) <= 4);
  }

  SECTION("a reload without the peers: their rows and pages are gone") {
    a.write_config(kRoutes);
    CHECK_THAT(a.reload(), Catch::Contains("peers changed (0 peers)"));
    auto r = c.get("/api/fleet");
    REQUIRE(r.status == 200);
    CHECK(parse_json(r.body)["boards"].Size() == 1);
    CHECK(c.get("/peer/plain/").status == 404);
  }
}

TEST_CASE(
    "fleet: a peer that stops is stale, then unreachable, its last values and last seen kept") {
  auto peer = std::make_unique<Agent>();
  Agent a(kRoutes + peer_toml("barn", peer->port()));
  HttpClient c(a.port());
  auto status = [&](rapidjson::Document& d) {
    auto r = c.get("/api/fleet");
    REQUIRE(r.status == 200);
    d = parse_json(r.body);
    return std::string((*board(d, "barn"))["status"].GetString());
  };
  rapidjson::Document d;
  REQUIRE(eventually([&] { return status(d) == "up"; }));
  peer->stop();
  peer.reset();
  std::vector<std::string> seen;
  REQUIRE(eventually([&] {
    const std::string s = status(d);
    if (seen.empty() || seen.back() != s) seen.push_back(s);
    return s == "unreachable";
  }));
  INFO("statuses seen: " << seen.size());
  CHECK(std::find(seen.begin(), seen.end(), "stale") != seen.end());
  const auto& b = *board(d, "barn");
  CHECK(b["memory_ratio"].IsNumber());  // the last values it sent
  CHECK(b["last_seen_ms"].IsNumber());
  CHECK_THAT(b["error"].GetString(), Catch::Contains("127.0.0.1"));
}

TEST_CASE("peer: a peer that did not answer is a 502 at once for 5 s, then is asked again") {
  // A port of its own, so that the peer comes back on it.
  auto peer =
      std::make_unique<Agent>("", "", "bind = \"127.0.0.1:" + std::to_string(free_port()) + "\"\n");
  Agent a(kRoutes + peer_toml("barn", peer->port()));
  HttpClient c(a.port());
  REQUIRE(c.get("/peer/barn/api/health").status == 200);
  peer->stop();
  HttpResponse failed;
  REQUIRE(eventually([&] { return (failed = c.get("/peer/barn/api/health")).status == 502; }));
  const auto failed_at = Clock::now();
  CHECK_THAT(failed.body, Catch::Contains("peer barn: "));
  peer->start(Ready::listening);  // the same port
  auto again = c.get("/peer/barn/api/health");
  if (Clock::now() - failed_at < std::chrono::seconds(4)) {  // a slow restart says nothing here
    CHECK(again.status == 502);
    CHECK(again.body == failed.body);  // not asked: the same answer
  }
  HttpResponse last;
  CHECK(eventually([&] { return (last = c.get("/peer/barn/api/health")).status == 200; }));
  INFO(last.body);
  CHECK(last.status == 200);
}

TEST_CASE("fleet: [[peer]] config errors name the place (exit 2)") {
  TempDir tmp;
  auto check = [&](const std::string& toml, const std::string& expected) {
    write_text(tmp.path / "k.toml", toml);
    auto r = run_agent_command({"--check-config", (tmp.path / "k.toml").string()});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(expected));
  };
  check("[[peer]]\nurl = \"http://a:1\"\n", "k.toml:1:1: peer.name: missing");
  check("[[peer]]\nname = \"a\"\nurl = \"ftp://a\"\n",
        "k.toml:3:7: peer.url: \"ftp://a\" is not an http:// or https:// URL");
  check("[[peer]]\nname = \"a\"\nurl = \"http://u:p@a\"\n", "names no host (or holds a user name");
  check("[[peer]]\nname = \"a\"\nurl = \"http://a\"\n[[peer]]\nname = \"a\"\nurl = \"http://b\"\n",
        "k.toml:4:1: peer.name: \"a\" names two [[peer]] entries (the other at ");
  check("[[peer]]\nname = \"a\"\nurl = \"http://a\"\nbasic_auth = { username = \"u\" }\n",
        "peer.basic_auth: give both username and password_file");
  check("[[peer]]\nname = \"a\"\nurl = \"http://a\"\nport = 1\n",
        "k.toml:4:1: peer.port: unknown key");
  check("[[peer]]\nname = \"a b\"\nurl = \"http://a\"\n", "is not a valid name");
  check("[[peer]]\nname = \"..\"\nurl = \"http://a\"\n", "cannot name a peer");
}

TEST_CASE(
    "fleet: a peer's token file that cannot be read stops the start (exit 2) and names the peer") {
  TempDir tmp;
  write_text(tmp.path / "k.toml",
             "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\ndata_dir = \"" +
                 (tmp.path / "data").string() +
                 "\"\n[http]\nbind = \"127.0.0.1:0\"\n[[peer]]\nname = \"barn\"\nurl = "
                 "\"http://127.0.0.1:1\"\nbearer_token_file = \"" +
                 (tmp.path / "missing").string() + "\"\n");
  auto r = run_agent_command({"--config", (tmp.path / "k.toml").string()});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("peer barn: bearer_token_file: cannot read"));
}
