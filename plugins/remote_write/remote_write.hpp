// Prometheus remote write 1.0, the pure parts: the protobuf WriteRequest (hand-encoded: four
// small messages, no generated code), snappy block compression and the series' labels. The HTTP
// call is in plugin.cpp, and how an answer becomes ok / retry / drop in plugins/common.
#pragma once

#include <kiwi/output.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiwi_remote_write {

using Labels = std::vector<std::pair<std::string, std::string>>;

// One prometheus.TimeSeries: labels (with __name__) sorted by name, samples oldest first.
struct TimeSeries {
  Labels labels;
  std::vector<kiwi::OutputPoint> samples;
};

// "kiwi_" + name, and "_total" after a counter's name that lacks it: the names /metrics uses.
std::string metric_name(std::string_view name, kiwi::MetricKind kind);

// The batch as time series: __name__, the series' labels, then each external label the series
// does not have itself (as Prometheus' external_labels), sorted by name as the spec requires
// (so __name__ comes first among lowercase names). An external label with an empty value is
// left out.
std::vector<TimeSeries> to_time_series(const kiwi::OutputBatch& batch, const Labels& external);

// prometheus.WriteRequest { repeated TimeSeries timeseries = 1; } in protobuf wire format.
std::string encode_write_request(const std::vector<TimeSeries>& series);

// Snappy block format (not the framed one), as remote write requires.
std::string compress_snappy(std::string_view raw);
std::string uncompress_snappy(std::string_view compressed);  // for tests; throws on bad input

}  // namespace kiwi_remote_write
