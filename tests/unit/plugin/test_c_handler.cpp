// Handlers across the C ABI, both sides in one process: the SDK's glue (kiwi/handler.hpp,
// kiwi::abi) makes the descriptor a plugin would export, and the host's CHandler and CData
// (c_handler.hpp) drive it through kiwi/plugin.h only.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <kiwi/handler.hpp>
#include <mutex>
#include <stdexcept>

#include "plugin/c_handler.hpp"

using namespace kiwi;
using namespace kiwi::agent;

namespace {

struct Lines final : Logger {
  void log(LogLevel, std::string_view m) override {
    std::lock_guard lock(mutex);
    lines.emplace_back(m);
  }
  std::mutex mutex;
  std::vector<std::string> lines;
};

// A DataSource with what the test sets.
class FakeData final : public DataSource {
 public:
  std::shared_ptr<const Snapshot> snapshot() const override {
    std::lock_guard lock(mutex);
    return snap;
  }
  HistoryResult history(const HistoryQuery& q) const override {
    last_query = q;
    if (store_error) throw StoreError("database disk image is malformed");
    return result;
  }
  AgentStats stats() const override { return agent_stats; }
  std::vector<std::string> series_names() const override { return names; }
  std::vector<Alert> alerts() const override { return alert_list; }

  void publish(std::shared_ptr<const Snapshot> s) {
    std::lock_guard lock(mutex);
    snap = std::move(s);
  }

  mutable std::mutex mutex;
  std::shared_ptr<const Snapshot> snap = std::make_shared<Snapshot>();
  HistoryResult result;
  bool store_error = false;
  mutable HistoryQuery last_query;
  AgentStats agent_stats;
  std::vector<std::string> names;
  std::vector<Alert> alert_list;
};

std::shared_ptr<const Snapshot> sample_snapshot(std::uint64_t sequence) {
  auto s = std::make_shared<Snapshot>();
  s->sequence = sequence;
  s->timestamp = 1700000000.0 + static_cast<double>(sequence);
  s->interval_seconds = 1;
  s->stale_after_seconds = 3;
  s->started_at = 1699999990.5;
  s->host = "board";
  s->agent_version = "0.2.0";
  SensorReport cpu;
  cpu.name = "cpu";
  cpu.plugin = "cpu";
  cpu.timestamp = s->timestamp;
  cpu.duration_seconds = 0.0002;
  cpu.metrics.push_back({"cpu_usage_ratio", {}, 0.25, "ratio", MetricKind::gauge});
  cpu.metrics.push_back({"cpu_core_usage_ratio", {{"core", "0"}}, 0.5, "ratio", MetricKind::gauge});
  cpu.metrics.push_back(
      {"net_rx_bytes", {{"iface", "eth0"}, {"dir", "rx"}}, 1e9, "bytes", MetricKind::counter});
  SensorReport thermal;
  thermal.name = "thermal";
  thermal.plugin = "thermal";
  thermal.state = SensorState::error;
  thermal.message = "no zones";
  thermal.errors_total = 3;
  thermal.invalid_metrics_total = 2;
  s->sensors = {cpu, thermal};
  return s;
}

// Answers with what it saw, as text; `?fail=1` throws, `?store=1` throws StoreError.
class EchoHandler final : public Handler {
 public:
  explicit EchoHandler(const HandlerContext& ctx)
      : route_(ctx.route_path),
        greeting_(ctx.options.get_string("greeting")),
        version_(ctx.agent_version),
        body_(std::make_shared<const std::string>("the same bytes for everyone")) {
    if (greeting_ == "refuse") throw std::invalid_argument("greeting must not be \"refuse\"");
    ctx.log.info("created for " + route_);
  }
  Response handle(const Request& r) override {
    if (r.param("fail")) throw std::runtime_error("it broke");
    if (r.param("store")) throw StoreError("disk I/O error");
    Response res;
    if (r.param("shared")) {
      res.body = body_;
      return res;
    }
    std::string text = greeting_ + " " + std::string(r.method) + " " + std::string(r.path) +
                       " raw=" + std::string(r.raw_query) +
                       " x=" + std::string(r.param("x").value_or("-")) +
                       " n=" + std::to_string(r.count("x")) +
                       " h=" + std::string(r.header("x-test").value_or("-")) + " from " +
                       std::string(r.remote_address) + " to " + std::string(r.local_address) + ":" +
                       std::to_string(r.local_port) + " " + std::string(r.protocol) +
                       " body=" + std::string(r.body) + " route=" + route_ + " v=" + version_;
    res.status = 201;
    res.content_type = "text/plain";
    res.headers = {{"X-Echo", "yes"}, {"Cache-Control", "no-store"}};
    res.body = std::make_shared<const std::string>(std::move(text));
    return res;
  }
  std::string_view methods() const override { return "GET, HEAD, POST"; }

