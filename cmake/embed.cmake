# eq_embed(TARGET file...) builds a static library that exposes each file's
# contents through common/embedded.h: eq::embedded::file("schema/openapi.yaml").
# The bytes are written as a char array, so any content (quotes, backslashes,
# non-ASCII) survives unchanged, and the build reruns when a file changes.
function(eq_embed target)
  set(out ${CMAKE_BINARY_DIR}/embedded_${target}.cc)
  # The file list travels to the script joined with "|": a ";" list would be
  # split into separate shell words.
  string(REPLACE ";" "|" joined "${ARGN}")
  set(files "")
  foreach(rel ${ARGN})
    list(APPEND files ${CMAKE_SOURCE_DIR}/${rel})
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DROOT=${CMAKE_SOURCE_DIR}
            "-DFILES=${joined}" -P ${CMAKE_SOURCE_DIR}/cmake/embed_gen.cmake
    DEPENDS ${files} ${CMAKE_SOURCE_DIR}/cmake/embed_gen.cmake
    COMMENT "Embedding data files"
    VERBATIM)
  add_library(${target} STATIC ${out})
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR})
endfunction()
