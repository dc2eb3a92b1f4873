// For the [http.auth] tests, unit and integration: password hashes as a user makes them.
#pragma once

#include <crypt.h>

#include <catch2/catch.hpp>
#include <string>

namespace kiwi_test {

// A bcrypt hash of `password` at cost 4 (the fastest), made with libxcrypt as mkpasswd does.
inline std::string bcrypt_hash(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt));
  crypt_data data{};
  const char* out = crypt_rn(password.c_str(), salt, &data, sizeof data);
  REQUIRE(out);
  return out;
}

}  // namespace kiwi_test
