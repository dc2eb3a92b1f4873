// The HTTP API through the real server: compression, caching, HEAD, health, plugins, /metrics,
// limits and hostile paths.
#include <rapidjson/document.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

std::string gunzip(const std::string& in) {
  z_stream z{};
  REQUIRE(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK);
  std::string out(in.size() * 20 + 1024, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  REQUIRE(rc == Z_STREAM_END);
  out.resize(z.total_out);
  return out;
}

const char* kRoutes[] = {
    "/",           "/assets/app.js", "/fleet",       "/api/current", "/api/history",
    "/api/health", "/api/alerts",    "/api/plugins", "/metrics"};

}  // namespace

TEST_CASE("api: gzip when the client accepts it, the same bytes as the plain body") {
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 3; }));
  for (auto target : {"/", "/api/current", "/api/history?limit=120&series=*", "/metrics"}) {
    INFO(target);
    // One sample may land between the two requests: compare a pair with the same ETag.
    HttpResponse plain, zipped;
    REQUIRE(eventually([&] {
      plain = c.get(target);
      zipped = c.get(target, {{"Accept-Encoding", "gzip, deflate"}});
      return plain.header("etag") == zipped.header("etag") &&
             (std::string(target) != "/metrics" || plain.body.size() > 0);
    }));
    CHECK(zipped.status == 200);
    CHECK(zipped.header("content-encoding") == "gzip");
    CHECK(zipped.header("vary") == "Accept-Encoding");
    CHECK(plain.header("content-encoding").empty());
    CHECK(zipped.body.size() < plain.body.size() / 2);
    if (std::string(target) != "/metrics") CHECK(gunzip(zipped.body) == plain.body);
  }
  // q=0 means "not gzip"; a small body is sent plain even to a gzip client.
  CHECK(
      c.get("/api/current", {{"Accept-Encoding", "gzip;q=0"}}).header("content-encoding").empty());
  CHECK(c.get("/api/health", {{"Accept-Encoding", "gzip"}}).header("content-encoding").empty());
}

TEST_CASE("dashboard: every embedded file is served as the bytes of its source, plain or gzip") {
  // The files are embedded plain and gzipped by the server on the first request that asks. Both
  // must be exactly the source files (index.html differs: options are written in).
  Agent agent;
  HttpClient c(agent.port());
  const std::string src = KIWI_SOURCE_DIR;
  const std::pair<const char*, std::string> files[] = {
      {"/assets/app.js", src + "/www/assets/app.js"},
      {"/fleet", src + "/www/fleet.html"},
      {"/assets/fleet.js", src + "/www/assets/fleet.js"},
      {"/assets/style.css", src + "/www/assets/style.css"},
      {"/assets/uPlot.iife.min.js", src + "/tools/web/node_modules/uplot/dist/uPlot.iife.min.js"},
      {"/assets/uPlot.min.css", src + "/tools/web/node_modules/uplot/dist/uPlot.min.css"},
      {"/assets/README.md", src + "/README.md"}};
  for (auto& [target, path] : files) {
    INFO(target);
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    const std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto zipped = c.get(target, {{"Accept-Encoding", "gzip"}});  // first: the gzip is made now
    REQUIRE(zipped.status == 200);
    CHECK(zipped.header("content-encoding") == "gzip");
    CHECK(gunzip(zipped.body) == want);
    for (int i = 0; i < 2; ++i) {
      auto plain = c.get(target);
      REQUIRE(plain.status == 200);
      CHECK(plain.header("content-encoding").empty());
      CHECK(plain.header("vary") == "Accept-Encoding");
      CHECK(plain.header("etag") == zipped.header("etag"));
      CHECK(plain.body == want);
    }
    auto head = c.request("HEAD", target);
    CHECK(head.status == 200);
    CHECK(head.header("content-length") == std::to_string(want.size()));
  }
  auto page = c.get("/");
  CHECK_THAT(page.body, Catch::Contains("data-poll-ms=\"5000\""));
  CHECK(gunzip(c.get("/", {{"Accept-Encoding", "gzip"}}).body) == page.body);
}

