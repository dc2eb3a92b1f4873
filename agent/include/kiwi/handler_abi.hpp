// kiwi-agent plugin SDK: the C ABI glue of route handlers, what KIWI_HANDLER_PLUGIN expands to.
// kiwi/handler.hpp (the handler SDK) includes it at its end; a handler does not call it.
//
// The agent's data (kiwi_data) becomes the DataSource a handler reads (HostData, through the
// views' reading back in kiwi/views.hpp), a kiwi_request a kiwi::Request, and the Response calls
// on kiwi_response. Exceptions never cross the boundary (kiwi/abi.hpp).
#pragma once

#include <kiwi/plugin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>

#include "kiwi/abi.hpp"
#include "kiwi/handler.hpp"
#include "kiwi/views.hpp"

namespace kiwi::abi {

// The agent's data (kiwi_data) as the DataSource a handler reads. Thread-safe, as kiwi_data is.
// Every call acquires a view, copies what it needs out of it and releases it before returning, so
// what a handler holds is its own. The snapshot is copied once per published snapshot and shared
// by the requests until the next one (a request then costs a view's acquire and release, a lock
// and a shared_ptr copy), into the storage of an earlier copy nobody holds any more; stats,
// history, series names and alerts are copied per call.
class HostData final : public DataSource {
 public:
  explicit HostData(const kiwi_data* data) : data_(data) {}

  std::shared_ptr<const Snapshot> snapshot() const override {
    Ticket t(data_);
    const kiwi_snapshot* c = data_->snapshot(data_->ctx, &t.ticket);
    std::lock_guard lock(mutex_);
    // The sequence names a tick; the timestamp tells a tick of a collector that started over
    // (a new sequence 1) from the one cached.
    if (cached_ && cached_->sequence == c->sequence && cached_->timestamp == c->timestamp)
      return cached_;
    // A copy whose last holder let it go is filled again (recycler_): a new sample of the same
    // sensors and series is then copied without an allocation.
    std::unique_ptr<Snapshot> next;
    {
      std::lock_guard spare_lock(recycler_->mutex);
      next = std::move(recycler_->spare);
    }
    if (!next) next = std::make_unique<Snapshot>();
    assign_snapshot(*next, *c);
    cached_ = std::shared_ptr<const Snapshot>(next.release(), Recycle{recycler_});
    return cached_;
  }

  HistoryResult history(const HistoryQuery& q) const override {
    const HistoryQueryView query(q);
    struct Refusal {
      std::string message;
      kiwi_refusal c{this, [](void* ctx, kiwi_str why) {
                       static_cast<Refusal*>(ctx)->message = std::string(view(why));
                     }};
    } refusal;
    Ticket t(data_);
    const kiwi_history_result* r = data_->history(data_->ctx, &query.c, &t.ticket, &refusal.c);
    if (!r)
      throw StoreError(refusal.message.empty() ? "the history store did not answer"
                                               : refusal.message);
    return history_from(*r);
  }

  AgentStats stats() const override {
    Ticket t(data_);
    return stats_from(*data_->stats(data_->ctx, &t.ticket));
  }

  std::vector<std::string> series_names() const override {
    Ticket t(data_);
    return names_from(*data_->series_names(data_->ctx, &t.ticket));
  }

  // An agent before ABI 1.6 has no alerts (nor rules): none.
  std::vector<Alert> alerts() const override {
    if (!KIWI_HAS_MEMBER(data_, kiwi_data, alerts) || !data_->alerts) return {};
    Ticket t(data_);
    const kiwi_alert_list* list = data_->alerts(data_->ctx, &t.ticket);
    return list ? alerts_from(*list) : std::vector<Alert>();
  }

 private:
  // An acquired view's ticket, released when the call is done with the view.
  struct Ticket {
    explicit Ticket(const kiwi_data* d) : data(d) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { data->release(data->ctx, ticket); }
    const kiwi_data* data;
    void* ticket = nullptr;
  };

  const kiwi_data* data_;
  // Where the copy of a sample goes when its last holder (a request, or cached_) drops it: kept
  // as the spare that the next sample is copied into. Shared with the copies' deleters, so it
  // outlives this object if a request does.
  struct Recycler {
    std::mutex mutex;
    std::unique_ptr<Snapshot> spare;  // guarded by mutex
  };
  struct Recycle {
    std::shared_ptr<Recycler> to;
    void operator()(const Snapshot* s) const {
      std::unique_ptr<Snapshot> copy(const_cast<Snapshot*>(s));
      std::lock_guard lock(to->mutex);
      if (!to->spare) to->spare = std::move(copy);
    }
  };
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const Snapshot> cached_;  // guarded by mutex_
  std::shared_ptr<Recycler> recycler_ = std::make_shared<Recycler>();
};

// Responses that handle_request reuses: a request takes one (or makes one), the handler fills it
// (Handler::handle_into) and it goes back, its body dropped, so that a handler that fills it in
// place allocates nothing for it. Lock-free: a few slots that requests on any thread take and
// give back; one that finds them all taken (more requests at once than slots) makes its own.
class ResponsePool {
 public:
  ResponsePool() = default;
  ResponsePool(const ResponsePool&) = delete;
  ResponsePool& operator=(const ResponsePool&) = delete;
  ~ResponsePool() {
    for (auto& s : slots_) delete s.load();
  }
  std::unique_ptr<Response> take() {
    for (auto& s : slots_)
      if (Response* r = s.exchange(nullptr, std::memory_order_acquire))
        return std::unique_ptr<Response>(r);
    return std::make_unique<Response>();
  }
  void give(std::unique_ptr<Response> r) {
    r->body.reset();  // the bytes are not held past their request
    r->stream.reset();
    for (auto& s : slots_) {
      Response* empty = nullptr;
      if (s.compare_exchange_strong(empty, r.get(), std::memory_order_release)) {
        r.release();
        return;
      }
    }
  }

