# Cross build for 64-bit Arm Linux (Debian arm64: Raspberry Pi OS 64-bit, RK3588 boards), tests
# under qemu-aarch64-static. Used by tools/cross-test.sh arm64; see debian-cross.cmake.
set(KIWI_CROSS_TRIPLET aarch64-linux-gnu)
set(KIWI_CROSS_PROCESSOR aarch64)
set(KIWI_CROSS_QEMU qemu-aarch64-static)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
