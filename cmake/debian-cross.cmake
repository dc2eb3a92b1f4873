# The body of the cross toolchain files next to it (toolchain-<triplet>.cmake, which set
# KIWI_CROSS_TRIPLET, KIWI_CROSS_PROCESSOR and KIWI_CROSS_QEMU, then include this): Debian's cross
# compiler for the triplet (crossbuild-essential-<arch>) and the target's -dev packages installed
# through multiarch (dpkg --add-architecture; tools/setup.sh --arch ARCH installs both). No sysroot:
# Debian's cross compilers search /usr/include/<triplet> and /usr/lib/<triplet> themselves, and
# CMake's find_* look in /usr/lib/<triplet> (CMAKE_LIBRARY_ARCHITECTURE), never in the host's.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${KIWI_CROSS_PROCESSOR})
set(CMAKE_C_COMPILER ${KIWI_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${KIWI_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${KIWI_CROSS_TRIPLET})

# pkg-config (Debian's libmicrohttpd when the static one is not built) reads only the target's .pc
# files.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${KIWI_CROSS_TRIPLET}/pkgconfig:/usr/share/pkgconfig")

# ctest runs the test binaries under qemu-user (qemu-user-static), and so does Catch2's test
# discovery at build time; tests/CMakeLists.txt hands the same words to the tests that start the
# agent (KIWI_TEST_EMULATOR). `-L /`: the target's dynamic loader and libraries are the multiarch
# ones (/lib/ld-linux-*.so, /lib/<triplet>), which the -dev packages installed, so ld.so and
# libc.so.6 come from the same libc6:<arch>. (With -L /usr/<triplet>, qemu takes ld.so from the
# cross toolchain's libc6-<arch>-cross, an older build of glibc than the libc.so.6 it then finds
# in /lib/<triplet>.)
find_program(KIWI_CROSS_QEMU_PATH ${KIWI_CROSS_QEMU})
if(NOT KIWI_CROSS_QEMU_PATH)
  set(KIWI_CROSS_QEMU_PATH /usr/bin/${KIWI_CROSS_QEMU})
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR ${KIWI_CROSS_QEMU_PATH} -L /)