TEST_CASE("api: ETag and If-None-Match give 304 on the snapshot, static files and history") {
  Agent agent;
  HttpClient c(agent.port());
  auto page = c.get("/");
  CHECK(c.get("/", {{"If-None-Match", page.header("etag")}}).status == 304);
  CHECK(c.get("/", {{"If-None-Match", "\"other\""}}).status == 200);

  // A history window that ended before the latest sample never changes: cacheable.
  REQUIRE(eventually([&] { return sequence_of(c) >= 3; }));
  auto now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string closed =
      "/api/history?since=" + std::to_string(now - 60) + "&until=" + std::to_string(now - 1.5);
  auto h = c.get(closed);
  REQUIRE(h.status == 200);
  CHECK(h.header("cache-control") == "max-age=3600");
  auto again = c.get(closed, {{"If-None-Match", h.header("etag")}});
  CHECK(again.status == 304);
  CHECK(again.body.empty());
  // An open window is revalidated every time and changes with each sample.
  auto open = c.get("/api/history?limit=5");
  CHECK(open.header("cache-control") == "no-cache");
  auto seq = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) > seq; }));
  CHECK(c.get("/api/history?limit=5", {{"If-None-Match", open.header("etag")}}).status == 200);
}

TEST_CASE("api: between two samples, one history rendering serves every spelling of a query") {
  // Also a stepped window that ends "now": it only changes with the next sample, so a poll with
  // If-None-Match between two samples gets 304 (the dashboard's 1 h and 24 h charts do this).
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 2; }));
  bool same_sample = false;
  for (int attempt = 0; attempt < 20 && !same_sample; ++attempt) {
    auto before = sequence_of(c);
    auto a = c.get("/api/history?limit=5&series=cpu_*,memory_used_ratio");
    auto b = c.get("/api/history?series=cpu_*,memory_used_ratio&limit=5");
    auto stepped = c.get("/api/history?step=60&limit=10");
    auto revalidated =
        c.get("/api/history?step=60&limit=10", {{"If-None-Match", stepped.header("etag")}});
    if (sequence_of(c) != before) continue;  // a sample landed in between: try again
    same_sample = true;
    REQUIRE(a.status == 200);
    CHECK(a.header("etag") == b.header("etag"));
    CHECK(a.body == b.body);
    REQUIRE(stepped.status == 200);
    CHECK(revalidated.status == 304);
  }
  CHECK(same_sample);
}

TEST_CASE("api: HEAD answers every GET route with the same headers and no body") {
  Agent agent;
  HttpClient c(agent.port());
  for (auto target : kRoutes) {
    INFO(target);
    auto get = c.get(target);
    auto head = c.request("HEAD", target);
    CHECK(head.status == get.status);
    CHECK(head.header("content-type") == get.header("content-type"));
    CHECK(head.body.empty());
  }
  CHECK(c.get("/api/current").status == 200);
}

TEST_CASE("api: /api/health is 200 when all is well and 503 with the reasons when not") {
  SECTION("healthy") {
    Agent agent;
    HttpClient c(agent.port());
    auto r = c.get("/api/health");
    CHECK(r.status == 200);
    CHECK(r.header("cache-control") == "no-store");
    auto d = parse_json(r.body);
    CHECK(d["status"].GetString() == std::string("ok"));
    CHECK(d["reasons"].Size() == 0);
    CHECK(d["last_sample_age_seconds"].GetDouble() < 2);
    CHECK(d["uptime_seconds"].GetDouble() >= 0);
  }
  SECTION("a sensor in error") {
    Agent agent("[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
                "/test-throwing_sensor.so\"\nname = \"flaky\"\n");
    HttpClient c(agent.port());
    auto r = c.get("/api/health");
    CHECK(r.status == 503);
    auto d = parse_json(r.body);
    CHECK(d["status"].GetString() == std::string("failing"));
    REQUIRE(d["reasons"].Size() == 1);
    CHECK_THAT(d["reasons"][0].GetString(), Catch::StartsWith("sensor flaky: read /sys/bus/i2c"));
  }
  SECTION("a stale snapshot") {
    Agent agent("", "stale_after = \"1s\"");
    HttpClient c(agent.port());
    FrozenThread frozen(agent.pid(), "kiwi-collector");  // a collector that stopped ticking
    bool stale = eventually([&] {
      auto r = c.get("/api/health");
      return r.status == 503 && r.body.find("stale: last sample") != std::string::npos;
    });
    CHECK(stale);
  }
}

