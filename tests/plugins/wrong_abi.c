/* A plugin built against a future major version of the C ABI: the loader must refuse it by its
 * descriptor's abi_major alone, reading nothing else. */
#include <kiwi/plugin.h>

static const kiwi_plugin descriptor = {
    .abi_major = KIWI_ABI_MAJOR + 1, .abi_minor = 0, .size = sizeof(kiwi_plugin)};

KIWI_PLUGIN_EXPORT const kiwi_plugin *kiwi_plugin_v1(void) {
  return &descriptor;
}
