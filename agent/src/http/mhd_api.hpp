// libmicrohttpd as a table of the functions the HTTP server calls, so that one process can run
// on two builds of it: the one the agent links (tools/setup-mhd.sh's static build without TLS,
// ~2.4 MiB lighter; or Debian's shared library when that was not built) and, for [http.tls],
// Debian's libmicrohttpd.so.12 with GnuTLS, loaded with dlopen() the first time TLS is configured.
// Each set of workers (HttpDaemon) calls one table for everything, from its daemon to its
// responses: an object of one build is never handed to the other.
#pragma once

#include <microhttpd.h>

#include <string>

namespace kiwi::agent {

struct MhdApi {
  std::string name;  // "libmicrohttpd 0.9.75" and, for a loaded one, its file
  bool tls = false;  // MHD_FEATURE_TLS
  decltype(&MHD_start_daemon) start_daemon;
  decltype(&MHD_stop_daemon) stop_daemon;
  decltype(&MHD_add_connection) add_connection;
  decltype(&MHD_get_connection_info) get_connection_info;
  decltype(&MHD_get_connection_values) get_connection_values;
  decltype(&MHD_queue_response) queue_response;
  decltype(&MHD_create_response_from_buffer_with_free_callback_cls) create_response;
  decltype(&MHD_add_response_header) add_response_header;
  decltype(&MHD_destroy_response) destroy_response;
  // Streamed bodies (mhd_stream.hpp).
  decltype(&MHD_create_response_from_callback) create_response_from_callback;
  decltype(&MHD_suspend_connection) suspend_connection;
  decltype(&MHD_resume_connection) resume_connection;
  decltype(&MHD_set_response_options) set_response_options;
};

// The library the agent is linked with.
const MhdApi& linked_mhd();

// A library with TLS: linked_mhd() when it has TLS, else kTlsLibrary, loaded on the first call
// (RTLD_LOCAL: its symbols stay apart from the linked copy's) and kept loaded for the life of the
// process. Throws std::runtime_error saying what to install when it cannot be loaded.
inline constexpr const char* kTlsLibrary = "libmicrohttpd.so.12";
const MhdApi& tls_mhd();

// Whether tls_mhd() has been loaded (for --version and the memory figures: the loaded library
// and GnuTLS stay mapped even after TLS is turned off again).
bool tls_mhd_loaded();

}  // namespace kiwi::agent
