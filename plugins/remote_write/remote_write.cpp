#include "remote_write.hpp"

#include <snappy-c.h>

#include <algorithm>
#include <cstring>
#include <kiwi/prometheus.hpp>
#include <stdexcept>

namespace kiwi_remote_write {

namespace {

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// A length-delimited field (wire type 2).
void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_varint(out, (field << 3) | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_label(std::string& out, std::string& buf, const std::string& name,
               const std::string& value) {
  buf.clear();
  put_bytes(buf, 1, name);
  put_bytes(buf, 2, value);
  put_bytes(out, 1, buf);  // TimeSeries.labels = 1
}

void put_sample(std::string& out, std::string& buf, const kiwi::OutputPoint& p) {
  buf.clear();
  buf.push_back(static_cast<char>((1 << 3) | 1));  // Sample.value = 1, fixed64 (double)
  char bits[8];
  std::memcpy(bits, &p.value, 8);  // little-endian hosts only (amd64, arm64)
  buf.append(bits, 8);
  put_varint(buf, 2 << 3);  // Sample.timestamp = 2, varint (int64 in two's complement)
  put_varint(buf, static_cast<std::uint64_t>(p.timestamp_ms));
  put_bytes(out, 2, buf);  // TimeSeries.samples = 2
}

}  // namespace

std::string metric_name(std::string_view name, kiwi::MetricKind kind) {
  std::string out;
  kiwi::prometheus::append_exposed_name(out, name, kind == kiwi::MetricKind::counter);
  return out;
}

std::vector<TimeSeries> to_time_series(const kiwi::OutputBatch& batch, const Labels& external) {
  std::vector<TimeSeries> out;
  out.reserve(batch.series.size());
  for (const auto& s : batch.series) {
    TimeSeries& ts = out.emplace_back();
    ts.labels.reserve(s.labels.size() + external.size() + 1);
    ts.labels.emplace_back("__name__", metric_name(s.name, s.kind));
    for (const auto& l : s.labels) ts.labels.push_back(l);
    for (const auto& e : external) {
      if (e.second.empty()) continue;
      bool own = false;
      for (const auto& l : s.labels) own |= l.first == e.first;
      if (!own) ts.labels.push_back(e);
    }
    std::sort(ts.labels.begin(), ts.labels.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    ts.samples = s.points;
  }
  return out;
}

std::string encode_write_request(const std::vector<TimeSeries>& series) {
  std::string out, one, buf;
  for (const auto& s : series) {
    one.clear();
    for (const auto& [k, v] : s.labels) put_label(one, buf, k, v);
    for (const auto& p : s.samples) put_sample(one, buf, p);
    put_bytes(out, 1, one);  // WriteRequest.timeseries = 1
  }
  return out;
}

std::string compress_snappy(std::string_view raw) {
  std::string out(snappy_max_compressed_length(raw.size()), '\0');
  size_t n = out.size();
  if (::snappy_compress(raw.data(), raw.size(), out.data(), &n) != SNAPPY_OK)
    throw std::runtime_error("snappy: cannot compress");
  out.resize(n);
  return out;
}

std::string uncompress_snappy(std::string_view compressed) {
  size_t n = 0;
  if (snappy_uncompressed_length(compressed.data(), compressed.size(), &n) != SNAPPY_OK)
    throw std::runtime_error("snappy: not a snappy block");
  std::string out(n, '\0');
  if (::snappy_uncompress(compressed.data(), compressed.size(), out.data(), &n) != SNAPPY_OK)
    throw std::runtime_error("snappy: corrupt block");
  out.resize(n);
  return out;
}

}  // namespace kiwi_remote_write