TEST_CASE("api: /api/alerts on the default routes: none without rules, 304, a bad filter a 400") {
  // The built-in clock_unsynchronised is pending from the first sample wherever the machine's
  // clock is not synchronised (a VM without a time daemon): the test's host, not the agent.
  Agent agent("[alerts]\ndisable = [\"clock_unsynchronised\"]\n");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 1; }));
  auto r = c.get("/api/alerts?state=firing,pending&severity=critical");
  CHECK(r.status == 200);
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.header("cache-control") == "no-cache");
  auto d = parse_json(r.body);
  CHECK(d["version"].GetUint() == 1);
  CHECK(d["timestamp"].GetDouble() > 0);
  CHECK(d["firing"].GetUint() == 0);
  CHECK(d["pending"].GetUint() == 0);
  CHECK(d["alerts"].Size() == 0);
  // The ETag names the body: asked again with it, 304 unless a sample came in between.
  bool not_modified = eventually([&] {
    auto first = c.get("/api/alerts");
    return c.get("/api/alerts", {{"If-None-Match", first.header("etag")}}).status == 304;
  });
  CHECK(not_modified);
  auto bad = c.get("/api/alerts?state=firing,hot");
  CHECK(bad.status == 400);
  auto e = parse_json(bad.body);
  CHECK(e["error"]["parameter"].GetString() == std::string("state"));
  CHECK(e["error"]["message"].GetString() ==
        std::string("'hot' is not a state; use firing, pending or resolved (a comma list)"));
  auto health = parse_json(c.get("/api/health").body);
  CHECK(health["alerts"]["firing"].GetUint() == 0);
  CHECK(health["notifiers"].Size() == 0);
}

TEST_CASE("api: /api/plugins lists every plugin with its file, kind, ABI and status") {
  Agent agent("[[sensor]]\nplugin = \"memory\"\n[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
              "/test-throwing_sensor.so\"\nname = \"flaky\"\n");
  HttpClient c(agent.port());
  auto d = parse_json(c.get("/api/plugins").body);
  auto& list = d["plugins"];
  REQUIRE(list.Size() == 2 + 2 + 11);  // two sensors, the agent's own reports, the eleven routes
  CHECK(list[0]["name"].GetString() == std::string("memory"));
  CHECK(list[0]["kind"].GetString() == std::string("sensor"));
  CHECK(list[0]["file"].GetString() == std::string(KIWI_PLUGIN_DIR "/kiwi-sensor-memory.so"));
  CHECK(list[0]["abi_version"].GetUint() == KIWI_ABI_MAJOR);
  CHECK(list[0]["abi_minor"].GetUint() == KIWI_ABI_MINOR);
  CHECK(list[0]["status"].GetString() == std::string("ok"));
  CHECK(list[0]["last_error"].IsNull());
  CHECK(list[0]["last_sample_duration_seconds"].GetDouble() >= 0);
  CHECK(list[1]["status"].GetString() == std::string("error"));
  CHECK_THAT(list[1]["last_error"].GetString(), Catch::Contains("Input/output error"));
  // The agent's own report (app/telemetry.cpp) is listed with the sensors: built in, no file.
  CHECK(list[2]["name"].GetString() == std::string("agent"));
  CHECK(list[2]["kind"].GetString() == std::string("sensor"));
  CHECK(list[2]["plugin"].GetString() == std::string("agent"));
  CHECK(list[2]["file"].GetString() == std::string(""));
  CHECK(list[2]["abi_minor"].GetUint() == KIWI_ABI_MINOR);
  CHECK(list[3]["name"].GetString() == std::string("alerts"));  // the alert rules' report
  CHECK(list[3]["file"].GetString() == std::string(""));
  CHECK(list[4]["route"].GetString() == std::string("/"));
  CHECK(list[4]["kind"].GetString() == std::string("handler"));
  CHECK(list[4]["plugin"].GetString() == std::string("dashboard"));
}

TEST_CASE("api: /metrics passes promtool check metrics and carries the self-metrics") {
  Agent agent(
      "[[sensor]]\nplugin = \"cpu\"\n[[sensor]]\nplugin = \"memory\"\n[[sensor]]\nplugin = "
      "\"storage\"\n[[sensor]]\nplugin = \"thermal\"\n[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
      "/test-throwing_sensor.so\"\nname = \"flaky\"\n");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 2; }));
  c.get("/nope");
  // The request is counted in the agent's own report of the next tick.
  HttpResponse r;
  REQUIRE(eventually([&] {
    r = c.get("/metrics");
    return r.body.find("status=\"404\"} 1") != std::string::npos;
  }));
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type") == "text/plain; version=0.0.4; charset=utf-8");
  auto file = agent.dir() / "metrics.txt";
  write_text(file, r.body);
  auto [code, out] = run_shell("promtool check metrics < " + file.string());
  INFO(out);
  CHECK(code == 0);
  CHECK(out.empty());  // no lint warnings either
  for (auto needle :
       {"# TYPE kiwi_cpu_usage_ratio gauge", "kiwi_memory_total_bytes ",
        "kiwi_build_info{version=", "kiwi_sensor_sample_duration_seconds{sensor=\"cpu\"}",
        "kiwi_sensor_errors_total{sensor=\"flaky\"}", "kiwi_store_write_errors_total 0",
        "kiwi_http_requests_total{route=\"unmatched\",status=\"404\"} 1"})
    CHECK_THAT(r.body, Catch::Contains(needle));
}