 private:
  std::atomic<Response*> slots_[8] = {};
};

// One handler instance behind the C ABI, with what it holds on to.
struct HandlerBox {
  explicit HandlerBox(const kiwi_handler_context* c)
      : log(c->host), options(options_from(c->options, c->option_count)), data(c->data) {
    if (!KIWI_HAS_MEMBER(c, kiwi_handler_context, peer_size)) return;  // before ABI 1.8
    host_name = view(c->host_name);
    for (std::size_t i = 0; i < c->peer_count; ++i) {
      // A row of another minor may be shorter or longer than ours: what both know, zeros after.
      kiwi_peer p{};
      std::memcpy(&p, reinterpret_cast<const unsigned char*>(c->peers) + i * c->peer_size,
                  std::min<std::size_t>(c->peer_size, sizeof p));
      peers.push_back({view(p.name), view(p.url), std::chrono::milliseconds(p.timeout_ms),
                       view(p.bearer_token_file), view(p.username), view(p.password_file),
                       view(p.ca_file)});
    }
  }
  HostLogger log;
  Options options;
  HostData data;
  std::string_view host_name;  // the views in these two are valid during the factory call only
  std::vector<Peer> peers;
  ResponsePool responses;
  std::unique_ptr<Handler> handler;  // goes first: it may log or read data in its destructor
  ~HandlerBox() { handler.reset(); }
};

template <class Class>
void* create_handler(const kiwi_handler_context* c, const kiwi_refusal* refusal) noexcept {
  return refusing(refusal, [&]() -> void* {
    auto box = std::make_unique<HandlerBox>(c);
    const HandlerContext ctx{view(c->route_path),    box->options,   box->log,  box->data,
                             view(c->agent_version), box->host_name, box->peers};
    box->handler = std::make_unique<Class>(ctx);
    box->peers.clear();  // views into the agent's context, which ends here
    box->host_name = {};
    return box.release();
  });
}

// kiwi_body.release for a body handed to the agent: the agent holds a copy of the Body (its
// bytes and what keeps them) until it calls this, from any thread.
inline void release_body(void* owner) noexcept {
  delete static_cast<Body*>(owner);
}

// kiwi_stream's functions for a Stream handed to the agent: `owner` is a shared_ptr<Stream> of its
// own, deleted by release (the agent's call, exactly once, from any thread).
inline int64_t read_stream(void* owner, char* buffer, size_t capacity, int* wait_fd,
                           int64_t* wait_until_ns) noexcept {
  try {
    Stream::Wait wait;
    const std::ptrdiff_t n =
        (*static_cast<std::shared_ptr<Stream>*>(owner))->read(buffer, capacity, wait);
    if (n == 0) {
      *wait_fd = wait.fd;
      *wait_until_ns =
          wait.until == std::chrono::steady_clock::time_point::max()
              ? INT64_MAX
              : std::chrono::duration_cast<std::chrono::nanoseconds>(wait.until.time_since_epoch())
                    .count();
    }
    return n > 0 || n == 0 || n == Stream::end ? n : KIWI_STREAM_ERROR;
  } catch (...) {
    return KIWI_STREAM_ERROR;
  }
}
inline void release_stream(void* owner) noexcept {
  delete static_cast<std::shared_ptr<Stream>*>(owner);
}

// Params of a request as kiwi::Params: in `stack` when they fit (nearly every request), else in
// `heap`. Not a thread_local vector: a thread_local with a destructor in a shared object keeps
// glibc from unloading it while any thread that touched it lives. `stack` is raw storage: an
// array of Param would be zeroed (1.5 KiB) on every request, for the few rows it then holds.
struct Params {
  static constexpr std::size_t kStack = 48;
  alignas(Param) unsigned char stack[kStack * sizeof(Param)];
  std::vector<Param> heap;
  std::span<const Param> from(const kiwi_param* c, std::size_t n) {
    static_assert(std::is_trivially_destructible_v<Param>);
    Param* out = reinterpret_cast<Param*>(stack);
    if (n > kStack) {
      heap.resize(n);
      out = heap.data();
    }
    for (std::size_t i = 0; i < n; ++i) new (out + i) Param{view(c[i].name), view(c[i].value)};
    return {out, n};
  }
};

// The Response as calls on kiwi_response: status, Content-Type (also when empty: no such header
// then), the other headers, and the body as a kiwi_body that owns a copy of the Body, so the
// agent serves the handler's bytes in place (the same Body gives the same data pointer: the
// agent's compression cache keys on it).
inline void write_response(const Response& res, const kiwi_response* out) {
  out->status(out->ctx, res.status);
  out->header(out->ctx, str("Content-Type"), str(res.content_type));
  for (const auto& h : res.headers) out->header(out->ctx, str(h.name), str(h.value));
  if (res.stream && KIWI_HAS_MEMBER(out, kiwi_response, stream)) {
    auto owner = std::make_unique<std::shared_ptr<Stream>>(res.stream);
    const kiwi_stream stream{sizeof(kiwi_stream), owner.get(), &read_stream, &release_stream};
    owner.release();  // the agent's from here on, even if it never reads it
    out->stream(out->ctx, stream);
    return;
  }
  if (res.stream) {  // an agent older than ABI 1.4: the stream read whole, here, into a body
    auto text = std::make_shared<const std::string>(read_all(*res.stream));
    auto owner = std::make_unique<Body>(std::move(text));
    const kiwi_body body{owner->view().data(), owner->view().size(), owner.get(), &release_body};
    owner.release();
    out->body(out->ctx, body);
    return;
  }
  if (!res.body) return;
  if (!res.body.keep()) {  // static storage (this plugin's image, which the agent keeps loaded)
    out->body(out->ctx, kiwi_body{res.body->data(), res.body->size(), nullptr, nullptr});
    return;
  }
  auto owner = std::make_unique<Body>(res.body);
  const kiwi_body body{owner->view().data(), owner->view().size(), owner.get(), &release_body};
  owner.release();  // the agent's from here on, even if it never sends it
  out->body(out->ctx, body);
}

inline int handle_request(void* instance, const kiwi_request* c,
                          const kiwi_response* out) noexcept {
  auto fail = [&](std::string_view why) {
    out->error(out->ctx, str(why));
    return 1;
  };
  try {
    Params query, headers;
    Request req;
    req.method = view(c->method);
    req.path = view(c->path);
    req.query = query.from(c->query, c->query_count);
    req.headers = headers.from(c->headers, c->header_count);
    req.remote_address = view(c->remote_address);
    req.body = view(c->body);
    req.raw_query = view(c->raw_query);
    req.protocol = view(c->protocol);
    req.local_address = view(c->local_address);
    req.local_port = c->local_port;
    if (KIWI_HAS_MEMBER(c, kiwi_request, remote_user)) {  // ABI 1.4
      req.auth_type = view(c->auth_type);
      req.remote_user = view(c->remote_user);
    }
    auto& box = *static_cast<HandlerBox*>(instance);
    std::unique_ptr<Response> res = box.responses.take();
    try {
      box.handler->handle_into(req, *res);
    } catch (const StoreError& e) {
      // The agent's answer when the store cannot read, as before the C ABI: 503, not 500.
      *res = Response::error(503, std::string("history store unavailable: ") + e.what());
    }
    write_response(*res, out);
    box.responses.give(std::move(res));
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("an exception that is not a std::exception");
  }
}

inline kiwi_str handler_methods(void* instance) noexcept {
  try {
    return str(static_cast<HandlerBox*>(instance)->handler->methods());
  } catch (...) {
    return {};  // the agent's default, "GET, HEAD"
  }
}

inline void destroy_handler(void* instance) noexcept {
  delete static_cast<HandlerBox*>(instance);
}

template <class Class>
const kiwi_plugin* handler_descriptor(std::string_view name, std::string_view description,
                                      std::span<const OptionSpec> options) {
  Functions fn;
  fn.handler_create = &create_handler<Class>;
  fn.handler_handle = &handle_request;
  fn.handler_methods = &handler_methods;
  fn.destroy = &destroy_handler;
  static const Descriptor d(PluginKind::handler, name, description, options, no_metrics, fn);
  return &d.plugin;
}

}  // namespace kiwi::abi

// Declares a handler plugin. Use once, in one source file of the plugin:
//   KIWI_HANDLER_PLUGIN(HistoryHandler, "history", "columnar sample history", kOptions)
// CLASS must be constructible from (const kiwi::HandlerContext&). It defines the plugin's one
// exported symbol, kiwi_plugin_v1 (kiwi/plugin.h).
#define KIWI_HANDLER_PLUGIN(CLASS, NAME, DESCRIPTION, OPTIONS)                                   \
  extern "C" KIWI_PLUGIN_EXPORT const kiwi_plugin* kiwi_plugin_v1(void) {                        \
    return ::kiwi::abi::handler_descriptor<CLASS>(NAME, DESCRIPTION,                             \
                                                  std::span<const ::kiwi::OptionSpec>(OPTIONS)); \
  }
