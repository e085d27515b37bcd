# amphora_library(<name> <alias> SOURCES...): one of Amphora's libraries,
# exported and installed as amphora::<alias>, the name used in-tree too. Its
# folders add their sources and headers with amphora_layer().
function(amphora_library name alias)
  add_library(${name} ${AMPHORA_LIBRARY_KIND} ${ARGN})
  add_library(amphora::${alias} ALIAS ${name})
  set_target_properties(${name} PROPERTIES
    EXPORT_NAME ${alias}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_include_directories(${name} PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} PUBLIC cxx_std_20)
  target_compile_options(${name} PRIVATE ${AMPHORA_WARNINGS})
endfunction()

# amphora_layer(<library> SOURCES...): the folder this is called from is one
# layer of <library>: its include/ holds public headers (installed), its src/
# the sources and private headers (never installed). Private headers are
# visible to the library's other layers too, included by file name.
function(amphora_layer library)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  list(TRANSFORM ARGN PREPEND "${dir}/")
  target_sources(${library} PRIVATE ${ARGN})
  if(EXISTS ${dir}/include)
    target_include_directories(${library} PUBLIC $<BUILD_INTERFACE:${dir}/include>)
    set_property(GLOBAL APPEND PROPERTY AMPHORA_PUBLIC_HEADER_DIRS ${dir}/include/)
  endif()
  target_include_directories(${library} PRIVATE ${dir}/src)
endfunction()
