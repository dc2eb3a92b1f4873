// A route handler written in C against kiwi/plugin.h alone (tests/plugins/c_handler.c) in the real
// agent: it loads, reads the agent's data through kiwi_data, answers with its status, headers and
// body, takes only the methods it lists, HEAD works, and a refusal stops start-up naming the file
// and the reason.
#include <catch2/catch.hpp>
#include <string>

#include "checks.hpp"

using namespace kiwi_test;

namespace {

// The routes an Agent needs around the C route (the harness waits on /api/current), one sensor,
// and the C route at /c/* with `options`.
std::string c_routes(const std::string& options = "") {
  return "[[sensor]]\nplugin = \"memory\"\n"
         "[[route]]\npath = \"/api/current\"\nhandler = \"current\"\n"
         "[[route]]\npath = \"/api/plugins\"\nhandler = \"plugins\"\n"
         "[[route]]\npath = \"/c/*\"\nhandler = \"" KIWI_TEST_PLUGIN_DIR
         "/test-c_handler.so\"\noptions = { greeting = \"hi\"" +
         options + " }\n";
}

}  // namespace

TEST_CASE("c handler: a route in C loads, reads the agent's data and answers") {
  Agent agent(c_routes());
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 2; }));
  const auto r = c.get("/c/echo?q=a%20b&status=202", {{"X-KIWI-TEST", "seen"}});
  INFO(r.body);
  CHECK(r.status == 202);
  CHECK(r.header("content-type") == "text/plain; charset=utf-8");
  CHECK(r.header("x-c-handler") == "yes");
  CHECK(r.body.starts_with("hi GET /c/echo\nsequence="));
  // The sequence it read is the agent's, as /api/current has it then or a little before.
  const auto at = r.body.find("sequence=") + 9;
  const std::uint64_t seq = std::stoull(r.body.substr(at));
  CHECK(seq >= 2);
  CHECK(seq <= sequence_of(c));
  // One sensor and the agent's own report; the sensor, the report's rows, three routes.
  CHECK_THAT(r.body, Catch::Contains(" sensors=3 plugins=6\nq=a b\nh=seen\nbody=\n"));

  // A body of the plugin's static storage, served from its image.
  const auto s = c.get("/c/static");
  CHECK(s.status == 200);
  CHECK(s.body == "static bytes from the plugin's image\n");

  // A failure the plugin reports is the API's 500.
  const auto f = c.get("/c/x?fail");
  CHECK(f.status == 500);
  CHECK(parse_json(f.body)["error"]["message"].GetString() ==
        std::string("handler failed: asked to fail"));

  // /api/plugins lists the route with its C ABI version.
  const auto p = parse_json(c.get("/api/plugins").body);
  bool listed = false;
  for (const auto& e : p["plugins"].GetArray())
    if (e.HasMember("route") && e["route"].GetString() == std::string("/c/*")) {
      listed = true;
      CHECK(e["plugin"].GetString() == std::string("c_handler"));
      CHECK(e["abi_version"].GetUint() == KIWI_ABI_MAJOR);
      CHECK(e["abi_minor"].GetUint() == KIWI_ABI_MINOR);
    }
  CHECK(listed);
}

TEST_CASE("c handler: the methods it lists reach it, others are 405, HEAD has no body") {
  SECTION("the default: GET and HEAD") {
    Agent agent(c_routes());
    HttpClient c(agent.port());
    const auto post = c.request("POST", "/c/x", {}, "data");
    CHECK(post.status == 405);
    CHECK(post.header("allow") == "GET, HEAD");
    const auto head = c.request("HEAD", "/c/x");
    CHECK(head.status == 200);
    CHECK(head.body.empty());
    CHECK(head.header("x-c-handler") == "yes");
    // The echo names the method, so compare the length on the static body.
    const auto get = c.get("/c/static");
    const auto head_static = c.request("HEAD", "/c/static");
    CHECK(head_static.body.empty());
    CHECK(head_static.header("content-length") == get.header("content-length"));
    CHECK(get.header("content-length") == std::to_string(get.body.size()));
  }
  SECTION("methods = \"GET, HEAD, POST\": a POST and its body reach it") {
    Agent agent(c_routes(", methods = \"GET, HEAD, POST\""));
    HttpClient c(agent.port());
    const auto post = c.request("POST", "/c/x", {}, "data");
    CHECK(post.status == 200);
    CHECK_THAT(post.body, Catch::StartsWith("hi POST /c/x\n"));
    CHECK_THAT(post.body, Catch::EndsWith("body=data\n"));
    CHECK(c.request("PUT", "/c/x").status == 405);
  }
}

TEST_CASE("c handler: a refusal stops start-up with exit 2, naming the file and the reason") {
  TempDir tmp;
  const auto file = (tmp.path / "refuse.toml").string();
  write_text(file, "[[route]]\npath = \"/c/*\"\nhandler = \"" KIWI_TEST_PLUGIN_DIR
                   "/test-c_handler.so\"\noptions = { greeting = \"\" }\n");
  const auto r = run_agent_command({"--check-config", file});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(KIWI_TEST_PLUGIN_DIR
                                    "/test-c_handler.so: handler for '/c/*' refused to start: "
                                    "greeting is empty; say something"));
}

TEST_CASE("c handler: a handler of ABI 1.6 reads history as it did, one of 1.7 its band too") {
  Agent agent(c_routes() + "[[route]]\npath = \"/old/*\"\nhandler = \"" KIWI_TEST_PLUGIN_DIR
                           "/test-c_handler_1_6.so\"\noptions = { greeting = \"old\" }\n");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 3; }));
  // Both handlers list the answer of one query (a line per series: key, values, and the band
  // when they read one); asked until both saw the same samples.
  auto lines = [](const std::string& body) {
    std::vector<std::string> out;
    std::size_t at = 0;
    for (std::size_t end; (end = body.find('\n', at)) != std::string::npos; at = end + 1)
      out.push_back(body.substr(at, end - at));
    return out;
  };
  std::vector<std::string> now, old;
  REQUIRE(eventually([&] {
    const auto a = c.get("/c/history?series=memory_*&step=1&band=1");
    const auto b = c.get("/old/history?series=memory_*&step=1&band=1");
    REQUIRE(a.status == 200);
    REQUIRE(b.status == 200);
    now = lines(a.body);
    old = lines(b.body);
    return !now.empty() && now[0] == old[0] && now[0] != "timestamps=0";
  }));
  INFO("1.7:\n" << Catch::Detail::stringify(now) << "\n1.6:\n" << Catch::Detail::stringify(old));
  REQUIRE(now.size() == old.size());
  REQUIRE(now.size() >= 3);  // two series or more: the rows' size matters from the second on
  for (std::size_t i = 1; i < now.size(); ++i) {
    const auto band = now[i].find(" min ");
    REQUIRE(band != std::string::npos);       // 1.7 asked for a band and reads it
    CHECK(now[i].substr(0, band) == old[i]);  // 1.6: the same keys and values, no band
    CHECK(old[i].find(" min ") == std::string::npos);
    CHECK(old[i].starts_with("memory_"));
  }
  // /api/plugins says which ABI each was built for.
  const auto p = parse_json(c.get("/api/plugins").body);
  bool listed = false;
  for (const auto& e : p["plugins"].GetArray())
    if (e.HasMember("route") && e["route"].GetString() == std::string("/old/*")) {
      listed = true;
      CHECK(e["abi_minor"].GetUint() == 6);
    }
  CHECK(listed);
}
