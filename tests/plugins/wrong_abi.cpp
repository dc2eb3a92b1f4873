// A plugin built against a future SDK: the loader must refuse it by its ABI version alone.
#include <cstdint>
#include <kiwi/plugin.hpp>
extern "C" KIWI_EXPORT const std::uint32_t kiwi_abi_version = KIWI_ABI_VERSION + 41;