TEST_CASE("api: oversize URI, header block and body get 414, 431 and 413 as JSON") {
  Agent agent;
  {
    HttpClient c(agent.port());
    auto r = c.get("/api/history?series=" + std::string(3000, 'a'));
    CHECK(r.status == 414);
    CHECK(parse_json(r.body)["error"]["status"].GetInt() == 414);
  }
  {
    // Just under the limit: served (the connection's memory holds the largest allowed block).
    HttpClient c(agent.port());
    CHECK(c.get("/api/current", {{"X-Filler", std::string(8000, 'x')}}).status == 200);
  }
  {
    HttpClient c(agent.port());
    auto r = c.get("/api/current", {{"X-Filler", std::string(9000, 'x')}});
    CHECK(r.status == 431);
    CHECK(parse_json(r.body)["error"]["status"].GetInt() == 431);
  }
  {
    // Far past the server's memory for one request: still refused, and the agent lives on.
    HttpClient c(agent.port());
    try {
      auto r = c.get("/api/current", {{"X-Filler", std::string(100000, 'x')}});
      CHECK(r.status >= 400);
    } catch (const std::exception&) {
      // closing the connection is an acceptable answer too
    }
  }
  {
    HttpClient c(agent.port());
    auto r = c.request("GET", "/api/current", {}, std::string(70000, 'b'));
    CHECK(r.status == 413);
    auto small = c.request("GET", "/api/current", {}, "ignored=1");
    CHECK(small.status == 200);  // a small body is ignored safely
  }
  HttpClient c(agent.port());
  CHECK(c.get("/api/health").status == 200);
}

TEST_CASE("api: percent-encoded and dot-dot paths never leave the static asset set") {
  Agent agent;
  HttpClient c(agent.port());
  // The corpus tools/faults.sh sends too: one request-target per line, '#' starts a comment.
  std::ifstream corpus(std::string(KIWI_SOURCE_DIR) + "/tests/faults/traversal-paths.txt");
  REQUIRE(corpus);
  int paths = 0;
  for (std::string path; std::getline(corpus, path);) {
    if (path.empty() || path[0] == '#') continue;
    ++paths;
    INFO(path);
    auto r = c.get(path);
    CHECK((r.status == 404 || r.status == 400 ||
           (r.status == 200 && r.body.find("root:") == std::string::npos)));
    CHECK(r.body.find("root:x:0") == std::string::npos);
    CHECK(r.body.find("[agent]") == std::string::npos);
  }
  CHECK(paths == 34);
  CHECK(c.get("/assets/app.js").status == 200);
}

TEST_CASE("api: CORS is off by default and allows only the listed origins") {
  SECTION("off") {
    Agent agent;
    HttpClient c(agent.port());
    auto r = c.get("/api/current", {{"Origin", "http://evil.example"}});
    CHECK(r.header("access-control-allow-origin").empty());
    auto pre =
        c.request("OPTIONS", "/api/current",
                  {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "GET"}});
    CHECK(pre.status == 405);
  }
  SECTION("allowlist") {
    Agent agent("", "", "cors_origins = [\"http://192.168.1.20:3000\"]");
    HttpClient c(agent.port());
    auto allowed = c.get("/api/current", {{"Origin", "http://192.168.1.20:3000"}});
    CHECK(allowed.header("access-control-allow-origin") == "http://192.168.1.20:3000");
    CHECK(allowed.header("vary") == "Origin");
    auto other = c.get("/api/current", {{"Origin", "http://192.168.1.20:3001"}});
    CHECK(other.header("access-control-allow-origin").empty());
    auto pre = c.request("OPTIONS", "/api/history",
                         {{"Origin", "http://192.168.1.20:3000"},
                          {"Access-Control-Request-Method", "GET"},
                          {"Access-Control-Request-Headers", "if-none-match"}});
    CHECK(pre.status == 204);
    CHECK(pre.header("access-control-allow-methods") == "GET, HEAD");
    CHECK(pre.header("access-control-allow-origin") == "http://192.168.1.20:3000");
  }
}
