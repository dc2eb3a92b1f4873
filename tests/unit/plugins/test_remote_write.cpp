// The remote_write plugin's encoding: what goes on the wire, decoded back with snappy's own
// decompressor and a protobuf reader written here from the wire-format spec.
#include <catch2/catch.hpp>
#include <cstring>

#include "remote_write.hpp"

using namespace kiwi_remote_write;

namespace {

// A protobuf message as (field, wire type, bytes or varint) items.
struct Field {
  std::uint32_t number;
  std::uint32_t wire;
  std::uint64_t varint = 0;
  std::string bytes;  // LEN and I64 payloads
};

std::uint64_t varint(std::string_view& s) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    REQUIRE(!s.empty());
    const auto b = static_cast<unsigned char>(s.front());
    s.remove_prefix(1);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  FAIL("varint too long");
  return 0;
}

std::vector<Field> parse(std::string_view s) {
  std::vector<Field> out;
  while (!s.empty()) {
    const auto key = varint(s);
    Field f{static_cast<std::uint32_t>(key >> 3), static_cast<std::uint32_t>(key & 7), 0, {}};
    if (f.wire == 0) {
      f.varint = varint(s);
    } else if (f.wire == 1) {
      REQUIRE(s.size() >= 8);
      f.bytes = std::string(s.substr(0, 8));
      s.remove_prefix(8);
    } else if (f.wire == 2) {
      const auto n = varint(s);
      REQUIRE(s.size() >= n);
      f.bytes = std::string(s.substr(0, n));
      s.remove_prefix(n);
    } else {
      FAIL("unexpected wire type " << f.wire);
    }
    out.push_back(std::move(f));
  }
  return out;
}

struct Decoded {
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<std::pair<std::int64_t, double>> samples;
};

std::vector<Decoded> decode_request(std::string_view raw) {
  std::vector<Decoded> out;
  for (auto& ts : parse(raw)) {
    REQUIRE(ts.number == 1);  // WriteRequest.timeseries
    REQUIRE(ts.wire == 2);
    Decoded d;
    for (auto& f : parse(ts.bytes)) {
      REQUIRE(f.wire == 2);
      auto inner = parse(f.bytes);
      if (f.number == 1) {  // Label
        REQUIRE(inner.size() == 2);
        CHECK(inner[0].number == 1);
        CHECK(inner[1].number == 2);
        d.labels.emplace_back(inner[0].bytes, inner[1].bytes);
      } else {
        REQUIRE(f.number == 2);  // Sample
        REQUIRE(inner.size() == 2);
        REQUIRE(inner[0].number == 1);
        REQUIRE(inner[0].wire == 1);
        REQUIRE(inner[1].number == 2);
        REQUIRE(inner[1].wire == 0);
        double v;
        std::memcpy(&v, inner[0].bytes.data(), 8);
        d.samples.emplace_back(static_cast<std::int64_t>(inner[1].varint), v);
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

kiwi::OutputBatch sample_batch() {
  kiwi::OutputBatch b;
  kiwi::OutputSeries cpu;
  cpu.name = "cpu_seconds";
  cpu.kind = kiwi::MetricKind::counter;
  cpu.unit = kiwi::Unit::seconds;
  cpu.labels = {{"core", "0"}, {"mode", "user"}};
  cpu.points = {{1'700'000'000'000, 12.5}, {1'700'000'001'000, 13.25}};
  kiwi::OutputSeries mem;
  mem.name = "memory_available_bytes";
  mem.labels = {};
  mem.points = {{1'700'000'000'000, 8.5e9}};
  b.series = {cpu, mem};
  b.sample_count = 3;
  return b;
}

}  // namespace

TEST_CASE("remote_write: names as /metrics writes them, counters ending in _total") {
  CHECK(metric_name("cpu_seconds", kiwi::MetricKind::counter) == "kiwi_cpu_seconds_total");
  CHECK(metric_name("network_receive_bytes_total", kiwi::MetricKind::counter) ==
        "kiwi_network_receive_bytes_total");
  CHECK(metric_name("memory_available_bytes", kiwi::MetricKind::gauge) ==
        "kiwi_memory_available_bytes");
}

TEST_CASE("remote_write: a WriteRequest decodes back to the batch: labels sorted, __name__ first") {
  const auto series = to_time_series(sample_batch(), {{"instance", "pi-1"}, {"mode", "ignored"}});
  const std::string wire = compress_snappy(encode_write_request(series));
  const auto decoded = decode_request(uncompress_snappy(wire));
  REQUIRE(decoded.size() == 2);
  // The series' own `mode` wins over the external one; `instance` is added.
  CHECK(decoded[0].labels ==
        std::vector<std::pair<std::string, std::string>>{{"__name__", "kiwi_cpu_seconds_total"},
                                                         {"core", "0"},
                                                         {"instance", "pi-1"},
                                                         {"mode", "user"}});
  CHECK(decoded[0].samples == std::vector<std::pair<std::int64_t, double>>{
                                  {1'700'000'000'000, 12.5}, {1'700'000'001'000, 13.25}});
  CHECK(decoded[1].labels == std::vector<std::pair<std::string, std::string>>{
                                 {"__name__", "kiwi_memory_available_bytes"},
                                 {"instance", "pi-1"},
                                 {"mode", "ignored"}});
  CHECK(decoded[1].samples ==
        std::vector<std::pair<std::int64_t, double>>{{1'700'000'000'000, 8.5e9}});
}

TEST_CASE("remote_write: the body is a snappy block, smaller than the protobuf it holds") {
  kiwi::OutputBatch b;
  for (int s = 0; s < 50; ++s) {
    kiwi::OutputSeries x;
    x.name = "network_receive_bytes_total";
    x.kind = kiwi::MetricKind::counter;
    x.labels = {{"interface", "eth" + std::to_string(s)}};
    for (int i = 0; i < 60; ++i) x.points.push_back({1'700'000'000'000 + i * 1000, 1e6 + i});
    b.series.push_back(x);
  }
  const std::string raw = encode_write_request(to_time_series(b, {}));
  const std::string body = compress_snappy(raw);
  CHECK(body.size() < raw.size() / 2);
  CHECK(uncompress_snappy(body) == raw);
  CHECK_THROWS(uncompress_snappy("not snappy at all"));
}

TEST_CASE("remote_write: an external label with an empty value is left out") {
  const auto series = to_time_series(sample_batch(), {{"instance", ""}});
  for (auto& s : series)
    for (auto& l : s.labels) CHECK(l.first != "instance");
}
