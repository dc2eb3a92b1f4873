// libcurl loaded when first needed (dlopen), not when the plugin is: the fleet and peer handlers
// are on every agent's default routes, and libcurl with what it links (TLS, Kerberos, LDAP, SSH:
// about 25 libraries, 6 MB of resident memory) is needed only by an agent that has [[peer]]
// entries. The functions peer_http.cpp calls, by their libcurl names without the "curl_" prefix.
#pragma once

#include <curl/curl.h>

namespace kiwi_http {

struct CurlApi {
  decltype(&curl_global_init) global_init;
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_reset) easy_reset;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_perform) easy_perform;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
  decltype(&curl_multi_init) multi_init;
  decltype(&curl_multi_add_handle) multi_add_handle;
  decltype(&curl_multi_remove_handle) multi_remove_handle;
  decltype(&curl_multi_perform) multi_perform;
  decltype(&curl_multi_poll) multi_poll;
  decltype(&curl_multi_info_read) multi_info_read;
  decltype(&curl_multi_cleanup) multi_cleanup;
};

// libcurl.so.4, loaded and initialised on the first call (thread-safe) and kept loaded. Throws
// std::runtime_error naming the library and dlerror() when it cannot be loaded.
const CurlApi& curl_api();

}  // namespace kiwi_http
