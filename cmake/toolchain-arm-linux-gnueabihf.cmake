# Cross build for 32-bit Arm Linux with hardware floating point (Debian armhf: ARMv7-A with VFPv3
# and Thumb-2), tests under qemu-arm-static. Runs on 32-bit Raspberry Pi OS on a Pi 2, 3, 4, 5 or
# Zero 2, not on the ARMv6 of a Pi 1, Zero or Zero W. Used by tools/cross-test.sh armhf; see
# debian-cross.cmake.
set(KIWI_CROSS_TRIPLET arm-linux-gnueabihf)
set(KIWI_CROSS_PROCESSOR arm)
set(KIWI_CROSS_QEMU qemu-arm-static)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
# GCC notes, on every iterator of a std::vector<std::pair<...>> passed by value, that its parameter
# passing changed in GCC 7.1 (-Wpsabi): that matters only when linking code built by GCC before 7.1.
set(CMAKE_CXX_FLAGS_INIT -Wno-psabi)
