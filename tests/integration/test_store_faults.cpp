// The history store under faults, on the real agent (issue 16, items 3, 4, 6 and 7): a damaged
// file is moved aside and a new one started, another application's database is refused untouched,
// SIGTERM on a full disk says what it loses, the history cache never serves another query's
// answer, times outside the representable range are a 400, and a sensor's series are capped.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <random>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

std::string bytes_of(const fs::path& p) {
  return read_text(p);
}

// The files in `dir` whose name starts with `prefix`: database files, not the -wal and -shm that
// a file moved aside takes with it when SQLite left them (they may hold its newest commits).
std::vector<fs::path> files_starting(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(prefix) && !name.ends_with("-wal") && !name.ends_with("-shm"))
      out.push_back(e.path());
  }
  return out;
}

// The corruption, deterministic, two whole pages of random bytes at 12 KiB (the issue's
// 2 KiB, two pages of the 1 KiB of then, half a page of 4 KiB: that half can be a page's unused
// room, which quick_check does not read): dd if=/dev/urandom of=kiwi.db bs=4096 seek=3 count=2
// conv=notrunc.
void damage(const fs::path& db) {
  std::mt19937 rng(16);
  std::string junk(8192, '\0');
  for (auto& c : junk) c = static_cast<char>(rng());
  std::FILE* f = std::fopen(db.c_str(), "r+b");
  REQUIRE(f);
  std::fseek(f, 12 * 1024, SEEK_SET);
  std::fwrite(junk.data(), 1, junk.size(), f);
  std::fclose(f);
}

std::string health_body(HttpClient& c) {
  return c.get("/api/health").body;
}

}  // namespace

TEST_CASE("store faults: a damaged page is moved aside at start, health says so until a restart") {
  // Enough for the file to reach past the damaged pages: a catalog of 602 series (the ticks go
  // to the tick log beside it). Its timeout: health's status is about the store here, not about a
  // call that outlasts the 100 ms interval on a busy machine (under qemu-user it sometimes does;
  // the sensor is then "error").
  const std::string sensors = "[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
                              "/test-labelled_sensor.so\"\ntimeout = \"10s\"\n"
                              "options = { series = 200 }\n";
  // stale_after: health's status is about the store here, not about a tick that comes late (an
  // agent built with ThreadSanitizer takes longer than 3 x 100 ms between its first two).
  Agent agent(sensors, "commit_interval = \"100ms\"\ninterval = \"100ms\"\nstale_after = \"10s\"");
  const fs::path db = agent.db_path();
  // Committed rows sit in the WAL until a checkpoint (at the latest when the agent stops).
  auto bytes = [&] {
    std::error_code ec;
    auto wal = fs::file_size(db.string() + "-wal", ec);
    return (fs::exists(db) ? fs::file_size(db) : 0) + (ec ? 0 : wal);
  };
  REQUIRE(eventually([&] { return bytes() > 60 * 1024; }, 60s));
  REQUIRE(agent.stop() == 0);
  REQUIRE(fs::file_size(db) > 20 * 1024);
  damage(db);
  const std::string damaged = bytes_of(db);

  agent.start();
  {
    HttpClient c(agent.port());
    // Serving and storing, "degraded" with the reason, and the file kept for whoever wants it.
    // quick_check runs beside start-up; the collector moves the file aside at the first tick
    // after its verdict, within about a second.
    HttpResponse h;
    REQUIRE(eventually(
        [&] {
          h = c.get("/api/health");
          return h.body.find("kiwi.db.corrupt-") != std::string::npos;
        },
        scaled(5s)));
    INFO(h.body);
    CHECK(h.status == 200);
    auto d = parse_json(h.body);
    CHECK(std::string(d["status"].GetString()) == "degraded");
    REQUIRE(d["store_recovered"].IsString());
    CHECK_THAT(d["store_recovered"].GetString(),
               Catch::Contains("kiwi.db.corrupt-") && Catch::Contains("new history started"));
    auto aside = files_starting(db.parent_path(), "kiwi.db.corrupt-");
    REQUIRE(aside.size() == 1);
    CHECK(bytes_of(aside[0]) == damaged);
    // The log line comes from the same move, written after health has it (under qemu-user,
    // after the first request here has been answered).
    std::string err;
    const bool logged = eventually(
        [&] {
          err = agent.stderr_text();
          return err.find("error: history store: ") != std::string::npos &&
                 err.find("moved to " + aside[0].string()) != std::string::npos;
        },
        scaled(5s));
    INFO(err);
    CHECK(logged);
    // /metrics is the agent's report of its last tick: it says so from the tick after the move.
    CHECK(eventually(
        [&] {
          return c.get("/metrics").body.find("\nkiwi_store_recovered 1\n") != std::string::npos;
        },
        scaled(5s)));
    // Commits work on the new file: nothing fails, nothing piles up.
    const auto seq = sequence_of(c);
    REQUIRE(eventually([&] { return sequence_of(c) > seq + 10; }, 20s));
    d = parse_json(health_body(c));
    CHECK(d["store_write_errors"].GetUint64() == 0);
    CHECK(d["store_samples_pending"].GetUint64() < 5);
  }
  REQUIRE(agent.stop() == 0);

  // A restart acknowledges it: the new file is sound, nothing more is moved.
  agent.start();
  {
    HttpClient c(agent.port());
    const std::string body = health_body(c);
    INFO(body);
    auto d = parse_json(body);
    CHECK(d["store_recovered"].IsNull());
    CHECK(std::string(d["status"].GetString()) == "ok");
    CHECK(files_starting(db.parent_path(), "kiwi.db.corrupt-").size() == 1);
  }
  CHECK(agent.stop() == 0);
}

