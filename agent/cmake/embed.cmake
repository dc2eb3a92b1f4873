# kiwi_embed(<output.cpp> <c++ symbol> <base dir> [GZIP] <files...>)
# Generates a C++ source holding the files' bytes at build time (so editing a file rebuilds it):
#   extern const kiwi_embedded::File <symbol>[]; extern const std::size_t <symbol>_count;
# Paths are stored relative to <base dir>. With GZIP, each file's bytes are a gzip stream of it
# (level 9, no timestamp, so the output depends only on the input): a third of the size for text.
set(KIWI_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_script.cmake)
function(kiwi_embed output symbol base)
  cmake_parse_arguments(E "GZIP" "" "" ${ARGN})
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DSYMBOL=${symbol} -DBASE=${base} -DGZIP=${E_GZIP}
            "-DFILES=${E_UNPARSED_ARGUMENTS}" -P ${KIWI_EMBED_SCRIPT}
    DEPENDS ${E_UNPARSED_ARGUMENTS} ${KIWI_EMBED_SCRIPT}
    COMMENT "Embedding ${symbol}"
    VERBATIM)
endfunction()