  std::string route_, greeting_, version_;
  Body body_;
};

constexpr OptionSpec kEchoOptions[] = {
    {"greeting", OptionType::string, "\"hello\"", "what the answer starts with"}};

const kiwi_plugin& echo_plugin() {
  return *abi::handler_descriptor<EchoHandler>("echo", "echoes the request", kEchoOptions);
}

Options greeting(std::string g) {
  OptionValue v;
  v.key = "greeting";
  v.type = OptionType::string;
  v.string = std::move(g);
  return Options({v});
}

// One boolean option nobody reads, for test handlers that take no options of their own.
constexpr OptionSpec kUnusedOption[] = {{"unused", OptionType::boolean, "false", "-"}};

Options unused_option() {
  OptionValue unused;
  unused.key = "unused";
  unused.type = OptionType::boolean;
  return Options({unused});
}

// Reads the agent's data through the C ABI, as a plugin does.
class DataReader final : public Handler {
 public:
  explicit DataReader(const HandlerContext& ctx) : data(ctx.data) { self = this; }
  Response handle(const Request&) override { return {}; }
  const DataSource& data;
  static inline DataReader* self = nullptr;
};

struct Fixture {
  Lines log;
  FakeData data;
  std::shared_ptr<int> code = std::make_shared<int>(0);
  std::unique_ptr<CHandler> make(const Options& options) {
    return std::make_unique<CHandler>(echo_plugin(), code, "/echo/*", options, log, data, "0.2.0");
  }
};

}  // namespace

TEST_CASE("C ABI handler: request in, status, headers and body out") {
  Fixture f;
  const Options options = greeting("hi");
  auto h = f.make(options);
  CHECK(h->methods() == "GET, HEAD, POST");
  REQUIRE(f.log.lines == std::vector<std::string>{"created for /echo/*"});

  const Param query[] = {{"x", "1 2"}, {"x", "3"}, {"flag", ""}};
  const Param headers[] = {{"Host", "localhost"}, {"X-Test", "yes"}};
  Request r;
  r.method = "POST";
  r.path = "/echo/a b";
  r.query = query;
  r.headers = headers;
  r.raw_query = "x=1%202&x=3&flag";
  r.remote_address = "127.0.0.1";
  r.local_address = "127.0.0.2";
  r.local_port = 8080;
  r.protocol = "HTTP/1.1";
  r.body = "payload";
  const Response res = h->handle(r);
  CHECK(res.status == 201);
  CHECK(res.content_type == "text/plain");
  REQUIRE(res.headers.size() == 2);
  CHECK(res.headers[0].name == "X-Echo");
  CHECK(res.headers[0].value == "yes");
  CHECK(res.headers[1].name == "Cache-Control");
  REQUIRE(res.body);
  CHECK(*res.body ==
        "hi POST /echo/a b raw=x=1%202&x=3&flag x=1 2 n=2 h=yes from 127.0.0.1 to 127.0.0.2:8080 "
        "HTTP/1.1 body=payload route=/echo/* v=0.2.0");
}

TEST_CASE(
    "c abi handler: a body crosses without a copy and keeps the plugin's code until it goes") {
  Fixture f;
  const Options options = greeting("hello");
  auto h = f.make(options);
  const Param shared[] = {{"shared", ""}};
  Request r;
  r.method = "GET";
  r.path = "/echo/x";
  r.query = shared;
  Response a = h->handle(r);
  Response b = h->handle(r);
  REQUIRE(a.body);
  CHECK(*a.body == "the same bytes for everyone");
  CHECK(a.content_type == "application/json");  // the SDK's default, sent as it is
  // One Body in the plugin: the same bytes in place, so the server's compression cache hits.
  CHECK(a.body.identity() == b.body.identity());

  std::weak_ptr<int> code = f.code;
  f.code.reset();
  h.reset();  // the instance goes (destroy()); its bodies stay valid
  CHECK(*a.body == "the same bytes for everyone");
  CHECK_FALSE(code.expired());  // the bodies hold the code
  a = Response();
  CHECK_FALSE(code.expired());
  b = Response();
  CHECK(code.expired());  // released through the plugin, then the code let go
}

