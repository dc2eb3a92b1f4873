// Issue 39, item 4: a schema-4 history file written by 9f74b9a keeps all its history, and the same
// queries return the same timestamps and values after the upgrade. tests/fixtures/schema4 holds
// such a file (3 h of ticks through 9f74b9a's Store, then 9f74b9a's agent on the rk3588 tree,
// restarted inside a minute) and golden.json, what 9f74b9a's agent answered to each query there
// (make.py made both; its README says how). The current agent, started on a copy, must answer
// every query with the same timestamps and values, as rendered, at its first start on the file
// (the upgrade) and at the next (the upgraded file opened again).
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sqlite3.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <sstream>

#include "checks.hpp"

using namespace kiwi_test;

namespace {

const fs::path kFixture = fs::path(KIWI_FIXTURES_DIR) / "schema4";

// Every retention option of [collector], at the longest the config takes, so that the agent
// prunes nothing of the fixture whatever day the test runs (within kLongestRetentionDays of the
// fixture's last tick). A retention option added later (a rollup tier's) is set here too, to its
// longest: this is the test's one place for them.
constexpr int kLongestRetentionDays = 3660;
const std::string kRetentions =
    "retention = \"3660d\"\nminute_retention = \"3660d\"\nhour_retention = \"3660d\"\n";

// gunzip `from` into `to` (the fixture is kiwi.db compressed: 1 KiB pages, a quarter empty).
void gunzip(const fs::path& from, const fs::path& to) {
  gzFile in = gzopen(from.c_str(), "rb");
  REQUIRE(in != nullptr);
  std::ofstream out(to, std::ios::binary);
  char buf[65536];
  int n = 0;
  while ((n = gzread(in, buf, sizeof buf)) > 0) out.write(buf, n);
  REQUIRE(n == 0);
  REQUIRE(gzclose(in) == Z_OK);
  out.close();
  REQUIRE(out);
}

// PRAGMA `name` of the SQLite file `db`, opened read-only (no agent may hold it: it opens its
// file for itself alone).
std::int64_t pragma_of(const fs::path& db, const std::string& name) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(h, ("PRAGMA " + name).c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const std::int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

std::string text_of(const rapidjson::Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return b.GetString();
}

// How `actual` differs from `golden` (one /api/history answer each), "" if in nothing that
// matters: count, step, agg, every timestamp, and each golden series' unit, labels and values
// (numbers equal as rendered, nulls where nulls were). A series the golden answer lacks may be
// there (a sensor or an agent metric 9f74b9a did not have, written now) if all its values are
// null: it had no data in the fixture's past. The order of the series is not compared.
std::string difference(const rapidjson::Value& golden, const rapidjson::Value& actual) {
  std::ostringstream out;
  for (const char* key : {"count", "step", "agg", "timestamps"}) {
    const bool g = golden.HasMember(key), a = actual.HasMember(key);
    if (g != a || (g && golden[key] != actual[key])) {
      out << key << ": " << (g ? text_of(golden[key]).substr(0, 300) : "absent") << " before, "
          << (a ? text_of(actual[key]).substr(0, 300) : "absent") << " now";
      if (g && a && golden[key].IsArray() && actual[key].IsArray()) {
        const auto& ga = golden[key];
        const auto& aa = actual[key];
        rapidjson::SizeType i = 0;
        while (i < ga.Size() && i < aa.Size() && ga[i] == aa[i]) ++i;
        out << " (sizes " << ga.Size() << " and " << aa.Size() << ", first difference at [" << i
            << "]: " << (i < ga.Size() ? text_of(ga[i]) : "none") << " before, "
            << (i < aa.Size() ? text_of(aa[i]) : "none") << " now)";
      }
      return out.str();
    }
  }
  const auto& gs = golden["series"];
  const auto& as = actual["series"];
  for (auto& s : gs.GetObject()) {
    const std::string name = s.name.GetString();
    if (!as.HasMember(s.name)) return "series " + name + " is missing";
    const auto& a = as[s.name];
    for (const char* key : {"name", "labels", "unit"}) {
      const bool g = s.value.HasMember(key), h = a.HasMember(key);
      if (g != h || (g && s.value[key] != a[key]))
        return "series " + name + ": " + key + " " +
               (g ? text_of(s.value[key]) : std::string("absent")) + " before, " +
               (h ? text_of(a[key]) : std::string("absent")) + " now";
    }
    const auto& gv = s.value["values"];
    const auto& av = a["values"];
    if (gv.Size() != av.Size())
      return "series " + name + ": " + std::to_string(gv.Size()) + " values before, " +
             std::to_string(av.Size()) + " now";
    for (rapidjson::SizeType i = 0; i < gv.Size(); ++i)
      if (gv[i] != av[i])
        return "series " + name + ": value [" + std::to_string(i) + "] at " +
               text_of(golden["timestamps"][i]) + " was " + text_of(gv[i]) + ", now " +
               text_of(av[i]);
  }
  for (auto& s : as.GetObject()) {
    if (gs.HasMember(s.name)) continue;
    for (auto& v : s.value["values"].GetArray())
      if (!v.IsNull())
        return std::string("series ") + s.name.GetString() + " is new and has values (" +
               text_of(s.value["values"]).substr(0, 200) + ")";
  }
  return "";
}

}  // namespace

TEST_CASE(
    "schema 4: a history file written by 9f74b9a answers every golden query with the same "
    "timestamps and values after the upgrade, and again after a restart") {
  const auto golden = parse_json(read_text(kFixture / "golden.json"));
  const auto& answers = golden["answers"];
  // The answers hold the history: tens of thousands of values (a golden file of empty answers
  // would pass anything).
  std::size_t values = 0;
  for (auto& a : answers.GetArray())
    for (auto& s : a["answer"]["series"].GetObject())
      for (auto& v : s.value["values"].GetArray()) values += v.IsNull() ? 0 : 1;
  REQUIRE(answers.Size() >= 100);
  REQUIRE(values >= 30000);
  const double last_tick = golden["last_tick"].GetDouble();
  // The agent prunes by the wall clock: past kLongestRetentionDays after the fixture's last tick
  // it would drop the history this test compares. Then make the fixture again (its README).
  INFO("the fixture's last tick is " << (now_seconds() - last_tick) / 86400 << " days old");
  REQUIRE(now_seconds() - last_tick < (kLongestRetentionDays - 1) * 86400.0);

  TempDir tmp;
  const fs::path data = tmp.path / "data";
  fs::create_directories(data);
  gunzip(kFixture / "kiwi.db.gz", data / "kiwi.db");
  REQUIRE(pragma_of(data / "kiwi.db", "user_version") == 4);
  REQUIRE(pragma_of(data / "kiwi.db", "page_size") == 1024);
  const std::int64_t application_id = pragma_of(data / "kiwi.db", "application_id");

  AgentOptions o;
  o.data_dir = data;
  o.agent_lines = "procfs = \"" KIWI_FIXTURES_DIR "/rk3588/proc\"\nsysfs = \"" KIWI_FIXTURES_DIR
                  "/rk3588/sys\"\n";
  o.collector_lines = kRetentions;
  Agent agent(o);
  const char* const starts[] = {"first start (the upgrade)", "second start (upgraded file)"};
  for (int round = 0; round < 2; ++round) {
    if (round == 1) agent.start(Ready::first_sample);
    HttpClient c(agent.port());
    for (auto& a : answers.GetArray()) {
      const std::string query = a["query"].GetString();
      const auto r = c.get(query);
      INFO(starts[round] << ": " << query);
      REQUIRE(r.status == 200);
      CHECK(difference(a["answer"], parse_json(r.body)) == "");
    }
    REQUIRE(agent.stop() == 0);
  }
  // The file is marked with the schema the current agent writes: the one a new file gets.
  TempDir fresh;
  {
    AgentOptions f = o;
    f.data_dir = fresh.path / "data";
    Agent made(f);
    REQUIRE(made.stop() == 0);
  }
  const std::int64_t current = pragma_of(fresh.path / "data/kiwi.db", "user_version");
  INFO("the current agent's schema is " << current);
  CHECK(current >= 4);
  CHECK(pragma_of(data / "kiwi.db", "user_version") == current);
  CHECK(pragma_of(data / "kiwi.db", "application_id") == application_id);
  // Rewritten in the pages a new file gets (4 KiB), as the queries above were answered from it.
  CHECK(pragma_of(data / "kiwi.db", "page_size") ==
        pragma_of(fresh.path / "data/kiwi.db", "page_size"));
  CHECK(pragma_of(data / "kiwi.db", "page_size") == 4096);
  // Nothing was moved aside as damaged (kiwi.db.corrupt-<time>).
  for (auto& e : fs::directory_iterator(data))
    CHECK(e.path().filename().string().find("corrupt") == std::string::npos);
}
