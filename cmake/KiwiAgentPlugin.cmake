# add_kiwi_plugin(<sensor|handler|output|notifier> <name> SOURCES <glue...> [LOGIC <pure...>] [LIBS <libs>])
#
# The one way to build a kiwi-agent plugin, in this repository and outside it: the tree's
# CMakeLists.txt includes this file, and the installed SDK's KiwiAgentConfig.cmake includes the
# installed copy (find_package(KiwiAgent) then gives a plugin project the same function).
#
# The result is the module kiwi-<kind>-<name>.so, the file name the agent looks for when a
# [[sensor]], [[route]], [[remote_write]] or [[notify]] names the plugin `<name>`, built into
# KIWI_PLUGIN_OUTPUT_DIR (the tree: <build>/<libdir>/kiwi-agent, next to the agent; a plugin
# project: its build directory) and
# installed into KIWI_PLUGIN_INSTALL_DIR under the install prefix (the tree: <libdir>/kiwi-agent;
# a plugin project: the installed agent's plugin directory, and its prefix is the default prefix,
# so `cmake --install` puts the plugin where the agent finds it by name).
#
# LOGIC sources (pure parsing and rendering functions, the sensor class) form an object library
# that unit tests can link directly; SOURCES are the registration glue. LIBS are linked to both.
# Sources may be C++ or C (a C plugin includes only kiwi/plugin.h).
#
# The module is built with hidden visibility (only what the SDK macros export is visible, so two
# plugins never interpose each other's symbols) and, but in a Debug build, for size (-Os): a sensor
# runs once a second and a handler mostly hands out a body it rendered once, so their speed hardly
# shows, while each plugin's code is resident in full (docs/benchmarks.md).
#
# Inputs (set before calling; the tree and KiwiAgentConfig.cmake set them):
#   KIWI_SDK_TARGET          the SDK target (kiwi_sdk in the tree, KiwiAgent::sdk installed)
#   KIWI_PLUGIN_OUTPUT_DIR   where the module is built; default ${CMAKE_BINARY_DIR}
#   KIWI_PLUGIN_INSTALL_DIR  install destination, relative to the prefix; default
#                            ${CMAKE_INSTALL_LIBDIR}/kiwi-agent
include_guard(GLOBAL)
include(GNUInstallDirs)

set_property(GLOBAL PROPERTY KIWI_PLUGIN_LOGIC_LIBS "")
set_property(GLOBAL PROPERTY KIWI_PLUGIN_TARGETS "")

function(add_kiwi_plugin kind name)
  cmake_parse_arguments(P "" "" "SOURCES;LOGIC;LIBS" ${ARGN})
  if(NOT kind MATCHES "^(sensor|handler|output|notifier)$")
    message(FATAL_ERROR "add_kiwi_plugin(${kind} ${name}): the kind is 'sensor', 'handler', 'output' or 'notifier'")
  endif()
  if(NOT P_SOURCES)
    message(FATAL_ERROR "add_kiwi_plugin(${kind} ${name}): no SOURCES")
  endif()
  if(NOT KIWI_SDK_TARGET)
    message(FATAL_ERROR "add_kiwi_plugin: KIWI_SDK_TARGET is not set (use find_package(KiwiAgent))")
  endif()
  set(out_dir ${KIWI_PLUGIN_OUTPUT_DIR})
  if(NOT out_dir)
    set(out_dir ${CMAKE_BINARY_DIR})
  endif()
  set(install_dir ${KIWI_PLUGIN_INSTALL_DIR})
  if(NOT install_dir)
    set(install_dir ${CMAKE_INSTALL_LIBDIR}/kiwi-agent)
  endif()
  # For size unless it is a Debug build: also when a plugin project sets no build type (CMake's
  # empty one compiles without optimisation: 218 KB of module where -Os makes 60).
  set(opt $<$<NOT:$<CONFIG:Debug>>:-Os>)
  set(hidden C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
             POSITION_INDEPENDENT_CODE ON)

  set(target kiwi-${kind}-${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_compile_options(${target} PRIVATE ${opt})
  if(P_LOGIC)
    add_library(${target}-logic OBJECT ${P_LOGIC})
    target_compile_options(${target}-logic PRIVATE ${opt})
    target_link_libraries(${target}-logic PUBLIC ${KIWI_SDK_TARGET} ${P_LIBS})
    target_include_directories(${target}-logic PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
    set_target_properties(${target}-logic PROPERTIES ${hidden})
    target_link_libraries(${target} PRIVATE ${target}-logic)
    set_property(GLOBAL APPEND PROPERTY KIWI_PLUGIN_LOGIC_LIBS ${target}-logic)
  endif()
  target_link_libraries(${target} PRIVATE ${KIWI_SDK_TARGET} ${P_LIBS})
  set_target_properties(${target} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${out_dir} ${hidden})
  install(TARGETS ${target} LIBRARY DESTINATION ${install_dir})
  set_property(GLOBAL APPEND PROPERTY KIWI_PLUGIN_TARGETS ${target})
endfunction()
