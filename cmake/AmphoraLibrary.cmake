# amphora_library(<name> <alias> SOURCES...): one of Amphora's libraries, with
# its public headers in include/ beside its CMakeLists.txt.
function(amphora_library name alias)
  add_library(${name} ${AMPHORA_LIBRARY_KIND} ${ARGN})
  add_library(amphora::${alias} ALIAS ${name})
  set_target_properties(${name} PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} PUBLIC cxx_std_20)
  # -Wrestrict misfires on std::string concatenation in GCC 12.
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-restrict)
endfunction()
