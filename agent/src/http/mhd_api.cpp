#include "http/mhd_api.hpp"

#include <dlfcn.h>

#include "http/http_server.hpp"

#include <mutex>
#include <stdexcept>

namespace kiwi::agent {

namespace {

MhdApi make_linked() {
  MhdApi a{std::string("libmicrohttpd ") + MHD_get_version(),
           MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES,
           &MHD_start_daemon,
           &MHD_stop_daemon,
           &MHD_add_connection,
           &MHD_get_connection_info,
           &MHD_get_connection_values,
           &MHD_queue_response,
           &MHD_create_response_from_buffer_with_free_callback_cls,
           &MHD_add_response_header,
           &MHD_destroy_response,
           &MHD_create_response_from_callback,
           &MHD_suspend_connection,
           &MHD_resume_connection,
           &MHD_set_response_options};
  return a;
}

// The symbol `name` of `lib` as a function pointer of type F.
template <class F>
void bind(void* lib, const char* name, F& out) {
  void* p = dlsym(lib, name);
  if (!p)
    throw std::runtime_error(std::string(kTlsLibrary) + " has no " + name +
                             ": not the libmicrohttpd 0.9.75 of Debian 12's libmicrohttpd12");
  out = reinterpret_cast<F>(p);
}

MhdApi bind_all(void* lib);

MhdApi load_tls() {
  // The agent exports no MHD symbols (it is not linked with --export-dynamic), so the loaded
  // library's calls to its own functions bind to themselves, not to the static copy.
  void* lib = dlopen(kTlsLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    throw std::runtime_error(
        std::string("[http.tls] needs ") + kTlsLibrary +
        " (libmicrohttpd with GnuTLS; apt-get install libmicrohttpd12): " + dlerror());
  try {
    return bind_all(lib);
  } catch (...) {
    dlclose(lib);
    throw;
  }
}

MhdApi bind_all(void* lib) {
  MhdApi a;
  decltype(&MHD_get_version) version = nullptr;
  decltype(&MHD_is_feature_supported) feature = nullptr;
  bind(lib, "MHD_get_version", version);
  bind(lib, "MHD_is_feature_supported", feature);
  bind(lib, "MHD_start_daemon", a.start_daemon);
  bind(lib, "MHD_stop_daemon", a.stop_daemon);
  bind(lib, "MHD_add_connection", a.add_connection);
  bind(lib, "MHD_get_connection_info", a.get_connection_info);
  bind(lib, "MHD_get_connection_values", a.get_connection_values);
  bind(lib, "MHD_queue_response", a.queue_response);
  bind(lib, "MHD_create_response_from_buffer_with_free_callback_cls", a.create_response);
  bind(lib, "MHD_add_response_header", a.add_response_header);
  bind(lib, "MHD_destroy_response", a.destroy_response);
  bind(lib, "MHD_create_response_from_callback", a.create_response_from_callback);
  bind(lib, "MHD_suspend_connection", a.suspend_connection);
  bind(lib, "MHD_resume_connection", a.resume_connection);
  bind(lib, "MHD_set_response_options", a.set_response_options);
  a.name = std::string("libmicrohttpd ") + version() + " (" + kTlsLibrary + ")";
  a.tls = feature(MHD_FEATURE_TLS) == MHD_YES;
  if (!a.tls) throw std::runtime_error(std::string(kTlsLibrary) + " was built without TLS support");
  return a;
}

std::mutex tls_mutex;
const MhdApi* tls_api = nullptr;  // under tls_mutex

}  // namespace

const MhdApi& linked_mhd() {
  static const MhdApi api = make_linked();
  return api;
}

const MhdApi& tls_mhd() {
  if (linked_mhd().tls) return linked_mhd();
  std::lock_guard lock(tls_mutex);
  // Never unloaded: the daemons of a set that a reload replaced may still be draining.
  if (!tls_api) tls_api = new MhdApi(load_tls());
  return *tls_api;
}

bool tls_mhd_loaded() {
  std::lock_guard lock(tls_mutex);
  return tls_api != nullptr;
}

std::string http_library_version() {
  const MhdApi& linked = linked_mhd();
  return linked.name + (linked.tls
                            ? " (with TLS)"
                            : std::string(" (without TLS; [http.tls] loads ") + kTlsLibrary + ")");
}

std::string http_tls_library() {
  return tls_mhd().name;
}

}  // namespace kiwi::agent
