/* A plugin of kiwi-agent 0.2 and earlier, whose boundary was C++: it exports only the ABI number
 * of that SDK. The loader must say it needs a rebuild, not that it is no plugin at all. */
#include <stdint.h>

__attribute__((visibility("default"))) const uint32_t kiwi_abi_version = 3;
