#include "plugin/c_handler.hpp"

#include <map>
#include <stdexcept>
#include <vector>

namespace kiwi::agent {

// The C view of one published snapshot: the rows point into `snap`, which it holds.
struct SnapshotView {
  explicit SnapshotView(std::shared_ptr<const Snapshot> s);
  std::shared_ptr<const Snapshot> snap;
  std::vector<kiwi_label> labels;
  std::vector<kiwi_metric_value> metrics;
  std::vector<kiwi_sensor_report> sensors;
  kiwi_snapshot c{};
};

namespace {

// What a ticket is: a reference to the view it was handed out with.
using Ticket = std::shared_ptr<const void>;

void* ticket_for(std::shared_ptr<const void> view) {
  return new Ticket(std::move(view));
}

// The C code of a unit the agent stored by name (a name it does not know cannot have been
// stored: the metric check refused it).
std::uint32_t unit_code(std::string_view unit) {
  return static_cast<std::uint32_t>(unit_from_string(unit).value_or(Unit::none));
}

CData& self(void* ctx) {
  return *static_cast<CData*>(ctx);
}

// Appends the C rows of `labels` to `out` (reserved: earlier rows stay where they are).
const kiwi_label* push_labels(std::vector<kiwi_label>& out,
                              const std::vector<std::pair<std::string, std::string>>& labels) {
  const std::size_t first = out.size();
  for (const auto& [name, value] : labels) out.push_back({to_c(name), to_c(value)});
  return out.data() + first;
}

struct StatsView {
  explicit StatsView(AgentStats s);
  AgentStats stats;
  std::vector<kiwi_metric_spec> specs;
  std::vector<kiwi_plugin_status> plugins;
  std::vector<kiwi_request_count> requests;
  std::vector<kiwi_output_status> outputs;
  kiwi_stats c{};
};

struct HistoryView {
  explicit HistoryView(HistoryResult r);
  HistoryResult result;
  std::vector<kiwi_label> labels;
  std::vector<kiwi_history_series> series;
  kiwi_history_result c{};
};

struct SeriesView {
  explicit SeriesView(std::vector<std::string> n);
  std::vector<std::string> names;
  std::vector<kiwi_str> items;
  kiwi_str_list c{};
};

StatsView::StatsView(AgentStats s) : stats(std::move(s)) {
  std::size_t n = 0;
  for (const auto& p : stats.plugins) n += p.metrics.size();
  specs.reserve(n);
  for (const auto& p : stats.plugins) {
    const std::size_t first = specs.size();
    // The table points into the plugin's descriptor, which `p.library` keeps loaded.
    for (const auto& m : p.metrics)
      specs.push_back({to_c(m.name), static_cast<std::uint32_t>(m.unit),
                       static_cast<std::uint32_t>(m.kind), to_c(m.labels), to_c(m.help),
                       to_c(m.rate)});
    kiwi_plugin_status& row = plugins.emplace_back();
    row.size = sizeof row;
    row.name = to_c(p.name);
    row.kind = static_cast<std::uint32_t>(p.kind);
    row.plugin = to_c(p.plugin);
    row.file = to_c(p.file);
    row.abi_major = p.abi_major;
    row.abi_minor = p.abi_minor;
    row.metrics = specs.data() + first;
    row.metric_count = p.metrics.size();
    row.metric_spec_size = sizeof(kiwi_metric_spec);
  }
  for (const auto& r : stats.http_requests) requests.push_back({to_c(r.route), r.status, r.count});
  c.size = sizeof c;
  c.version = to_c(stats.version);
  c.started_at = stats.started_at;
  c.ticks = stats.ticks;
  c.missed_ticks = stats.missed_ticks;
  c.store_write_errors = stats.store_write_errors;
  c.store_failing_writes = stats.store_failing_writes;
  c.store_last_error = to_c(stats.store_last_error);
  c.snapshot_file = to_c(stats.snapshot_file);
  c.snapshot_file_errors = stats.snapshot_file_errors;
  c.snapshot_file_failing = stats.snapshot_file_failing;
  c.snapshot_file_last_error = to_c(stats.snapshot_file_last_error);
  c.plugins = plugins.data();
  c.plugin_count = plugins.size();
  c.plugin_status_size = sizeof(kiwi_plugin_status);
  c.http_requests = requests.data();
  c.http_request_count = requests.size();
  c.config_generation = stats.config.generation;
  c.config_loaded_at = stats.config.loaded_at;
  c.config_source = to_c(stats.config.source);
  c.reload_status = to_c(stats.config.reload_status);
  c.reload_at = stats.config.reload_at;
  c.reload_message = to_c(stats.config.reload_message);
  c.reloads_ok = stats.config.reloads_ok;
  c.reloads_failed = stats.config.reloads_failed;
  c.store_recovered = to_c(stats.store_recovered);
  c.store_samples_pending = stats.store_samples_pending;
  for (const auto& o : stats.outputs) {
    kiwi_output_status& row = outputs.emplace_back();
    row.size = sizeof row;
    row.name = to_c(o.name);
    row.plugin = to_c(o.plugin);
    row.state = to_c(o.state);
    row.interval_seconds = o.interval_seconds;
    row.acked_at = o.acked_at;
    row.seconds_behind = o.seconds_behind;
    row.samples_pending = o.samples_pending;
    row.samples_sent_total = o.samples_sent_total;
    row.batches_sent_total = o.batches_sent_total;
    row.batches_dropped_total = o.batches_dropped_total;
    row.samples_dropped_total = o.samples_dropped_total;
    row.failures_total = o.failures_total;
    row.last_error = to_c(o.last_error);
    row.last_error_at = o.last_error_at;
  }
  c.outputs = outputs.data();
  c.output_count = outputs.size();
  c.output_status_size = sizeof(kiwi_output_status);
  c.http_auth_failures = stats.http_auth_failures;
  c.http_auth_rate_limited = stats.http_auth_rate_limited;
}

HistoryView::HistoryView(HistoryResult r) : result(std::move(r)) {
  std::size_t n = 0;
  for (const auto& s : result.series) n += s.labels.size();
  labels.reserve(n);
  series.reserve(result.series.size());
  for (const auto& s : result.series) {
    kiwi_history_series row{};
    row.key = to_c(s.key);
    row.name = to_c(s.name);
    row.labels = push_labels(labels, s.labels);
    row.label_count = s.labels.size();
    row.unit = unit_code(s.unit);
    row.kind = static_cast<std::uint32_t>(s.kind);
    // One value per timestamp, as the store promises; a short row would be read past its end.
    if (s.values.size() != result.timestamps.size())
      throw std::logic_error("history series " + s.key + " has " + std::to_string(s.values.size()) +
                             " values for " + std::to_string(result.timestamps.size()) +
                             " timestamps");
    row.values = s.values.data();
    series.push_back(row);
  }
  c.size = sizeof c;
  c.timestamps = result.timestamps.data();
  c.timestamp_count = result.timestamps.size();
  c.series = series.data();
  c.series_count = series.size();
}

SeriesView::SeriesView(std::vector<std::string> n) : names(std::move(n)) {
  items.reserve(names.size());
  for (const auto& s : names) items.push_back(to_c(s));
  c.items = items.data();
  c.count = items.size();
}

// The query as the store takes it; throws std::invalid_argument for one this agent cannot read.
HistoryQuery query_from(const kiwi_history_query* q) {
  if (!q || q->size < sizeof(kiwi_history_query))
    throw std::invalid_argument("history query of " + std::to_string(q ? q->size : 0) +
                                " bytes, ABI 1.0 has " +
                                std::to_string(sizeof(kiwi_history_query)));
  if (q->aggregate > KIWI_AGGREGATE_LAST)
    throw std::invalid_argument("history query with unknown aggregate " +
                                std::to_string(q->aggregate));
  HistoryQuery out;
  out.limit = q->limit;
  if (q->has_since) out.since = q->since;
  if (q->has_until) out.until = q->until;
  out.patterns.reserve(q->pattern_count);
  for (std::size_t i = 0; i < q->pattern_count; ++i)
    out.patterns.emplace_back(from_c(q->patterns[i]));
  out.step = q->step;
  out.aggregate = static_cast<Aggregate>(q->aggregate);
  return out;
}

}  // namespace

SnapshotView::SnapshotView(std::shared_ptr<const Snapshot> s) : snap(std::move(s)) {
  std::size_t n_metrics = 0, n_labels = 0;
  for (const auto& r : snap->sensors) {
    n_metrics += r.metrics.size();
    for (const auto& m : r.metrics) n_labels += m.labels.size();
  }
  labels.reserve(n_labels);
  metrics.reserve(n_metrics);
  sensors.reserve(snap->sensors.size());
  for (const auto& r : snap->sensors) {
    const std::size_t first = metrics.size();
    for (const auto& m : r.metrics)
      metrics.push_back({to_c(m.name), push_labels(labels, m.labels), m.labels.size(), m.value,
                         unit_code(m.unit), static_cast<std::uint32_t>(m.kind)});
    kiwi_sensor_report& row = sensors.emplace_back();
    row.size = sizeof row;
    row.name = to_c(r.name);
    row.plugin = to_c(r.plugin);
    row.state = static_cast<std::uint32_t>(r.state);  // ok, no_data, error: KIWI_SENSOR_*
    row.message = to_c(r.message);
    row.timestamp = r.timestamp;
    row.duration_seconds = r.duration_seconds;
    row.errors_total = r.errors_total;
    row.invalid_metrics_total = r.invalid_metrics_total;
    row.series_refused_total = r.series_refused_total;
    row.metrics = metrics.data() + first;
    row.metric_count = r.metrics.size();
  }
  c.size = sizeof c;
  c.sequence = snap->sequence;
  c.timestamp = snap->timestamp;
  c.interval_seconds = snap->interval_seconds;
  c.stale_after_seconds = snap->stale_after_seconds;
  c.started_at = snap->started_at;
  c.host = to_c(snap->host);
  c.agent_version = to_c(snap->agent_version);
  c.sensors = sensors.data();
  c.sensor_count = sensors.size();
  c.sensor_report_size = sizeof(kiwi_sensor_report);
}

CData::CData(const DataSource& data) : data_(data) {
  c_.size = sizeof c_;
  c_.ctx = this;
  c_.snapshot = [](void* ctx, void** ticket) -> const kiwi_snapshot* {
    auto view = self(ctx).snapshot_view();
    const kiwi_snapshot* out = &view->c;
    *ticket = ticket_for(std::move(view));
    return out;
  };
  c_.stats = [](void* ctx, void** ticket) -> const kiwi_stats* {
    auto view = std::make_shared<const StatsView>(self(ctx).data_.stats());
    const kiwi_stats* out = &view->c;
    *ticket = ticket_for(std::move(view));
    return out;
  };
  c_.history = [](void* ctx, const kiwi_history_query* query, void** ticket,
                  const kiwi_refusal* error) -> const kiwi_history_result* {
    *ticket = nullptr;  // release(NULL) does nothing
    try {
      auto view = std::make_shared<const HistoryView>(self(ctx).data_.history(query_from(query)));
      const kiwi_history_result* out = &view->c;
      *ticket = ticket_for(std::move(view));
      return out;
    } catch (const std::exception& e) {  // StoreError, a query we cannot read, out of memory
      if (error) error->refuse(error->ctx, to_c(e.what()));
    }
    return nullptr;
  };
  c_.series_names = [](void* ctx, void** ticket) -> const kiwi_str_list* {
    auto view = std::make_shared<const SeriesView>(self(ctx).data_.series_names());
    const kiwi_str_list* out = &view->c;
    *ticket = ticket_for(std::move(view));
    return out;
  };
  c_.release = [](void*, void* ticket) { delete static_cast<Ticket*>(ticket); };
}

std::shared_ptr<const SnapshotView> CData::snapshot_view() const {
  std::shared_ptr<const Snapshot> snap = data_.snapshot();
  {
    std::lock_guard lock(mutex_);
    // `last_` holds the snapshot it views, so its address cannot name another one meanwhile.
    if (last_ && last_->snap == snap) return last_;
  }
  // Built outside the lock: requests for the cached view are not held up by it. Two requests
  // that see a new snapshot at once may both build one; the later one is kept.
  auto view = std::make_shared<const SnapshotView>(std::move(snap));
  std::lock_guard lock(mutex_);
  last_ = view;
  return view;
}

std::shared_ptr<CData> CData::of(const DataSource& data) {
  // Weak: the CData goes with the last handler reading it. A DataSource outlives its handlers,
  // so an address in the map names the same one while its entry is alive.
  static std::mutex mutex;
  static auto& shared = *new std::map<const DataSource*, std::weak_ptr<CData>>;  // exit-safe
  std::lock_guard lock(mutex);
  std::erase_if(shared, [](const auto& e) { return e.second.expired(); });
  auto& weak = shared[&data];
  auto out = weak.lock();
  if (!out) weak = out = std::make_shared<CData>(data);
  return out;
}

Body body_from(const kiwi_body& body, const std::shared_ptr<const void>& code) {
  const std::string_view bytes =
      body.size ? std::string_view(body.data, body.size) : std::string_view();
  if (!body.release) return Body(code, bytes);  // in the plugin's image: the code keeps it
  // The deleter runs release() in the plugin, then goes with `code`: the library is unloaded (if
  // this was its last holder) only after release() returned. If the control block cannot be
  // allocated, shared_ptr calls the deleter at once: release() still runs exactly once.
  std::shared_ptr<const void> keep(body.owner, [release = body.release, code](const void* owner) {
    release(const_cast<void*>(owner));
  });
  return Body(std::move(keep), bytes);
}

CHandler::CHandler(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
                   std::string_view route_path, const Options& options, Logger& log,
                   const DataSource& data, std::string_view agent_version)
    : plugin_(plugin), host_(log, std::move(code)), options_(options), data_(CData::of(data)) {
  kiwi_handler_context ctx{};
  ctx.size = sizeof ctx;
  ctx.route_path = to_c(route_path);
  ctx.options = options_.values.data();
  ctx.option_count = options_.values.size();
  ctx.host = &host_.host;
  ctx.data = data_->c();
  ctx.agent_version = to_c(agent_version);
  CRefusal refusal;
  instance_ = plugin_.handler_create(&ctx, &refusal.c);
  if (!instance_)
    throw std::runtime_error(refusal.message.empty() ? "create failed without a reason"
                                                     : refusal.message);
  if (plugin_.handler_methods) {
    const std::string_view m = from_c(plugin_.handler_methods(instance_));
    if (!m.empty()) methods_ = std::string(m);
  }
}

CHandler::~CHandler() {
  if (instance_) plugin_.destroy(instance_);
}

namespace {

bool is_content_type(std::string_view name) {
  constexpr std::string_view want = "content-type";
  if (name.size() != want.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i)
    if ((name[i] | 0x20) != want[i]) return false;  // '-' | 0x20 is '-'
  return true;
}

// What handle_into() collects from the plugin's kiwi_response calls, into the caller's Response:
// its strings and header rows are reused, so a response shaped like the worker's last one costs
// no allocation. A body whose bytes are the ones `previous` (the last response's body) holds is
// that Body again: the plugin's owner is released at once, and no new control block is made.
struct Call {
  const std::shared_ptr<const void>& code;
  Response& res;
  Body previous;
  std::size_t headers = 0;  // rows of res.headers set by this call
  std::string error;
};
// The rows of `params` as kiwi_params, in a vector of the calling thread (no allocation once it
// has grown to a request's size).
const kiwi_param* c_params(std::vector<kiwi_param>& out, std::span<const Param> params) {
  out.clear();
  for (const auto& p : params) out.push_back({to_c(p.name), to_c(p.value)});
  return out.data();
}

}  // namespace

void CHandler::handle_into(const Request& r, Response& res) {
  thread_local std::vector<kiwi_param> query, headers;
  kiwi_request req{};
  req.size = sizeof req;
  req.method = to_c(r.method);
  req.path = to_c(r.path);
  req.raw_query = to_c(r.raw_query);
  req.query = c_params(query, r.query);
  req.query_count = r.query.size();
  req.headers = c_params(headers, r.headers);
  req.header_count = r.headers.size();
  req.body = to_c(r.body);
  req.protocol = to_c(r.protocol);
  req.remote_address = to_c(r.remote_address);
  req.local_address = to_c(r.local_address);
  req.local_port = r.local_port;

  // The C defaults (kiwi_response): 200, application/json, no headers, no body.
  res.status = 200;
  assign_text(res.content_type, "application/json");
  Call call{host_.code, res, std::move(res.body), 0, {}};
  res.body.reset();
  kiwi_response out{};
  out.size = sizeof out;
  out.ctx = &call;
  out.status = [](void* ctx, int status) { static_cast<Call*>(ctx)->res.status = status; };
  out.header = [](void* ctx, kiwi_str name, kiwi_str value) {
    auto& c = *static_cast<Call*>(ctx);
    if (is_content_type(from_c(name))) {
      assign_text(c.res.content_type, from_c(value));
    } else if (c.headers < c.res.headers.size()) {
      Header& h = c.res.headers[c.headers++];
      assign_text(h.name, from_c(name));
      assign_text(h.value, from_c(value));
    } else {
      c.res.headers.push_back({std::string(from_c(name)), std::string(from_c(value))});
      ++c.headers;
    }
  };
  out.body = [](void* ctx, kiwi_body body) {
    auto& c = *static_cast<Call*>(ctx);
    if (body.data && c.previous && c.previous.identity() == body.data &&
        c.previous->size() == body.size) {
      if (body.release) body.release(body.owner);  // `previous` keeps these very bytes
      c.res.body = std::move(c.previous);
      return;
    }
    c.res.body = body_from(body, c.code);  // a second body replaces (releases) the first
  };
  out.error = [](void* ctx, kiwi_str message) {
    static_cast<Call*>(ctx)->error = std::string(from_c(message));
  };
  const int failed = plugin_.handler_handle(instance_, &req, &out);
  res.headers.resize(call.headers);
  if (failed != 0)
    res = Response::error(
        500,
        "handler failed: " + (call.error.empty() ? std::string("no reason given") : call.error));
  else if (res.status < 100 || res.status > 599)
    res = Response::error(500,
                          "handler failed: it answered with status " + std::to_string(res.status));
}

}  // namespace kiwi::agent
