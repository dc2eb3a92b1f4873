# The installed plugin SDK: what `cmake --install` adds besides the agent, so a plugin builds with no
# source tree (docs/plugins.md):
#   <includedir>/kiwi/                        the headers (agent/CMakeLists.txt installs them)
#   <libdir>/cmake/KiwiAgent/                 find_package(KiwiAgent): the target KiwiAgent::sdk,
#                                             add_kiwi_plugin() (the same file the tree uses) and
#                                             KIWI_AGENT_PLUGIN_DIR, KIWI_AGENT_ABI_VERSION
#   <libdir>/pkgconfig/kiwi-agent.pc          pkg-config --cflags kiwi-agent; its `plugindir`
include(CMakePackageConfigHelpers)

# The C ABI version, read from the header that defines it (kiwi/plugin.h), so it is stated once.
foreach(part MAJOR MINOR)
  file(STRINGS ${CMAKE_SOURCE_DIR}/agent/include/kiwi/plugin.h abi_line
       REGEX "^#define KIWI_ABI_${part} [0-9]+$")
  string(REGEX REPLACE "^#define KIWI_ABI_${part} ([0-9]+)$" "\\1" KIWI_ABI_${part} "${abi_line}")
  if(NOT KIWI_ABI_${part} MATCHES "^[0-9]+$")
    message(FATAL_ERROR "cannot read KIWI_ABI_${part} from agent/include/kiwi/plugin.h")
  endif()
endforeach()
set(KIWI_ABI_VERSION ${KIWI_ABI_MAJOR}.${KIWI_ABI_MINOR})

set(KIWI_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/KiwiAgent)
set(KIWI_PLUGIN_DIR_REL ${CMAKE_INSTALL_LIBDIR}/kiwi-agent)  # relative to the prefix
install(TARGETS kiwi_sdk EXPORT KiwiAgentTargets)
install(EXPORT KiwiAgentTargets NAMESPACE KiwiAgent:: DESTINATION ${KIWI_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/KiwiAgentConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/sdk/KiwiAgentConfig.cmake
                              INSTALL_DESTINATION ${KIWI_CMAKE_DIR}
                              PATH_VARS KIWI_PLUGIN_DIR_REL)
# What loads is decided by the C ABI version (KIWI_AGENT_ABI_VERSION), not by the agent's: a
# project asking for SDK 0.3 builds against any later 0.x (docs/plugins.md "ABI rules").
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sdk/KiwiAgentConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_BINARY_DIR}/sdk/KiwiAgentConfig.cmake
              ${CMAKE_BINARY_DIR}/sdk/KiwiAgentConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/KiwiAgentPlugin.cmake
        DESTINATION ${KIWI_CMAKE_DIR})

# Only what compiling against the headers needs. -fPIC -shared and -fvisibility=hidden are how a
# plugin is built, not how the headers are used: they go on the plugin's own command line (Debian's
# lintian rejects code-generation flags in a .pc file: pkg-config-bad-directive).
# kiwi-agent.pc for C++ plugins; kiwi-agent-c.pc for C ones, without -std=c++20 (which a C
# compiler warns about).
set(KIWI_PC_CFLAGS "-std=c++20")
set(KIWI_PC_C_CFLAGS "")
if(CMAKE_SIZEOF_VOID_P EQUAL 4)
  string(APPEND KIWI_PC_CFLAGS " -D_FILE_OFFSET_BITS=64")
  string(APPEND KIWI_PC_C_CFLAGS "-D_FILE_OFFSET_BITS=64")
endif()
# Its prefix is the one `cmake --install --prefix` is given, so it is written when installing.
install(CODE "
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(KIWI_ABI_VERSION \"${KIWI_ABI_VERSION}\")
  set(KIWI_PC_CFLAGS \"${KIWI_PC_CFLAGS}\")
  set(KIWI_PC_C_CFLAGS \"${KIWI_PC_C_CFLAGS}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  foreach(pc kiwi-agent kiwi-agent-c)
    configure_file(\"${CMAKE_SOURCE_DIR}/cmake/\${pc}.pc.in\" \"${CMAKE_BINARY_DIR}/sdk/\${pc}.pc\" @ONLY)
    file(INSTALL \"${CMAKE_BINARY_DIR}/sdk/\${pc}.pc\"
         DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\")
  endforeach()")
