# amphora_add_plugin(<target> SOURCES <file>... [LIBRARIES <lib>...]
#                    [OUTPUT_DIRECTORY <dir>])
#
# Adds <target>, an Amphora plugin: a shared library loaded at run time
# (MODULE), named <target>.so (no "lib" prefix), built from SOURCES, one of
# which uses AMPHORA_PLUGIN (<amphora/plugin.hpp>), and linked to
# amphora::amphora and LIBRARIES. Its symbols are hidden but for the entry
# point, so two plugins never bind to each other's code. OUTPUT_DIRECTORY
# (default: the build's library directory) is where it is written: point
# $AMPHORA_PLUGIN_PATH there, or give the path to `amphora --plugin`.
function(amphora_add_plugin target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT_DIRECTORY" "SOURCES;LIBRARIES")
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "amphora_add_plugin(${target}): give the plugin's SOURCES")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "amphora_add_plugin(${target}): unexpected arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  add_library(${target} MODULE ${arg_SOURCES})
  target_link_libraries(${target} PRIVATE amphora::amphora ${arg_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(arg_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${arg_OUTPUT_DIRECTORY}")
  endif()
endfunction()
