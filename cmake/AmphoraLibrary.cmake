# amphora_library(<name> <alias>): one of Amphora's libraries, exported and
# installed as amphora::<alias>, the name used in-tree too. Its sources
# compile once, into the object library <name>_objects, with hidden symbols;
# the library is linked from those objects and exports only what its
# installed headers declare (amphora/export.hpp, cmake/amphora.map). In-tree
# programs that test or measure internals (amphora_tests, amphora_bench)
# link the objects instead, which gives them every symbol and the private
# headers of each layer's src/. Folders add their sources with amphora_layer()
# and dependencies with amphora_link().
function(amphora_library name alias)
  add_library(${name}_objects OBJECT)
  set_target_properties(${name}_objects PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${name}_objects PUBLIC cxx_std_20)
  target_compile_options(${name}_objects PRIVATE ${AMPHORA_WARNINGS}
    -include ${PROJECT_SOURCE_DIR}/framework/core/src/nlohmann_visible.hpp)

  add_library(${name} ${AMPHORA_LIBRARY_KIND} $<TARGET_OBJECTS:${name}_objects>)
  add_library(amphora::${alias} ALIAS ${name})
  set_target_properties(${name} PROPERTIES
    EXPORT_NAME ${alias}
    LINKER_LANGUAGE CXX
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_include_directories(${name} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} INTERFACE cxx_std_20)
  if(AMPHORA_SHARED)
    target_link_options(${name} PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/amphora.map")
    set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/amphora.map)
  endif()
endfunction()

# amphora_link(<library> [PUBLIC deps...] [PRIVATE deps...]): what <library>
# links, and what a program linking its objects needs beside them (another
# Amphora library stands for its objects' headers and dependencies there,
# not its object files: a program links each library's objects itself).
function(amphora_link library)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "PUBLIC;PRIVATE")
  target_link_libraries(${library} PUBLIC ${arg_PUBLIC} PRIVATE ${arg_PRIVATE})
  set(for_objects)
  foreach(dep IN LISTS arg_PUBLIC arg_PRIVATE)
    if(dep MATCHES "^amphora_" AND TARGET ${dep}_objects)
      list(APPEND for_objects ${dep}_objects)
    else()
      list(APPEND for_objects ${dep})
    endif()
  endforeach()
  target_link_libraries(${library}_objects PUBLIC ${for_objects})
endfunction()

# amphora_layer(<library> SOURCES...): the folder this is called from is one
# layer of <library>: its include/ holds public headers (installed), its src/
# the sources and private headers (never installed). Private headers are
# visible to the library's other layers, and to programs linking its
# objects, included by file name.
function(amphora_layer library)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  list(TRANSFORM ARGN PREPEND "${dir}/")
  target_sources(${library}_objects PRIVATE ${ARGN})
  if(EXISTS ${dir}/include)
    target_include_directories(${library}_objects PUBLIC $<BUILD_INTERFACE:${dir}/include>)
    target_include_directories(${library} INTERFACE $<BUILD_INTERFACE:${dir}/include>)
    set_property(GLOBAL APPEND PROPERTY AMPHORA_PUBLIC_HEADER_DIRS ${dir}/include/)
  endif()
  target_include_directories(${library}_objects PUBLIC $<BUILD_INTERFACE:${dir}/src>)
endfunction()
