# kiwi_layer(<name> SOURCES <files...> [LAYERS <layers it builds on>] [LIBS <libraries>]
#            [OWNS <external header prefixes>])
#
# One folder of agent/src as the static library kiwi_<name> (docs/architecture.md).
#
# The build enforces the layering. A layer's include path is build/layers/<name>/, which holds a
# link to its own folder and to the folder of each layer it builds on (LAYERS, and theirs), and
# nothing else: `#include "http/router.hpp"` in a layer that does not build on http does not
# compile. LIBS are linked privately, so a layer's users do not get them; OWNS names the external
# headers only this layer may include (<sqlite3.h>, <toml++/...>): tests/architecture/ checks
# every include of the tree against that table, which kiwi_layers_table() writes out.
#
# Layers are declared bottom-up: a layer named in LAYERS must be declared before.
include_guard(GLOBAL)
set_property(GLOBAL PROPERTY KIWI_LAYERS "")

function(kiwi_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;LAYERS;LIBS;OWNS" ${ARGN})
  # What it may include: itself and the closure of what it builds on.
  set(seen ${name})
  foreach(layer IN LISTS L_LAYERS)
    get_property(known GLOBAL PROPERTY KIWI_LAYER_SEES_${layer} SET)
    if(NOT known)
      message(FATAL_ERROR "kiwi_layer(${name}): layer '${layer}' is not declared yet (declare layers bottom-up)")
    endif()
    get_property(below GLOBAL PROPERTY KIWI_LAYER_SEES_${layer})
    list(APPEND seen ${below})
  endforeach()
  list(REMOVE_DUPLICATES seen)
  list(SORT seen)
  set_property(GLOBAL PROPERTY KIWI_LAYER_SEES_${name} ${seen})
  set_property(GLOBAL APPEND PROPERTY KIWI_LAYERS ${name})
  set_property(GLOBAL PROPERTY KIWI_LAYER_OWNS_${name} ${L_OWNS})

  set(view ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view})
  foreach(layer IN LISTS seen)
    file(CREATE_LINK ${KIWI_LAYER_ROOT}/${layer} ${view}/${layer} SYMBOLIC)
  endforeach()

  add_library(kiwi_${name} STATIC ${L_SOURCES})
  target_include_directories(kiwi_${name} PUBLIC $<BUILD_INTERFACE:${view}>)
  set(below_targets ${L_LAYERS})
  list(TRANSFORM below_targets PREPEND kiwi_)
  target_link_libraries(kiwi_${name} PUBLIC kiwi_sdk ${below_targets} PRIVATE ${L_LIBS})
  if(KIWI_LTO_ACTIVE)
    # Fat objects: the agent's executable links them with -flto (kiwi_lto_executable), and every
    # other program (the tests, the benchmarks) links their machine code: -fno-lto, or GCC's
    # linker plugin would optimise each of them at link time too, which is slow.
    target_compile_options(kiwi_${name} PRIVATE -flto=auto -ffat-lto-objects)
    target_link_options(kiwi_${name} INTERFACE
                        $<$<NOT:$<BOOL:$<TARGET_PROPERTY:KIWI_LTO_LINK>>>:-fno-lto>)
  endif()
endfunction()

# kiwi_lto_executable(<target>): links <target> with link-time optimisation over its own sources
# and the layers' (KIWI_LTO in the top CMakeLists.txt); nothing when that is off.
function(kiwi_lto_executable target)
  if(KIWI_LTO_ACTIVE)
    set_target_properties(${target} PROPERTIES KIWI_LTO_LINK ON)
    target_compile_options(${target} PRIVATE -flto=auto)
    target_link_options(${target} PRIVATE -flto=auto)
  endif()
endfunction()

# Writes <file>: one line per layer, "<layer>: <layers it may include> | <external headers it
# owns>", for the include check (tests/architecture/check_layers.py).
function(kiwi_layers_table file)
  get_property(layers GLOBAL PROPERTY KIWI_LAYERS)
  set(text "")
  foreach(layer IN LISTS layers)
    get_property(sees GLOBAL PROPERTY KIWI_LAYER_SEES_${layer})
    get_property(owns GLOBAL PROPERTY KIWI_LAYER_OWNS_${layer})
    list(JOIN sees " " sees)
    list(JOIN owns " " owns)
    string(APPEND text "${layer}: ${sees} | ${owns}\n")
  endforeach()
  file(WRITE ${file}.tmp "${text}")
  file(COPY_FILE ${file}.tmp ${file} ONLY_IF_DIFFERENT)
  file(REMOVE ${file}.tmp)
endfunction()
