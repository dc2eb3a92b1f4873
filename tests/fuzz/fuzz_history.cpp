// /api/history's parameter parser and renderers: the input is a query string ("since=-300&
// limit=10", decoded as the server does), parsed against a fixed series list; a query that
// parses is rendered (JSON or CSV, with its band) on values that include the edge cases (1e308,
// NaN, -0, tiny fractions).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "history_render.hpp"
#include "http_request.hpp"

namespace {
const std::vector<std::string> kSeries = {"cpu_usage_ratio",
                                          "cpu_load1",
                                          "memory_used_bytes",
                                          "storage_used_ratio{mount=\"/\"}",
                                          "storage_used_ratio{mount=\"mnt-\xff\xfe-\\\"quote\"}",
                                          "thermal_max_celsius"};
const std::vector<std::string> kDefault = {"cpu_usage_ratio", "memory_*"};
constexpr double kNow = 1764475800;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kiwi_fuzz::FakeRequest fake;
  fake.set_query(kiwi_fuzz::text(data, size));
  const kiwi::Request req = fake.request();
  auto parsed = kiwi_history::parse_query(req, kNow, kSeries, kDefault);
  auto* pq = std::get_if<kiwi_history::ParsedQuery>(&parsed);
  if (!pq) {
    KIWI_FUZZ_CHECK(!std::get<kiwi_history::ParamError>(parsed).message.empty());  // a 400 says why
    return 0;
  }
  const kiwi::HistoryQuery& q = pq->query;
  KIWI_FUZZ_CHECK(q.limit >= 1 && q.limit <= kiwi_history::kMaxLimit);
  KIWI_FUZZ_CHECK(!q.since || std::isfinite(*q.since));
  KIWI_FUZZ_CHECK(!q.until || std::isfinite(*q.until));
  kiwi::HistoryResult result;
  const double values[] = {1e308, -1e308,      std::numeric_limits<double>::quiet_NaN(),
                           -0.0,  1e-300,      0.123456789,
                           9e15,  4.5e15 + 0.5};
  const std::size_t n = std::min<std::size_t>(q.limit, std::size(values));
  for (std::size_t i = 0; i < n; ++i) result.timestamps.push_back(q.since.value_or(kNow) + i);
  for (const char* unit : {"ratio", "bytes", "celsius", "seconds", ""}) {
    kiwi::HistorySeries s;
    s.name = std::string("m_") + unit;
    s.key = s.name + "{mount=\"mnt-\xff\xfe-\\\"quote\"}";
    s.labels = {{"mount", "mnt-\xff\xfe-\"quote"}};
    s.unit = unit;
    s.values.assign(values, values + n);
    if (q.band) s.min = s.max = s.values;
    result.series.push_back(std::move(s));
  }
  if (pq->format == kiwi_history::Format::csv) {
    const std::string csv = kiwi_history::render_csv(result, q);
    // A header and a line per timestamp, each ended by CRLF; no line break inside a field.
    std::size_t lines = 0;
    for (std::size_t at = 0; (at = csv.find("\r\n", at)) != std::string::npos; at += 2) ++lines;
    KIWI_FUZZ_CHECK(lines == result.timestamps.size() + 1);
    KIWI_FUZZ_CHECK(csv.size() >= 2 && csv.ends_with("\r\n"));
    return 0;
  }
  const std::string body = kiwi_history::render(result, q);
  KIWI_FUZZ_CHECK(!body.empty() && body.front() == '{' && body.back() == '}');
  KIWI_FUZZ_CHECK(body.find(":,") == std::string::npos && body.find(",,") == std::string::npos &&
                  body.find("[,") == std::string::npos);
  return 0;
}