namespace {

// Answers in place (kiwi::InPlaceHandler): ?mode=a a full answer with its shared body, ?mode=b
// the defaults with one header and no body, ?mode=static bytes of static storage.
class InPlaceEcho final : public InPlaceHandler {
 public:
  explicit InPlaceEcho(const HandlerContext&) { self = this; }
  void handle_into(const Request& r, Response& out) override {
    const auto mode = r.param("mode").value_or("");
    if (mode == "a")
      out.set(201, "text/plain",
              {{"ETag", "W/\"a long enough tag\""}, {"X-One", "1"}, {"X-Two", "2"}}, body);
    else if (mode == "b")
      out.set(200, "application/json", {{"X-Only", "b"}}, nullptr);
    else
      out.set(200, "text/plain", {}, Body(nullptr, "static bytes"));
  }
  Body body = std::make_shared<const std::string>("shared bytes");
  static inline InPlaceEcho* self = nullptr;
};

}  // namespace

TEST_CASE(
    "C ABI handler: a reused Response is filled whole, and a repeated body is the same Body") {
  Fixture f;
  const kiwi_plugin& plugin =
      *abi::handler_descriptor<InPlaceEcho>("inplace", "answers", kUnusedOption);
  const Options options = unused_option();
  auto h = std::make_unique<CHandler>(plugin, f.code, "/r", options, f.log, f.data, "0.2.0");
  REQUIRE(InPlaceEcho::self);
  const Param a[] = {{"mode", "a"}}, b[] = {{"mode", "b"}}, st[] = {{"mode", "static"}};
  Request r;
  r.method = "GET";
  r.path = "/r";

  Response out;  // reused from request to request, as the server's worker does
  r.query = a;
  h->handle_into(r, out);
  CHECK(out.status == 201);
  CHECK(out.content_type == "text/plain");
  REQUIRE(out.headers.size() == 3);
  CHECK(out.headers[0].value == "W/\"a long enough tag\"");
  CHECK(out.headers[2].name == "X-Two");
  REQUIRE(out.body);
  CHECK(*out.body == "shared bytes");
  const void* identity = out.body.identity();
  const long holders = InPlaceEcho::self->body.keep().use_count();
  for (int i = 0; i < 5; ++i) {
    h->handle_into(r, out);
    CHECK(out.body.identity() == identity);
    CHECK(*out.body == "shared bytes");
  }
  // Each request's owner went back to the plugin: the holders are as many as after the first.
  CHECK(InPlaceEcho::self->body.keep().use_count() == holders);

  // Nothing of the earlier answer is left: status, type, header rows and body are the new ones.
  r.query = b;
  h->handle_into(r, out);
  CHECK(out.status == 200);
  CHECK(out.content_type == "application/json");
  REQUIRE(out.headers.size() == 1);
  CHECK(out.headers[0].name == "X-Only");
  CHECK(out.headers[0].value == "b");
  CHECK_FALSE(out.body);
  CHECK(InPlaceEcho::self->body.keep().use_count() == 1);  // the handler's own only

  r.query = a;
  h->handle_into(r, out);
  CHECK(out.headers.size() == 3);
  CHECK(out.headers[1].name == "X-One");

  // Static bytes cross without an owner: the plugin's code keeps them.
  r.query = st;
  h->handle_into(r, out);
  CHECK(out.headers.empty());
  REQUIRE(out.body);
  CHECK(*out.body == "static bytes");
  std::weak_ptr<int> code = f.code;
  f.code.reset();
  h.reset();
  CHECK(*out.body == "static bytes");
  CHECK_FALSE(code.expired());
  out = Response();
  CHECK(code.expired());
}

