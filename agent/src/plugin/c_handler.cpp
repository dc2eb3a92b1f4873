#include "plugin/c_handler.hpp"

#include <chrono>
#include <climits>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <vector>

namespace kiwi::agent {

namespace {

// What a ticket is: a reference to the view it was handed out with.
using Ticket = std::shared_ptr<const void>;

void* ticket_for(std::shared_ptr<const void> view) {
  return new Ticket(std::move(view));
}

CData& self(void* ctx) {
  return *static_cast<CData*>(ctx);
}

}  // namespace

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
    auto view = std::make_shared<const abi::StatsView>(self(ctx).data_.stats());
    const kiwi_stats* out = &view->c;
    *ticket = ticket_for(std::move(view));
    return out;
  };
  c_.history = [](void* ctx, const kiwi_history_query* query, void** ticket,
                  const kiwi_refusal* error) {
    return self(ctx).history(query, ticket, error, KIWI_ABI_MINOR);
  };
  c_.series_names = [](void* ctx, void** ticket) -> const kiwi_str_list* {
    auto view = std::make_shared<const abi::SeriesView>(self(ctx).data_.series_names());
    const kiwi_str_list* out = &view->c;
    *ticket = ticket_for(std::move(view));
    return out;
  };
  c_.release = [](void*, void* ticket) { delete static_cast<Ticket*>(ticket); };
  c_.alerts = [](void* ctx, void** ticket) -> const kiwi_alert_list* {
    auto view = std::make_shared<const abi::AlertsView>(self(ctx).data_.alerts());
    const kiwi_alert_list* out = &view->c;
    *ticket = ticket_for(std::move(view));
    return out;
  };
  before_1_7_ = c_;
  before_1_7_.history = [](void* ctx, const kiwi_history_query* query, void** ticket,
                           const kiwi_refusal* error) {
    return self(ctx).history(query, ticket, error, 6);
  };
}

const kiwi_history_result* CData::history(const kiwi_history_query* query, void** ticket,
                                          const kiwi_refusal* error,
                                          std::uint32_t plugin_minor) const {
  *ticket = nullptr;  // release(NULL) does nothing
  try {
    auto view = std::make_shared<const abi::HistoryView>(
        data_.history(abi::query_from(query, plugin_minor)),
        plugin_minor >= 7 ? sizeof(kiwi_history_series) : KIWI_HISTORY_SERIES_SIZE_1_0);
    const kiwi_history_result* out = &view->c;
    *ticket = ticket_for(std::move(view));
    return out;
  } catch (const std::exception& e) {  // StoreError, a query we cannot read, out of memory
    if (error) error->refuse(error->ctx, to_c(e.what()));
  }
  return nullptr;
}

std::shared_ptr<const abi::SnapshotView> CData::snapshot_view() const {
  std::shared_ptr<const Snapshot> snap = data_.snapshot();
  {
    std::lock_guard lock(mutex_);
    // `last_` holds the snapshot it views, so its address cannot name another one meanwhile.
    if (last_ && last_->snap == snap) return last_;
  }
  // Built outside the lock: requests for the cached view are not held up by it. Two requests
  // that see a new snapshot at once may both build one; the later one is kept.
  auto view = std::make_shared<const abi::SnapshotView>(std::move(snap));
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

namespace {

// A kiwi_stream as a Stream: read() through the plugin, release() when the last holder lets it
// go. The plugin's instance (and so its code) outlives it: the server holds the route's handler
// while it sends a stream (ABI: every stream is released before destroy()).
class CStream final : public Stream {
 public:
  explicit CStream(const kiwi_stream& c) : c_(c) {}
  ~CStream() override {
    if (c_.release) c_.release(c_.owner);
  }
  CStream(const CStream&) = delete;
  CStream& operator=(const CStream&) = delete;
  std::ptrdiff_t read(char* buffer, std::size_t capacity, Wait& wait) override {
    if (!c_.read) return error;
    int fd = -1;
    std::int64_t until_ns = INT64_MAX;
    const std::int64_t n = c_.read(c_.owner, buffer, capacity, &fd, &until_ns);
    if (n > 0)
      return n <= static_cast<std::int64_t>(capacity) ? static_cast<std::ptrdiff_t>(n)
                                                      : error;  // wrote past the end
    if (n == KIWI_STREAM_END) return end;
    if (n != 0 || (fd < 0 && until_ns == INT64_MAX)) return error;  // 0 with nothing to wait on
    wait.fd = fd;
    if (until_ns != INT64_MAX)
      wait.until = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(until_ns));
    return 0;
  }

 private:
  kiwi_stream c_;
};

}  // namespace

CHandler::CHandler(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
                   std::string_view route_path, const Options& options, Logger& log,
                   const DataSource& data, std::string_view agent_version,
                   std::string_view host_name, std::span<const kiwi::Peer> peers)
    : plugin_(plugin), host_(log, std::move(code)), options_(options), data_(CData::of(data)) {
  std::vector<kiwi_peer> c_peers;
  c_peers.reserve(peers.size());
  for (const kiwi::Peer& p : peers)
    c_peers.push_back({to_c(p.name), to_c(p.url), static_cast<std::uint32_t>(p.timeout.count()),
                       to_c(p.bearer_token_file), to_c(p.username), to_c(p.password_file),
                       to_c(p.ca_file)});
  kiwi_handler_context ctx{};
  ctx.size = sizeof ctx;
  ctx.route_path = to_c(route_path);
  ctx.options = options_.values.data();
  ctx.option_count = options_.values.size();
  ctx.host = &host_.host;
  ctx.data = data_->c(plugin.abi_minor);
  ctx.agent_version = to_c(agent_version);
  ctx.host_name = to_c(host_name);
  ctx.peers = c_peers.data();
  ctx.peer_count = c_peers.size();
  ctx.peer_size = sizeof(kiwi_peer);
  CRefusal refusal;
  instance_ = refusal.created(plugin_.handler_create(&ctx, &refusal.c));
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
  req.auth_type = to_c(r.auth_type);
  req.remote_user = to_c(r.remote_user);

  // The C defaults (kiwi_response): 200, application/json, no headers, no body.
  res.status = 200;
  assign_text(res.content_type, "application/json");
  Call call{host_.code, res, std::move(res.body), 0, {}};
  res.body.reset();
  res.stream.reset();
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
      c.res.stream.reset();
      return;
    }
    c.res.body = body_from(body, c.code);  // a second body replaces (releases) the first
    c.res.stream.reset();
  };
  out.stream = [](void* ctx, kiwi_stream stream) {  // ABI 1.4
    auto& c = *static_cast<Call*>(ctx);
    if (!KIWI_HAS_MEMBER(&stream, kiwi_stream, release)) {  // not a stream this agent can read
      c.error = "the handler gave a stream of " + std::to_string(stream.size) +
                " bytes, smaller than a kiwi_stream of ABI 1.4";
      return;
    }
    try {
      c.res.stream = std::make_shared<CStream>(stream);
    } catch (...) {  // out of memory: nothing may cross back into the plugin
      if (stream.release) stream.release(stream.owner);
      c.res.stream.reset();
    }
    c.res.body.reset();
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
