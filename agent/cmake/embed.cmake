# kiwi_embed(<output.cpp> <c++ symbol> <base dir> <files...>)
# Generates a C++ source holding the files' bytes at build time (so editing a file rebuilds it):
#   extern const kiwi_embedded::File <symbol>[]; extern const std::size_t <symbol>_count;
# Paths are stored relative to <base dir>.
set(KIWI_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_script.cmake)
function(kiwi_embed output symbol base)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DSYMBOL=${symbol} -DBASE=${base}
            "-DFILES=${ARGN}" -P ${KIWI_EMBED_SCRIPT}
    DEPENDS ${ARGN} ${KIWI_EMBED_SCRIPT}
    COMMENT "Embedding ${symbol}"
    VERBATIM)
endfunction()