TEST_CASE("store faults: a file that is not a database is moved aside and the agent starts") {
  TempDir tmp;
  fs::create_directories(tmp.path / "data");
  write_text(tmp.path / "data/kiwi.db", std::string(8192, 'x'));
  Agent agent("", "", "", (tmp.path / "data").string());
  HttpClient c(agent.port());
  auto d = parse_json(health_body(c));
  REQUIRE(d["store_recovered"].IsString());
  CHECK_THAT(d["store_recovered"].GetString(), Catch::Contains("file is not a database"));
  auto aside = files_starting(tmp.path / "data", "kiwi.db.corrupt-");
  REQUIRE(aside.size() == 1);
  CHECK(bytes_of(aside[0]) == std::string(8192, 'x'));
  CHECK(c.get("/api/history?limit=1").status == 200);
  CHECK(agent.stop() == 0);
}

TEST_CASE("store faults: another application's database is refused with exit 2, byte-identical") {
  for (const char* sql : {"CREATE TABLE foo(x); INSERT INTO foo VALUES(1);",
                          "PRAGMA application_id=1234; CREATE TABLE samples(ts, data);"}) {
    TempDir tmp;
    fs::create_directories(tmp.path / "data");
    const fs::path db = tmp.path / "data/kiwi.db";
    {
      sqlite3* h = nullptr;
      REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
      REQUIRE(sqlite3_exec(h, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
      sqlite3_close(h);
    }
    const std::string before = bytes_of(db);
    auto file = (tmp.path / "kiwi.toml").string();
    write_text(file, "[agent]\ndata_dir = \"" + (tmp.path / "data").string() +
                         "\"\nplugin_dir = \"" KIWI_PLUGIN_DIR
                         "\"\n[http]\nbind = \"127.0.0.1:0\"\n[collector]\nsnapshot_path = \"\"\n");
    auto r = run_agent_command({"--config", file});
    INFO(sql << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(db.string()) && Catch::Contains("left untouched"));
    CHECK(bytes_of(db) == before);
    CHECK_FALSE(fs::exists(db.string() + "-wal"));
    CHECK(files_starting(tmp.path / "data", "kiwi.db.corrupt-").empty());
  }
}

TEST_CASE("store faults: SIGTERM on a full disk tries once more and logs the samples it loses",
          "[slow]") {
  TempDir tmp;
  TinyFilesystem tiny(tmp.path / "tiny", "96k");
  if (!tiny.mounted()) skip_test("cannot mount a tmpfs here (needs root); full-disk test not run");
  Agent agent("", "commit_interval = \"200ms\"\ninterval = \"200ms\"", "", tiny.path().string());
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return c.get("/api/health").status == 503; }, 60s));
  REQUIRE(eventually(
      [&] { return parse_json(health_body(c))["store_samples_pending"].GetUint64() > 3; }));
  CHECK_THAT(c.get("/metrics").body, Catch::Contains("\nkiwi_store_samples_pending "));
  CHECK(agent.stop() == 0);
  const std::string log = agent.stderr_text();
  INFO(log);
  CHECK_THAT(log, Catch::Matches("(.|\n)*error: history store: [0-9]+ samples not written at exit "
                                 "\\(lost\\): (.|\n)*full(.|\n)*"));
}

