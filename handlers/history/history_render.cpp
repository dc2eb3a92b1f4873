#include "history_render.hpp"

#include <charconv>
#include <cmath>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace kiwi_history {

namespace {
constexpr std::string_view kAccepted[] = {"limit"};

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
void key(Writer& w, std::string_view k) { w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size())); }
void str(Writer& w, std::string_view s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }
void number(Writer& w, double v) {
  if (std::isnan(v))
    w.Null();
  else if (std::nearbyint(v) == v && std::fabs(v) < 9e15)
    w.Int64(static_cast<std::int64_t>(v));
  else
    w.Double(v);
}
}  // namespace

std::variant<kiwi::HistoryQuery, ParamError> parse_query(const kiwi::Request& req) {
  for (auto& p : req.query) {
    bool known = false;
    for (auto k : kAccepted) known |= p.name == k;
    if (!known) return ParamError{std::string(p.name), "unknown parameter; accepted: limit"};
  }
  kiwi::HistoryQuery q;
  q.limit = kDefaultLimit;
  if (req.count("limit") > 1) return ParamError{"limit", "given more than once"};
  if (auto v = req.param("limit")) {
    const std::string range = "an integer from 1 to " + std::to_string(kMaxLimit);
    if (v->empty()) return ParamError{"limit", "empty; expected " + range};
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec == std::errc::result_out_of_range)
      return ParamError{"limit", "'" + std::string(*v) + "' is out of range; expected " + range};
    if (ec != std::errc() || end != v->data() + v->size())
      return ParamError{"limit", "'" + std::string(*v) + "' is not an integer; expected " + range};
    if (n < 1 || n > kMaxLimit)
      return ParamError{"limit", std::to_string(n) + " is out of range; expected " + range};
    q.limit = n;
  }
  return q;
}

std::string render(const kiwi::HistoryResult& r) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  key(w, "version"), w.Int(1);
  key(w, "count"), w.Uint64(r.timestamps.size());
  key(w, "timestamps");
  w.StartArray();
  for (double t : r.timestamps) number(w, t);
  w.EndArray();
  key(w, "series");
  w.StartObject();
  for (auto& s : r.series) {
    key(w, s.key);
    w.StartObject();
    key(w, "name"), str(w, s.name);
    if (!s.labels.empty()) {
      key(w, "labels");
      w.StartObject();
      for (auto& [k, v] : s.labels) key(w, k), str(w, v);
      w.EndObject();
    }
    key(w, "unit"), str(w, s.unit);
    key(w, "values");
    w.StartArray();
    for (double v : s.values) number(w, v);
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace kiwi_history
