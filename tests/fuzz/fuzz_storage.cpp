// The storage sensor's parser: /proc/self/mountinfo (octal escapes, optional fields), then the
// mount selection the sensor makes of it.
#include <stdexcept>

#include "fuzz_support.hpp"
#include "storage_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = kiwi_fuzz::text(data, size);
  (void)kiwi::storage::decode_octal_escapes(in);
  try {
    auto mounts = kiwi::storage::parse_mountinfo(in);
    for (auto& m : mounts) KIWI_FUZZ_CHECK(!m.mount_point.empty());
    kiwi::storage::MountFilter filter;
    filter.exclude_types = {"tmpfs", "fuse.*"};
    (void)kiwi::storage::select_mounts(mounts, filter);
    (void)kiwi::storage::select_mounts(std::move(mounts), kiwi::storage::MountFilter{});
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