TEST_CASE("C ABI handler: failures are a 500 naming the reason, a store error a 503, a refusal") {
  Fixture f;
  const Options options = greeting("hello");
  auto h = f.make(options);
  const Param fail[] = {{"fail", "1"}};
  const Param store[] = {{"store", "1"}};
  Request r;
  r.method = "GET";
  r.path = "/echo/x";
  r.query = fail;
  Response res = h->handle(r);
  CHECK(res.status == 500);
  CHECK(*res.body == R"({"error":{"status":500,"message":"handler failed: it broke"}})");
  r.query = store;
  res = h->handle(r);
  CHECK(res.status == 503);
  CHECK(*res.body ==
        R"({"error":{"status":503,"message":"history store unavailable: disk I/O error"}})");

  const Options refuse = greeting("refuse");
  CHECK_THROWS_WITH(f.make(refuse), "greeting must not be \"refuse\"");
}

TEST_CASE("C ABI data: snapshot, stats, history and series names cross the C ABI whole") {
  Lines log;
  FakeData fake;
  fake.publish(sample_snapshot(7));
  static constexpr MetricSpec kCpu[] = {
      {"cpu_usage_ratio", Unit::ratio, MetricKind::gauge, "", "share of time busy"},
      {"cpu_context_switches", Unit::count, MetricKind::counter, "core",
       "switches from /proc/stat"}};
  PluginStatus cpu{"cpu", PluginKind::sensor, "cpu", "/lib/kiwi-sensor-cpu.so", 1, 0, kCpu, {}};
  PluginStatus route{"/api/x", PluginKind::handler, "x", "/lib/kiwi-handler-x.so", 1, 2, {}, {}};
  fake.agent_stats.version = "0.2.0";
  fake.agent_stats.started_at = 12.5;
  fake.agent_stats.ticks = 40;
  fake.agent_stats.missed_ticks = 1;
  fake.agent_stats.store_failing_writes = 2;
  fake.agent_stats.store_last_error = "disk full";
  fake.agent_stats.snapshot_file = "/run/kiwi.json";
  fake.agent_stats.plugins = {cpu, route};
  fake.agent_stats.http_requests = {{"/api/x", 200, 5}, {"unmatched", 404, 1}};
  fake.agent_stats.config.generation = 3;
  fake.agent_stats.config.source = "/etc/kiwi.toml";
  fake.agent_stats.config.reload_status = "failed";
  fake.agent_stats.config.reload_message = "bad key";
  fake.agent_stats.config.reloads_failed = 1;
  fake.result.timestamps = {1, 2, 3};
  fake.result.series = {{"temp{zone=\"a\"}",
                         "temp",
                         {{"zone", "a"}},
                         "celsius",
                         MetricKind::gauge,
                         {20, NAN, 21},
                         {19, NAN, 20.5},
                         {22, NAN, 21.5}},
                        {"rx_total", "rx_total", {}, "bytes", MetricKind::counter, {1, 2, 3}}};
  fake.names = {"temp{zone=\"a\"}", "rx_total"};

  const kiwi_plugin& plugin =
      *abi::handler_descriptor<DataReader>("reader", "reads", kUnusedOption);
  const Options options = unused_option();
  CHandler h(plugin, nullptr, "/r", options, log, fake, "0.2.0");
  REQUIRE(DataReader::self);
  const DataSource& data = DataReader::self->data;

  SECTION("the snapshot, converted once per published snapshot") {
    auto s = data.snapshot();
    CHECK(s->sequence == 7);
    CHECK(s->timestamp == 1700000007.0);
    CHECK(s->stale_after_seconds == 3);
    CHECK(s->started_at == 1699999990.5);
    CHECK(s->host == "board");
    CHECK(s->agent_version == "0.2.0");
    REQUIRE(s->sensors.size() == 2);
    const SensorReport& c = s->sensors[0];
    CHECK(c.name == "cpu");
    CHECK(c.duration_seconds == 0.0002);
    REQUIRE(c.metrics.size() == 3);
    CHECK(c.metrics[1].name == "cpu_core_usage_ratio");
    CHECK(c.metrics[1].labels == std::vector<std::pair<std::string, std::string>>{{"core", "0"}});
    CHECK(c.metrics[2].labels.size() == 2);
    CHECK(c.metrics[2].labels[1].second == "rx");
    CHECK(c.metrics[2].unit == "bytes");
    CHECK(c.metrics[2].kind == MetricKind::counter);
    CHECK(c.metrics[2].value == 1e9);
    const SensorReport& t = s->sensors[1];
    CHECK(t.state == SensorState::error);
    CHECK(t.message == "no zones");
    CHECK(t.errors_total == 3);
    CHECK(t.invalid_metrics_total == 2);
    CHECK(t.metrics.empty());

    CHECK(data.snapshot() == s);  // the same tick: the same copy
    fake.publish(sample_snapshot(8));
    auto next = data.snapshot();
    CHECK(next != s);
    CHECK(next->sequence == 8);
    CHECK(s->sequence == 7);  // a copy a request holds is never touched
    CHECK(s->sensors[0].metrics[2].value == 1e9);

    // A copy nobody holds any more is where a later sample is copied to: filled whole.
    const Snapshot* old = s.get();
    s.reset();
    fake.publish(sample_snapshot(9));
    auto third = data.snapshot();
    CHECK(third.get() == old);
    CHECK(third->sequence == 9);
    CHECK(third->timestamp == 1700000009.0);
    REQUIRE(third->sensors.size() == 2);
    CHECK(third->sensors[0].metrics[1].labels ==
          std::vector<std::pair<std::string, std::string>>{{"core", "0"}});
    CHECK(third->sensors[1].message == "no zones");
    CHECK(next->sequence == 8);
    // Of other sensors and series (a reload), nothing is left over from the one before.
    auto other = std::make_shared<Snapshot>();
    other->sequence = 10;
    other->timestamp = 1700000010.0;
    SensorReport mem;
    mem.name = mem.plugin = "memory";
    mem.metrics.push_back({"memory_used_bytes", {}, 5, "bytes", MetricKind::gauge});
    other->sensors.push_back(mem);
    fake.publish(other);
    next.reset();
    third.reset();
    auto fourth = data.snapshot();
    REQUIRE(fourth->sensors.size() == 1);
    CHECK(fourth->sensors[0].name == "memory");
    CHECK(fourth->sensors[0].message.empty());
    REQUIRE(fourth->sensors[0].metrics.size() == 1);
    CHECK(fourth->sensors[0].metrics[0].labels.empty());
    CHECK(fourth->sensors[0].metrics[0].value == 5);
    CHECK(fourth->host.empty());
  }

  SECTION("the host builds one C view per published snapshot, shared by every handler") {
    auto shared = CData::of(fake);
    const kiwi_data* c = shared->c();
    void* t1 = nullptr;
    void* t2 = nullptr;
    const kiwi_snapshot* a = c->snapshot(c->ctx, &t1);
    const kiwi_snapshot* b = c->snapshot(c->ctx, &t2);
    CHECK(a == b);
    CHECK(a->sensor_report_size == sizeof(kiwi_sensor_report));
    fake.publish(sample_snapshot(9));
    void* t3 = nullptr;
    const kiwi_snapshot* d = c->snapshot(c->ctx, &t3);
    CHECK(d->sequence == 9);
    CHECK(a->sequence == 7);  // still valid: its ticket holds it
    c->release(c->ctx, t1);
    c->release(c->ctx, t2);
    c->release(c->ctx, t3);
  }

  SECTION("stats, with each plugin's metric table kept by the copy") {
    AgentStats s = data.stats();
    CHECK(s.version == "0.2.0");
    CHECK(s.started_at == 12.5);
    CHECK(s.ticks == 40);
    CHECK(s.missed_ticks == 1);
    CHECK(s.store_failing_writes == 2);
    CHECK(s.store_last_error == "disk full");
    CHECK(s.snapshot_file == "/run/kiwi.json");
    REQUIRE(s.plugins.size() == 2);
    CHECK(s.plugins[0].kind == PluginKind::sensor);
    CHECK(s.plugins[0].file == "/lib/kiwi-sensor-cpu.so");
    CHECK(s.plugins[1].kind == PluginKind::handler);
    CHECK(s.plugins[1].name == "/api/x");
    CHECK(s.plugins[1].abi_major == 1);
    CHECK(s.plugins[1].abi_minor == 2);
    CHECK(s.plugins[1].metrics.empty());
    fake.agent_stats = {};  // nothing of the agent's is left to point into
    AgentStats copy = s;
    s = {};
    REQUIRE(copy.plugins[0].metrics.size() == 2);
    CHECK(copy.plugins[0].metrics[1].name == "cpu_context_switches");
    CHECK(copy.plugins[0].metrics[1].unit == Unit::count);
    CHECK(copy.plugins[0].metrics[1].kind == MetricKind::counter);
    CHECK(copy.plugins[0].metrics[1].labels == "core");
    CHECK(copy.plugins[0].metrics[1].help == "switches from /proc/stat");
    REQUIRE(copy.http_requests.size() == 2);
    CHECK(copy.http_requests[1].route == "unmatched");
    CHECK(copy.http_requests[1].status == 404);
    CHECK(copy.config.generation == 3);
    CHECK(copy.config.source == "/etc/kiwi.toml");
    CHECK(copy.config.reload_status == "failed");
    CHECK(copy.config.reload_message == "bad key");
    CHECK(copy.config.reloads_failed == 1);
  }

  SECTION("history: the query goes in whole, the result comes back whole") {
    HistoryQuery q;
    q.limit = 60;
    q.since = 100.5;
    q.patterns = {"temp*", "rx_total"};
    q.step = 10;
    q.aggregate = Aggregate::max;
    q.band = true;
    HistoryResult r = data.history(q);
    CHECK(fake.last_query.band);
    CHECK(fake.last_query.limit == 60);
    CHECK(fake.last_query.since == 100.5);
    CHECK_FALSE(fake.last_query.until);
    CHECK(fake.last_query.patterns == std::vector<std::string>{"temp*", "rx_total"});
    CHECK(fake.last_query.step == 10);
    CHECK(fake.last_query.aggregate == Aggregate::max);
    CHECK(r.timestamps == std::vector<double>{1, 2, 3});
    REQUIRE(r.series.size() == 2);
    CHECK(r.series[0].key == "temp{zone=\"a\"}");
    CHECK(r.series[0].labels[0].second == "a");
    CHECK(r.series[0].unit == "celsius");
    CHECK(std::isnan(r.series[0].values[1]));
    CHECK(r.series[0].min.at(2) == 20.5);  // ABI 1.7's band
    CHECK(r.series[0].max.at(0) == 22);
    CHECK(r.series[1].min.empty());  // NULL: none
    CHECK(r.series[1].kind == MetricKind::counter);
    CHECK(r.series[1].values == std::vector<double>{1, 2, 3});

    fake.store_error = true;
    CHECK_THROWS_MATCHES(data.history(q), StoreError,
                         Catch::Matchers::Message("database disk image is malformed"));
  }

  SECTION("series names") {
    CHECK(data.series_names() == fake.names);
  }

  SECTION("alert instances and the notifiers (ABI 1.6)") {
    CHECK(data.alerts().empty());
    Alert hot;
    hot.name = "soc_hot";
    hot.labels = {{"sensor", "soc"}};
    hot.sensor = "thermal";
    hot.series = "thermal_celsius{sensor=\"soc\"}";
    hot.state = AlertState::firing;
    hot.severity = Severity::critical;
    hot.summary = "soc at 85 °C";
    hot.value = 85;
    hot.threshold = NAN;
    hot.since = 1700000010;
    hot.active_at = 1700000000;
    Alert low = hot;
    low.name = "memory_low";
    low.labels.clear();
    low.sensor = "memory";
    low.state = AlertState::pending;
    fake.alert_list = {hot, low};
    fake.agent_stats.alerts_firing = 1;
    fake.agent_stats.alerts_pending = 1;
    fake.agent_stats.notifiers = {
        {"am", "alertmanager", "retrying", 3, 4, 5, 6, 7.5, "HTTP 503", 8}};
    const std::vector<Alert> back = data.alerts();
    REQUIRE(back.size() == 2);
    CHECK(back[0].name == "soc_hot");
    CHECK(back[0].labels == hot.labels);
    CHECK(back[0].sensor == "thermal");
    CHECK(back[0].series == hot.series);
    CHECK(back[0].state == AlertState::firing);
    CHECK(back[0].severity == Severity::critical);
    CHECK(back[0].summary == "soc at 85 °C");
    CHECK(back[0].value == 85);
    CHECK(std::isnan(back[0].threshold));
    CHECK(back[0].since == 1700000010);
    CHECK(back[0].active_at == 1700000000);
    CHECK(back[1].name == "memory_low");
    CHECK(back[1].labels.empty());
    CHECK(back[1].state == AlertState::pending);
    const AgentStats s = data.stats();
    CHECK(s.alerts_firing == 1);
    CHECK(s.alerts_pending == 1);
    REQUIRE(s.notifiers.size() == 1);
    CHECK(s.notifiers[0].name == "am");
    CHECK(s.notifiers[0].kind == "alertmanager");
    CHECK(s.notifiers[0].state == "retrying");
    CHECK(s.notifiers[0].queued == 3);
    CHECK(s.notifiers[0].dropped_total == 6);
    CHECK(s.notifiers[0].last_sent_at == 7.5);
    CHECK(s.notifiers[0].last_error == "HTTP 503");
    CHECK(s.notifiers[0].last_error_at == 8);
  }
}

