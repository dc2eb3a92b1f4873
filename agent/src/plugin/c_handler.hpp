// The host's side of the C plugin ABI for route handlers (kiwi/plugin.h): the agent's data as a
// kiwi_data a plugin reads, and the adapter that makes a C-ABI handler a kiwi::Handler for the
// router.
//
// Bodies cross without a copy: a kiwi_body becomes a kiwi::Body whose keep calls the plugin's
// release() when the last copy goes, and holds the plugin's code loaded until then.
#pragma once

#include <kiwi/plugin.h>

#include <kiwi/handler.hpp>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "plugin/c_abi.hpp"

namespace kiwi::agent {

// A DataSource as a kiwi_data: every acquire builds (or shares) a read-only C view and hands out a
// ticket holding it; release drops the ticket. Thread-safe, as the DataSource is.
//   snapshot      the C view of a published snapshot is built once and shared until the next
//                 one is published (cached by the Snapshot it views), so a request costs a lock
//                 and a shared_ptr copy, not a rebuild
//   stats         a copy of the counters and its view, per call
//   history       per call; NULL and error->refuse(message) when the store cannot answer, or
//                 for a query this agent cannot read (too small a `size`, an unknown aggregate).
//                 A plugin built before ABI 1.7 gets rows of its own size (1.6's), and its
//                 query's tail padding is not read as `band`: it has its own kiwi_data
//   series_names  per call
//   alerts        per call (ABI 1.6): the instances not inactive, as DataSource::alerts() has them
class CData {
 public:
  explicit CData(const DataSource& data);
  CData(const CData&) = delete;
  CData& operator=(const CData&) = delete;

  // The one CData of `data`, shared by every handler that reads it (so a snapshot's view is
  // built once for all of them); it lives while any of them holds it.
  static std::shared_ptr<CData> of(const DataSource& data);

  // The kiwi_data for a plugin built for ABI 1.`plugin_minor`.
  const kiwi_data* c(std::uint32_t plugin_minor = KIWI_ABI_MINOR) const {
    return plugin_minor >= 7 ? &c_ : &before_1_7_;
  }

 private:
  std::shared_ptr<const abi::SnapshotView> snapshot_view() const;
  const kiwi_history_result* history(const kiwi_history_query* query, void** ticket,
                                     const kiwi_refusal* error, std::uint32_t plugin_minor) const;

  const DataSource& data_;
  kiwi_data c_{};
  kiwi_data before_1_7_{};  // c_ with history() for plugins of ABI 1.0 to 1.6
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const abi::SnapshotView> last_;  // guarded by mutex_
};

// A handler instance of a C-ABI plugin, as the router sees handlers. Its destructor calls the
// plugin's destroy(). `code` keeps the plugin's shared object loaded: every Body this handler
// returns holds it too, so the plugin's release() (and its bytes) outlive the handler and the
// router (an MHD response cached by a worker thread).
class CHandler final : public InPlaceHandler {
 public:
  // Calls handler_create; throws std::runtime_error with the plugin's refusal.
  CHandler(const kiwi_plugin& plugin, std::shared_ptr<const void> code, std::string_view route_path,
           const Options& options, Logger& log, const DataSource& data,
           std::string_view agent_version, std::string_view host_name = {},
           std::span<const kiwi::Peer> peers = {});
  ~CHandler() override;
  CHandler(const CHandler&) = delete;
  CHandler& operator=(const CHandler&) = delete;

  // Calls handler_handle (concurrently, as the server does), into `out` (a Response the caller
  // reuses: see Handler::handle_into; handle() answers through it). A non-zero return is a 500
  // with the plugin's message: {"error":{"status":500,"message":"handler failed: ..."}}.
  void handle_into(const Request& request, Response& out) override;
  // handler_methods as the instance said it after create; "GET, HEAD" when it says nothing.
  std::string_view methods() const override { return methods_; }

 private:
  const kiwi_plugin& plugin_;
  CHost host_;  // host_.code keeps the library: every body handed out holds it too
  COptions options_;
  std::shared_ptr<CData> data_;
  std::string methods_ = "GET, HEAD";
  void* instance_ = nullptr;
};

// A kiwi_body as a Body: the same bytes, released through the plugin when the last copy goes;
// `code` is held until then. A body of static storage (no release) holds only `code`.
Body body_from(const kiwi_body& body, const std::shared_ptr<const void>& code);

}  // namespace kiwi::agent
