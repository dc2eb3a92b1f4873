// Remote write from the real agent: to a real Prometheus 2.42 (Debian's, with
// --web.enable-remote-write-receiver) through an outage, and to a test receiver on loopback
// (receiver.hpp) that answers 400, 429, or never.
#include <rapidjson/document.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "checks.hpp"
#include "harness.hpp"
#include "prometheus.hpp"
#include "receiver.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

// A receiver only: nothing to scrape.
const std::string kRemoteWriteConfig = "global:\n  scrape_interval: 1m\n";

// The agent's /api/health entry for its one output (an empty object until there is one).
struct Backlog {
  std::string state;
  double seconds_behind = -1;
  double samples_sent = 0, dropped = 0, failures = 0;
  std::string last_error;
  std::string status;
};
Backlog backlog(const Agent& a) {
  Backlog b;
  auto d = get_json(a.port(), "/api/health");
  if (!d.HasMember("remote_write") || d["remote_write"].Empty()) return b;
  auto& o = d["remote_write"][0];
  b.status = d["status"].GetString();
  b.state = o["state"].GetString();
  b.seconds_behind = o["seconds_behind"].GetDouble();
  b.samples_sent = o["samples_sent_total"].GetDouble();
  b.dropped = o["batches_dropped_total"].GetDouble();
  b.failures = o["failures_total"].GetDouble();
  b.last_error = o["last_error"].GetString();
  return b;
}

