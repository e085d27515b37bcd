# amphora_add_pipeline(<target> SOURCES <file>... [LIBRARIES <lib>...])
#
# Adds executable <target> built from SOURCES and linked to LIBRARIES
# (default amphora::amphora and amphora::run, which has run_main), whose
# pipeline steps carry a code fingerprint:
# the SHA-256 of the preprocessed text of the source file that declares
# each step (comments gone, whitespace runs collapsed), so editing a step, a
# helper in its file or a header that file includes is a cache miss for the
# steps of that file only, and comments or reformatting are not. The
# fingerprints are computed at build time by preprocessing each source with
# the target's own flags (an object library compiled with -E -P), hashing
# the results (AmphoraFingerprint.cmake) and compiling a table that
# registers them before main (docs/FORMAT.md §3.8).
set(_AMPHORA_PIPELINE_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(amphora_add_pipeline target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;LIBRARIES")
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "amphora_add_pipeline(${target}): give the program's SOURCES")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "amphora_add_pipeline(${target}): unexpected arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_LIBRARIES)
    set(arg_LIBRARIES amphora::amphora amphora::run)
  endif()
  set(sources)
  foreach(source IN LISTS arg_SOURCES)
    get_filename_component(source "${source}" ABSOLUTE)
    list(APPEND sources "${source}")
  endforeach()

  add_executable(${target} ${sources})
  target_link_libraries(${target} PRIVATE ${arg_LIBRARIES})

  # The same sources with the same flags, preprocessed instead of compiled:
  # each "object" is the text the compiler sees.
  set(preprocessed ${target}_amphora_preprocessed)
  add_library(${preprocessed} OBJECT ${sources})
  target_link_libraries(${preprocessed} PRIVATE ${arg_LIBRARIES})
  set_target_properties(${preprocessed} PROPERTIES
    INCLUDE_DIRECTORIES "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>"
    COMPILE_DEFINITIONS "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>"
    EXCLUDE_FROM_ALL ON)
  target_compile_options(${preprocessed} PRIVATE -E -P)

  set(table "${CMAKE_CURRENT_BINARY_DIR}/${target}_code_fingerprints.cpp")
  string(JOIN "|" joined_sources ${sources})
  add_custom_command(
    OUTPUT "${table}"
    COMMAND "${CMAKE_COMMAND}" "-DSOURCES=${joined_sources}" "-DOBJECTS=$<JOIN:$<TARGET_OBJECTS:${preprocessed}>,|>"
            "-DOUTPUT=${table}" -P "${_AMPHORA_PIPELINE_CMAKE_DIR}/AmphoraFingerprint.cmake"
    DEPENDS ${preprocessed} "$<TARGET_OBJECTS:${preprocessed}>" "${_AMPHORA_PIPELINE_CMAKE_DIR}/AmphoraFingerprint.cmake"
    COMMENT "Fingerprinting the steps of ${target}"
    VERBATIM)
  target_sources(${target} PRIVATE "${table}")
endfunction()