TEST_CASE("C ABI data: a handler loaded by an agent before ABI 1.6 reads no alerts") {
  FakeData fake;
  Alert firing;
  firing.name = "soc_hot";
  firing.state = AlertState::firing;
  fake.alert_list = {firing};
  auto shared = CData::of(fake);
  CHECK(abi::HostData(shared->c()).alerts().size() == 1);  // this agent's kiwi_data: 1.6
  // The same agent's kiwi_data as one of ABI 1.5 states it: it ends before `alerts`.
  kiwi_data old = *shared->c();
  // Its `alerts` still works here: only the size keeps the SDK from calling it.
  old.size = offsetof(kiwi_data, alerts);
  CHECK(abi::HostData(&old).alerts().empty());
}

TEST_CASE("C ABI data: a handler built before ABI 1.7 gets rows of its size and asks no band") {
  FakeData fake;
  fake.result.timestamps = {1, 2};
  fake.result.series = {{"a", "a", {}, "", MetricKind::gauge, {1, 2}, {0, 1}, {2, 3}},
                        {"b", "b", {}, "bytes", MetricKind::gauge, {5, 6}, {4, 5}, {6, 7}}};
  auto shared = CData::of(fake);
  const kiwi_data* old = shared->c(6);
  CHECK(old != shared->c());
  // A 1.6 query: its size covers the tail padding where `band` now is, which holds garbage.
  HistoryQuery q;
  q.step = 60;
  const abi::HistoryQueryView query(q);
  kiwi_history_query c = query.c;
  std::memset(reinterpret_cast<unsigned char*>(&c) + KIWI_HISTORY_QUERY_SIZE_1_0, 0xee,
              sizeof c - KIWI_HISTORY_QUERY_SIZE_1_0);
  void* ticket = nullptr;
  const kiwi_history_result* r = old->history(old->ctx, &c, &ticket, nullptr);
  REQUIRE(r);
  CHECK(fake.last_query.step == 60);
  CHECK_FALSE(fake.last_query.band);
  // Rows of 1.6's size, as such a plugin steps through them (it knows no series_size).
  REQUIRE(r->series_count == 2);
  CHECK(r->series_size == KIWI_HISTORY_SERIES_SIZE_1_0);
  const auto& second = abi::row_at(r->series, KIWI_HISTORY_SERIES_SIZE_1_0, 1);
  CHECK(abi::view(second.key) == "b");
  CHECK(second.values[1] == 6);
  const HistoryResult back = abi::history_from(*r);  // what the C++ SDK of 1.7 makes of it
  REQUIRE(back.series.size() == 2);
  CHECK(back.series[1].values == std::vector<double>{5, 6});
  CHECK(back.series[1].min.empty());
  old->release(old->ctx, ticket);
  // The same query from a plugin of 1.7, whose band is 0: no band asked, whole rows.
  const kiwi_data* now = shared->c(KIWI_ABI_MINOR);
  r = now->history(now->ctx, &query.c, &ticket, nullptr);
  REQUIRE(r);
  CHECK_FALSE(fake.last_query.band);
  CHECK(r->series_size == sizeof(kiwi_history_series));
  CHECK(abi::view(r->series[1].key) == "b");
  CHECK(r->series[1].min[0] == 4);
  now->release(now->ctx, ticket);
}
