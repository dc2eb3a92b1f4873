#include "curl_dl.hpp"

#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace kiwi_http {

namespace {

template <class Fn>
void bind(void* lib, Fn& fn, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) throw std::runtime_error(std::string("libcurl.so.4 has no ") + name);
  fn = reinterpret_cast<Fn>(p);  // NOLINT: dlsym's result is the function
}

CurlApi load() {
  // Never closed (RTLD_NODELETE): connections and handles may outlive any one plugin instance.
  void* lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    const char* why = dlerror();
    throw std::runtime_error(std::string("cannot load libcurl.so.4 (Debian: libcurl4): ") +
                             (why ? why : "unknown error"));
  }
  CurlApi a{};
  bind(lib, a.global_init, "curl_global_init");
  bind(lib, a.easy_init, "curl_easy_init");
  bind(lib, a.easy_cleanup, "curl_easy_cleanup");
  bind(lib, a.easy_reset, "curl_easy_reset");
  bind(lib, a.easy_setopt, "curl_easy_setopt");
  bind(lib, a.easy_perform, "curl_easy_perform");
  bind(lib, a.easy_getinfo, "curl_easy_getinfo");
  bind(lib, a.easy_strerror, "curl_easy_strerror");
  bind(lib, a.slist_append, "curl_slist_append");
  bind(lib, a.slist_free_all, "curl_slist_free_all");
  bind(lib, a.multi_init, "curl_multi_init");
  bind(lib, a.multi_add_handle, "curl_multi_add_handle");
  bind(lib, a.multi_remove_handle, "curl_multi_remove_handle");
  bind(lib, a.multi_perform, "curl_multi_perform");
  bind(lib, a.multi_poll, "curl_multi_poll");
  bind(lib, a.multi_info_read, "curl_multi_info_read");
  bind(lib, a.multi_cleanup, "curl_multi_cleanup");
  a.global_init(CURL_GLOBAL_DEFAULT);
  return a;
}

}  // namespace

const CurlApi& curl_api() {
  // A load that throws leaves the flag unset: the next caller tries again (a reload after
  // libcurl4 is installed).
  static std::once_flag once;
  static CurlApi api{};
  std::call_once(once, [] { api = load(); });
  return api;
}

}  // namespace kiwi_http