TEST_CASE("store faults: the history cache keys on the whole query as sent, never a decoded one") {
  // A slow interval: both requests of a pair fall in the same sample (the cache's lifetime).
  Agent agent("", "interval = \"5s\"");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 1; }));
  for (int order = 0; order < 2; ++order) {
    // `series=cpu_*%26limit%3D1` is one pattern, "cpu_*&limit=1", that matches nothing.
    const std::string encoded = "/api/history?series=cpu_*%26limit%3D1";
    const std::string split = "/api/history?series=cpu_*&limit=1";
    for (int attempt = 0; attempt < 5; ++attempt) {
      const auto seq = sequence_of(c);
      auto a = c.get(order ? split : encoded);
      auto b = c.get(order ? encoded : split);
      if (sequence_of(c) != seq) continue;  // a sample in between: try again
      auto& enc = order ? b : a;
      auto& spl = order ? a : b;
      INFO(enc.body << "\n" << spl.body);
      REQUIRE(enc.status == 200);
      REQUIRE(spl.status == 200);
      CHECK(parse_json(enc.body)["series"].ObjectEmpty());
      CHECK_FALSE(parse_json(spl.body)["series"].ObjectEmpty());
      CHECK(enc.body != spl.body);
      break;
    }
  }
}

TEST_CASE("store faults: times outside the representable range are a 400 with a JSON body") {
  Agent agent;
  HttpClient c(agent.port());
  for (const char* target :
       {"/api/history?since=179599900000000999.5&limit=86400", "/api/history?since=-1e200",
        "/api/history?until=1e400", "/api/history?since=-179599900000000999.5",
        "/api/history?step=1e300", "/api/history?limit=99999999999999999999999"}) {
    auto r = c.get(target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == 400);
    auto d = parse_json(r.body);
    CHECK(d["error"]["parameter"].IsString());
  }
  // Closed windows far apart (cached for an hour) each get their own answer.
  auto now = parse_json(c.get("/api/current").body)["timestamp"].GetDouble();
  auto a = c.get("/api/history?since=946684800&until=946684801");
  auto b = c.get("/api/history?since=946684800&until=" + std::to_string(now + 3600));
  CHECK(parse_json(a.body)["count"].GetUint() == 0);
  CHECK(parse_json(b.body)["count"].GetUint() >= 1);
}

TEST_CASE("store faults: a sensor's series are capped, the excess refused, counted and reported") {
  // 3 series per zone and 2 more: 62 series, 40 allowed.
  const std::string sensors = "[[sensor]]\nname = \"many\"\nplugin = \"" KIWI_TEST_PLUGIN_DIR
                              "/test-labelled_sensor.so\"\noptions = { series = 20 }\n";
  Agent agent(sensors, "interval = \"200ms\"\nmax_series_per_sensor = 40");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 4; }));
  auto cur = parse_json(c.get("/api/current").body);
  CHECK(cur["sensors"]["many"]["metrics"].GetArray().Size() == 40);
  auto h = c.get("/api/health");
  INFO(h.body);
  CHECK(h.status == 200);
  CHECK_THAT(h.body, Catch::Contains("\"degraded\"") &&
                         Catch::Contains("values refused: reached its limit of 40 series"));
  auto m = c.get("/metrics").body;
  CHECK_THAT(m, Catch::Contains("kiwi_sensor_series_refused_total{sensor=\"many\"} "));
  CHECK_THAT(m, !Catch::Contains("kiwi_sensor_series_refused_total{sensor=\"many\"} 0\n"));
  // The store holds the 40 only.
  auto hist = parse_json(c.get("/api/history?series=labelled_*&limit=1").body);
  CHECK(hist["series"].MemberCount() == 40);
  const std::string log = agent.stderr_text();
  const std::string line = "sensor many: reached its limit of 40 series";
  CHECK(log.find(line) != std::string::npos);
  CHECK(log.find(line) == log.rfind(line));  // once
  CHECK(agent.stop() == 0);
}
