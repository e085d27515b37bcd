# amphora_library(<name> <alias> SOURCES...): one of Amphora's libraries, with
# its public headers in include/ beside its CMakeLists.txt.
function(amphora_library name alias)
  add_library(${name} ${AMPHORA_LIBRARY_KIND} ${ARGN})
  add_library(amphora::${alias} ALIAS ${name})
  # Installed as amphora::<alias> too, the name used in-tree.
  set_target_properties(${name} PROPERTIES
    EXPORT_NAME ${alias}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} PUBLIC cxx_std_20)
  target_compile_options(${name} PRIVATE ${AMPHORA_WARNINGS})
endfunction()
