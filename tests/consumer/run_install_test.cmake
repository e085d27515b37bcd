# Installs the build tree into a scratch prefix, then configures, builds and
# runs tests/consumer against it, then examples/installed (EXAMPLES_DIR).
# Inputs: BUILD_DIR, CONSUMER_DIR, EXAMPLES_DIR, WORK_DIR, SHARED (the libraries
# are shared, so plugins can be built and loaded).
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

include("${CMAKE_CURRENT_LIST_DIR}/../run_support.cmake")

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f include/amphora/store.hpp include/amphora/tensor.hpp include/amphora/storage/medium.hpp
          include/amphora/run_main.hpp include/amphora/version.hpp bin/amphora)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j2)
run("${WORK_DIR}/build/consumer" "${WORK_DIR}/store")
run("${WORK_DIR}/build/consumer_framework" "${WORK_DIR}/store")
run("${WORK_DIR}/build/consumer_tensor_only")
run("${prefix}/bin/amphora" --store "${WORK_DIR}/store" verify)

# Fails the test unless the last command's standard output contains `text`.
function(expect_output text)
  string(FIND "${last_output}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${text}' in the output:\n${last_output}\n${last_error}")
  endif()
endfunction()

# The examples: a type of the program's own, registered; a plugin built out
# of tree with amphora_add_plugin, loaded by a program through the C++ API
# and by the installed command through $AMPHORA_PLUGIN_PATH.
set(examples "${WORK_DIR}/examples")
set(store "${WORK_DIR}/examples-store")
run(${CMAKE_COMMAND} -S "${EXAMPLES_DIR}/installed" -B "${examples}" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${examples}" -j2)
run("${examples}/amphora_custom_type" "${store}")
expect_output("4 bins, equal, verify ok")
if(NOT SHARED)
  message(STATUS "installed package builds and runs a consumer and the examples (no plugins: static libraries)")
  return()
endif()
file(WRITE "${WORK_DIR}/unit.circle" "0.5 -1 2\n")
run("${examples}/amphora_plugin_host" "${examples}/plugins/shapes.so" "${store}" "${WORK_DIR}/unit.circle")
expect_output("loaded plugin shapes 1.0.0")
expect_output("as shapes.circle (shapes::Circle), fields {\"r\":2.0,\"x\":0.5,\"y\":-1.0}, loaded yes, verify ok")
set(with_plugins ${CMAKE_COMMAND} -E env "AMPHORA_PLUGIN_PATH=${examples}/plugins" "${prefix}/bin/amphora" --store "${store}")
run(${with_plugins} plugins)
expect_output("shapes.circle")
run(${with_plugins} verify)
run(${with_plugins} export circle "${WORK_DIR}/back.circle")
file(READ "${WORK_DIR}/back.circle" back)
if(NOT back STREQUAL "0.5 -1 2\n")
  message(FATAL_ERROR "the circle exported through the plugin reads '${back}'")
endif()
run(${CMAKE_COMMAND} -E env --unset=AMPHORA_PLUGIN_PATH "${prefix}/bin/amphora" --store "${store}" show circle)
expect_output("shapes.circle (format 1)  [not registered")
run(${CMAKE_COMMAND} -E env --unset=AMPHORA_PLUGIN_PATH "${prefix}/bin/amphora" --store "${store}" show latency)
expect_output("example.histogram (format 1)  [not registered")
message(STATUS "installed package builds and runs a consumer and the examples")