// The stamps (unix ms) of the samples the agent holds from `from_ms` to `until_ms`: every tick it
// took, whether or not a busy machine made it skip a second.
std::vector<std::int64_t> ticks_between(const Agent& a, std::int64_t from_ms,
                                        std::int64_t until_ms) {
  auto d = get_json(a.port(), "/api/history?series=memory_available_bytes&limit=86400&since=" +
                                  std::to_string(from_ms / 1000.0) +
                                  "&until=" + std::to_string(until_ms / 1000.0));
  std::vector<std::int64_t> out;
  for (auto& t : d["timestamps"].GetArray())
    out.push_back(static_cast<std::int64_t>(std::llround(t.GetDouble() * 1000)));
  return out;
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

TEST_CASE(
    "remote write: a real Prometheus receives the agent's series, named as /metrics names them") {
  Prometheus prom(kRemoteWriteConfig, {"--web.enable-remote-write-receiver"});
  Agent agent(
      "[[remote_write]]\ninterval = \"1s\"\nseries = [\"memory_*\", \"cpu_core_usage_ratio\"]\n"
      "options = { url = \"" +
      prom.url() + "\", labels = { board = \"kiwipi\" } }\n");
  INFO(agent.stderr_text());
  std::vector<std::pair<std::map<std::string, std::string>, double>> r;
  REQUIRE(eventually(
      [&] {
        r = prom.query("kiwi_memory_available_bytes");
        return !r.empty();
      },
      30s));
  CHECK(r[0].first["board"] == "kiwipi");
  CHECK(r[0].first["instance"] == host_name());
  CHECK(r[0].second > 0);
  // CPU usage is a rate: the cpu sensor has it from its second sample on.
  CHECK(eventually([&] { return !prom.query("kiwi_cpu_core_usage_ratio").empty(); }, 20s));
  CHECK(prom.query("kiwi_network_receive_bytes_per_second").empty());  // not in `series`
  const Backlog b = backlog(agent);
  CHECK(b.state == "live");
  CHECK(b.samples_sent > 0);
  CHECK(b.dropped == 0);
  HttpClient c(agent.port());
  const std::string plugins = c.get("/api/plugins").body;
  CHECK(
      plugins.find("{\"name\":\"remote_write\",\"kind\":\"output\",\"plugin\":\"remote_write\"") !=
      std::string::npos);
}

TEST_CASE(
    "remote write: after Prometheus is down for 40 s, every sample of the outage reaches it, in "
    "order",
    "[slow]") {
  Prometheus prom(kRemoteWriteConfig, {"--web.enable-remote-write-receiver"});
  Agent agent(
      "[[remote_write]]\ninterval = \"1s\"\nseries = [\"memory_available_bytes\"]\n"
      "options = { url = \"" +
      prom.url() + "\" }\n");
  INFO(agent.stderr_text());
  REQUIRE(eventually([&] { return !prom.query("kiwi_memory_available_bytes").empty(); }, 30s));
  const double down_at = now_seconds();
  prom.stop();
  // The outage: 40 s of ticks the receiver does not get (the agent's own backlog says when).
  REQUIRE(eventually([&] { return backlog(agent).seconds_behind >= 40; }, 60s));
  const Backlog during = backlog(agent);
  CHECK(during.state == "retrying");
  CHECK(during.failures > 0);
  CHECK(during.last_error.find("connect") != std::string::npos);
  prom.start();
  Backlog after;
  REQUIRE(eventually(
      [&] {
        after = backlog(agent);
        return after.state == "live" && after.seconds_behind == 0;
      },
      90s));
  CHECK(after.dropped == 0);  // out of order would have been refused (400)
  // A window of whole ticks around the outage, its edges between ticks.
  const double from = std::floor(down_at) - 5.5;
  const double until = std::floor(now_seconds()) - 2.5;
  const int range = static_cast<int>(until - from);
  auto hist = get_json(agent.port(),
                       "/api/history?series=memory_available_bytes&since=" + std::to_string(from) +
                           "&until=" + std::to_string(until) + "&limit=86400");
  REQUIRE(hist.HasMember("timestamps"));
  const auto ticks = hist["timestamps"].Size();
  CHECK(ticks >= 45);
  REQUIRE(eventually(
      [&] {
        auto r = prom.query(
            "count_over_time(kiwi_memory_available_bytes[" + std::to_string(range) + "s])", until);
        return r.size() == 1 && r[0].second == static_cast<double>(ticks);
      },
      20s));
}

TEST_CASE(
    "remote write: a receiver answering 400 has its batches dropped, counted and logged once, and "
    "the cursor moves on") {
  Receiver rx([](int) { return 400; });
  TempDir secrets;
  write_text(secrets.path / "rw.pass", "s3cret\n");
  Agent agent("[[remote_write]]\ninterval = \"1s\"\n[remote_write.options]\nurl = \"" + rx.url() +
              "\"\nheaders = { \"X-Scope-OrgID\" = \"pi\" }\n"
              "basic_auth = { username = \"kiwi\", password_file = \"" +
              (secrets.path / "rw.pass").string() + "\" }\n");
  INFO(agent.stderr_text());
  REQUIRE(eventually([&] { return backlog(agent).dropped >= 4; }, 30s));
  const Backlog b = backlog(agent);
  CHECK(b.seconds_behind < 5);  // past every refused batch
  CHECK(b.last_error.find("HTTP 400") != std::string::npos);
  CHECK(b.status == "ok");
  const std::string log = agent.stderr_text();
  std::size_t lines = 0;
  for (auto at = log.find("refused a batch"); at != std::string::npos;
       at = log.find("refused a batch", at + 1))
    ++lines;
  CHECK(lines == 1);
  HttpClient c(agent.port());
  const std::string metrics = c.get("/metrics").body;
  CHECK(metrics.find("kiwi_remote_write_batches_dropped_total{remote_write=\"remote_write\"}") !=
        std::string::npos);
  auto reqs = rx.requests();
  REQUIRE(!reqs.empty());
  auto& h = reqs[0].headers;
  CHECK(h["content-encoding"] == "snappy");
  CHECK(h["content-type"] == "application/x-protobuf");
  CHECK(h["x-prometheus-remote-write-version"] == "0.1.0");
  CHECK(h["x-scope-orgid"] == "pi");
  CHECK(h["authorization"] == "Basic a2l3aTpzM2NyZXQ=");  // kiwi:s3cret
  CHECK(!reqs[0].series.empty());
  // Each batch was sent once: no request repeats an earlier one's samples.
  std::set<std::int64_t> seen;
  for (auto& r : reqs)
    for (auto& s : r.series)
      if (s.labels["__name__"] == "kiwi_memory_available_bytes")
        for (auto& [ts, v] : s.samples) CHECK(seen.insert(ts).second);
}

TEST_CASE(
    "remote write: a receiver answering 429 loses nothing: the refused samples come again, oldest "
    "first",
    "[slow]") {
  Receiver rx([](int n) { return n < 4 ? 429 : 200; });
  Agent agent(
      "[[remote_write]]\ninterval = \"1s\"\nseries = [\"memory_available_bytes\"]\n"
      "options = { url = \"" +
      rx.url() + "\" }\n");
  INFO(agent.stderr_text());
  REQUIRE(eventually(
      [&] {
        auto reqs = rx.requests();
        return reqs.size() >= 8 && backlog(agent).state == "live";
      },
      60s));
  const auto reqs = rx.requests();
  std::vector<std::int64_t> refused, taken;
  for (auto& r : reqs)
    for (auto& s : r.series)
      for (auto& [ts, v] : s.samples) (r.status == 200 ? taken : refused).push_back(ts);
  REQUIRE(!refused.empty());
  REQUIRE(taken.size() >= 5);
  // Taken: one per tick, oldest first, no gap and no repeat, from the first refused one on: every
  // sample the agent holds in that span (ticks, not seconds: a busy machine may skip one).
  CHECK(taken.front() <= refused.front());
  CHECK(taken == ticks_between(agent, taken.front(), taken.back()));
  for (auto ts : refused) CHECK(std::find(taken.begin(), taken.end(), ts) != taken.end());
  const Backlog b = backlog(agent);
  CHECK(b.failures == 4);
  CHECK(b.dropped == 0);
}

TEST_CASE("remote write: a receiver that never answers delays neither ticks nor HTTP responses",
          "[slow]") {
  Agent plain;
  Receiver rx([](int) { return 0; });  // accepts, reads, never answers
  Agent agent("[[remote_write]]\ninterval = \"1s\"\noptions = { url = \"" + rx.url() +
              "\", timeout = \"5s\" }\n");
  INFO(agent.stderr_text());
  REQUIRE(eventually([&] { return !rx.requests().empty(); }, 20s));  // a write is hanging now
  // Latency of /api/health (which reads the outputs' status) and /metrics over a few seconds, of
  // an agent without an output and of this one, asked in turn: both under the same load.
  HttpClient to_plain(plain.port()), to_agent(agent.port());
  double without = 0, with = 0;
  const auto end = Clock::now() + 6s;
  while (Clock::now() < end) {
    for (auto [c, worst] : {std::pair{&to_plain, &without}, std::pair{&to_agent, &with}})
      for (const char* target : {"/api/health", "/metrics"}) {
        const auto t0 = Clock::now();
        REQUIRE(c->get(target).status == 200);
        *worst =
            std::max(*worst, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    std::this_thread::sleep_for(50ms);
  }
  INFO("worst latency without an output " << without << " ms, with a hung one " << with << " ms");
  CHECK(with < without + 250);
  CHECK(missed_ticks(to_agent) == 0);
  // And it gives up after its timeout and retries.
  REQUIRE(eventually([&] { return backlog(agent).failures >= 1; }, 20s));
  CHECK(backlog(agent).last_error.find("Timeout") != std::string::npos);
  CHECK(agent.stop() == 0);
}

TEST_CASE("remote write: SIGHUP moves an output to another receiver, which goes on from the cursor",
          "[slow]") {
  Receiver a([](int) { return 200; }), b([](int) { return 200; });
  // Written flat, the shape before options = {...}: it works, with a warning naming the new one.
  const std::string rest = "\"\ninterval = \"1s\"\nseries = [\"memory_available_bytes\"]\n";
  Agent agent("[[remote_write]]\nurl = \"" + a.url() + rest);
  INFO(agent.stderr_text());
  REQUIRE(eventually([&] { return a.requests().size() >= 3; }, 20s));
  // The [[remote_write]] header is line 10 of the file the harness writes.
  const std::string warning = "warn: " + agent.config_path().string() +
                              ":10:1: remote_write: options given flat in the table; put them in "
                              "options = { url = ... } (the flat shape still works)";
  CHECK_THAT(agent.stderr_text(), Catch::Contains(warning));
  // A bad option: the reload fails with the place, and the running output goes on.
  agent.write_config("[[remote_write]]\nurl = \"" + b.url() + rest + "compression = \"zstd\"\n");
  const std::string failed = agent.reload();
  CHECK(failed.find("remote_write.compression: unknown option") != std::string::npos);
  CHECK(failed.find("kiwi.toml:") != std::string::npos);
  // The same output in the new shape: it goes on from the cursor.
  agent.write_config(
      "[[remote_write]]\ninterval = \"1s\"\nseries = [\"memory_available_bytes\"]\n"
      "options = { url = \"" +
      b.url() + "\" }\n");
  const std::string verdict = agent.reload();
  CHECK(verdict.find("info: reloaded") != std::string::npos);
  REQUIRE(eventually([&] { return b.requests().size() >= 3; }, 20s));
  const std::size_t to_a = a.requests().size();
  std::vector<std::int64_t> ts;
  for (auto* rx : {&a, &b})
    for (auto& r : rx->requests())
      for (auto& s : r.series)
        for (auto& [t, v] : s.samples) ts.push_back(t);
  // One sequence across both receivers: every tick once, in order (each sample the agent holds in
  // that span).
  REQUIRE(!ts.empty());
  CHECK(ts == ticks_between(agent, ts.front(), ts.back()));
  // While the new output sends two more batches (two of its 1 s intervals), a runner left behind
  // for `a` would have sent too.
  const std::size_t to_b = b.requests().size();
  REQUIRE(eventually([&] { return b.requests().size() >= to_b + 2; }, 20s));
  CHECK(a.requests().size() == to_a);
}
